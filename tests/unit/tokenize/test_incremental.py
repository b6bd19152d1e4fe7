from __future__ import annotations

import pytest
from forethought.tokenize import IncrementalDetokenizer, ModelTokenizer

STREAMED_TEXTS = ["Hello 世界 🎉 done", "👩‍👩‍👧‍👦🇫🇷", " leading space, then 日本語\n", "plain ascii words"]


@pytest.mark.parametrize("chunk_size", [1, 2, 3])
@pytest.mark.parametrize("text", STREAMED_TEXTS)
def test_stream_reassembles_exactly_without_broken_characters(
    smollm2: ModelTokenizer, text: str, chunk_size: int
) -> None:
    [ids] = smollm2.encode_batch([text])
    detokenizer = IncrementalDetokenizer(smollm2)
    pieces = [detokenizer.feed(ids[i : i + chunk_size]) for i in range(0, len(ids), chunk_size)]
    pieces.append(detokenizer.flush())
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)


def test_multibyte_character_split_across_chunks_waits_for_its_last_byte(smollm2: ModelTokenizer) -> None:
    [ids] = smollm2.encode_batch(["🎉"])
    assert len(ids) > 1  # the emoji's bytes span several byte-level tokens
    detokenizer = IncrementalDetokenizer(smollm2)
    assert [detokenizer.feed([token]) for token in ids[:-1]] == [""] * (len(ids) - 1)
    assert detokenizer.feed(ids[-1:]) == "🎉"


def test_flush_emits_an_incomplete_tail(smollm2: ModelTokenizer) -> None:
    [ids] = smollm2.encode_batch(["ok🎉"])
    detokenizer = IncrementalDetokenizer(smollm2)
    assert detokenizer.feed(ids[:-1]) == ""  # held back: the chunk ends inside the emoji
    assert detokenizer.flush() == "ok\ufffd"


def test_special_tokens_are_skipped_by_default(smollm2: ModelTokenizer) -> None:
    [ids] = smollm2.encode_batch(["bye"])
    detokenizer = IncrementalDetokenizer(smollm2)
    assert detokenizer.feed(ids + [2]) + detokenizer.flush() == "bye"

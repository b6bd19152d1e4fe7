from __future__ import annotations

import pytest
from forethought.tokenize import ModelTokenizer

ROUND_TRIP_TEXTS = [
    "",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n\n\n",
    "emoji 🎉👩‍👩‍👧‍👦 flags 🇫🇷 skin 👍🏽",
    "中文字符和日本語のテキスト、한국어",
    "mixed: naïve café Ωμέγα ∑∫√ ﬁ ligature",
    "code: def f(x):\n    return x ** 2  # square",
    "<|im_start|> looks special but is typed text",
    "\u200b zero width \u00a0 nbsp",
    "a" * 500,
]


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS, ids=range(len(ROUND_TRIP_TEXTS)))
def test_encode_decode_round_trip_is_exact(smollm2: ModelTokenizer, text: str) -> None:
    [ids] = smollm2.encode_batch([text])
    assert smollm2.decode_batch([ids]) == [text]


def test_batches_keep_order(smollm2: ModelTokenizer) -> None:
    ids = smollm2.encode_batch(ROUND_TRIP_TEXTS)
    assert smollm2.decode_batch(ids) == ROUND_TRIP_TEXTS
    assert smollm2.encode_batch([]) == []


def test_skip_special_tokens_drops_eos(smollm2: ModelTokenizer) -> None:
    [ids] = smollm2.encode_batch(["done"])
    assert smollm2.decode_batch([ids + [2]], skip_special_tokens=True) == ["done"]
    assert smollm2.decode_batch([ids + [2]], skip_special_tokens=False) == ["done<|im_end|>"]


def test_chat_template_renders_roles_and_generation_prompt(smollm2: ModelTokenizer) -> None:
    prompt = smollm2.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 👋"}],
        add_generation_prompt=True,
    )
    assert prompt.text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi 👋<|im_end|>\n<|im_start|>assistant\n"
    )
    assert prompt.token_ids[0] == 1  # <|im_start|> is one special token, not typed text
    assert smollm2.decode(prompt.token_ids) == prompt.text


def test_chat_template_without_generation_prompt(smollm2: ModelTokenizer) -> None:
    prompt = smollm2.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=False)
    assert not prompt.text.endswith("assistant\n")


def test_chat_message_without_content_is_rejected(smollm2: ModelTokenizer) -> None:
    with pytest.raises(ValueError, match=r"messages\[1\]"):
        smollm2.apply_chat_template([{"role": "user", "content": "x"}, {"role": "user"}])

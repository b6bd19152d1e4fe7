"""How prompts become the backbone's inputs: the last tokens kept, and batches whose padding is bounded."""

from __future__ import annotations

import numpy as np
import torch
from forethought.predict.proxy import encode_prompts, packaged_backbone_dir, padding_bounded_batches, prompt_token_ids


def as_lists(batches: list[np.ndarray]) -> list[list[int]]:
    return [batch.tolist() for batch in batches]


def test_short_prompts_are_never_padded_to_a_long_ones_length() -> None:
    counts = [500, 5, 500, 5, 5, 500, 5]
    # the four short rows together; the long ones two at a time, since three would pad past 1,024 tokens
    assert as_lists(padding_bounded_batches(counts, 1024, 64)) == [[1, 3, 4, 6], [0, 2], [5]]


def test_batches_stop_at_the_row_limit_and_a_row_over_the_budget_goes_alone() -> None:
    assert [len(batch) for batch in padding_bounded_batches([1] * 100, 1024, 64)] == [64, 36]
    assert as_lists(padding_bounded_batches([2000, 10, 10], 1024, 64)) == [[1, 2], [0]]
    assert padding_bounded_batches([], 1024, 64) == []


def test_every_row_is_in_one_batch_within_the_budget() -> None:
    counts = np.random.default_rng(0).integers(1, 513, size=300).tolist()
    batches = padding_bounded_batches(counts, 1024, 64)
    assert sorted(np.concatenate(batches).tolist()) == list(range(300))
    for batch in batches:
        longest = max(counts[row] for row in batch)
        assert len(batch) <= 64 and (len(batch) * longest <= 1024 or len(batch) == 1)


def test_a_prompt_keeps_its_last_tokens_and_padding_is_masked() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(packaged_backbone_dir()))
    prompts = ["one two three four five six seven eight nine ten", "short"]
    ids = prompt_token_ids(tokenizer, prompts, 6)
    assert tokenizer.decode(ids[0], skip_special_tokens=True) == "seven eight nine ten"
    encoded = encode_prompts(tokenizer, prompts, 6)
    assert encoded["input_ids"].shape == (2, 6)
    assert torch.equal(encoded["attention_mask"].sum(dim=1), torch.tensor([len(ids[0]), len(ids[1])]))
    assert encoded["input_ids"][1, len(ids[1]):].eq(tokenizer.pad_token_id).all()

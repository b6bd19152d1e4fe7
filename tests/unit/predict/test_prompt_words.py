from __future__ import annotations

import numpy as np
import torch
from forethought.predict.prompt_words import PROMPT_END_CHARS, WordBags, WordTable, model_columns, word_buckets


def test_buckets_are_the_prompts_distinct_words_and_word_pairs_whatever_the_case() -> None:
    buckets = word_buckets("Write a poem. Write a POEM.", 1 << 20)
    # write, a, poem, "." and the pairs: write a, a poem, poem ., . write
    assert len(buckets) == 8 and np.array_equal(buckets, np.unique(buckets))
    assert np.array_equal(buckets, word_buckets("write a poem . write a poem .", 1 << 20))
    assert not np.array_equal(word_buckets("poem a write", 1 << 20), word_buckets("write a poem", 1 << 20))
    assert word_buckets("", 64).size == 0 and word_buckets("x y z", 8).max() < 8


def test_a_long_prompt_is_read_at_both_ends() -> None:
    middle = " ".join(["filler"] * PROMPT_END_CHARS)
    long = f"Summarize this. {middle} unseen {middle} In one line."
    assert len(long) > 2 * PROMPT_END_CHARS
    assert np.array_equal(word_buckets(long, 1 << 20), word_buckets(long.replace("unseen", "filler"), 1 << 20))
    assert not np.array_equal(word_buckets(long, 1 << 20), word_buckets(long.replace("one line", "detail"), 1 << 20))


def test_the_table_adds_the_shared_column_and_the_known_models_own() -> None:
    table = WordTable(16, models=2)
    assert torch.equal(table(table.bags(["a b", "c"]), torch.tensor([0, -1])), torch.zeros(2))
    with torch.no_grad():
        table.weights.weight[:, 0] = 1.0  # first known model
        table.weights.weight[:, 2] = 0.5  # shared
    terms = table(table.bags(["a b", "a b", "a b"]), model_columns(["first", "second"], ["first", "second", "unseen"]))
    assert terms.tolist() == [1.5, 0.5, 0.5]


def test_an_empty_prompt_still_has_a_bag() -> None:
    bags = WordBags.of([np.zeros(0, np.int64), np.array([3, 5])])
    assert bags.buckets.tolist() == [0, 3, 5] and bags.offsets.tolist() == [0, 1]

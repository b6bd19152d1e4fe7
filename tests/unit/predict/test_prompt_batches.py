"""How prompts become the backbone's inputs and states: the last tokens kept, batches whose padding is bounded,
and the traced encoder that serves them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from forethought.predict import Predictor
from forethought.predict.artifact import Forecaster, int8_backbone
from forethought.predict.proxy import (
    encode_prompts,
    packaged_backbone_dir,
    padding_bounded_batches,
    prompt_token_ids,
    traced_encoder,
)


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


@pytest.mark.parametrize("int8", [False, True])
def test_the_traced_encoder_matches_the_backbone_at_every_length_and_padding(int8: bool) -> None:
    from transformers import AutoModel

    backbone = AutoModel.from_pretrained(str(packaged_backbone_dir())).eval()
    backbone = int8_backbone(backbone) if int8 else backbone
    traced = traced_encoder(backbone)
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        # recorded on a batch of 2 x 4 tokens: other batch sizes, lengths up to the window, one token, all unpadded
        for rows, length in ((1, 1), (1, 37), (3, 128), (5, 512)):
            input_ids = torch.randint(1000, 20000, (rows, length), generator=generator)
            mask = torch.ones(rows, length, dtype=torch.long)
            if rows > 1:
                mask[1:, length // 3:] = 0
            expected = backbone(input_ids=input_ids, attention_mask=mask).last_hidden_state
            assert torch.equal(traced(input_ids, mask), expected), (rows, length)
        # it shares the backbone's weights: a change to them is what it computes with
        before = traced(input_ids[:1, :8], mask[:1, :8]).clone()
        backbone.embeddings.LayerNorm.weight.mul_(2.0)
        assert not torch.equal(traced(input_ids[:1, :8], mask[:1, :8]), before)


def test_a_forecaster_embeds_through_its_traced_forward_as_through_the_module(quick_artifact: Path) -> None:
    forecaster = Forecaster.load(quick_artifact)
    prompts = ["Write a haiku about the sea.", "hi", "Explain, step by step, how a hash map resizes. " * 40]
    states = forecaster.embed(prompts)
    plain = forecaster.with_speed(forecaster.config.max_tokens, forecaster.config.backbone_int8, traced=False)
    assert isinstance(forecaster._encoder, torch.jit.ScriptModule) and not isinstance(plain._encoder, torch.jit.ScriptModule)
    assert np.array_equal(states, plain.embed(prompts))
    # a refit head shares the backbone, and so the forward already recorded
    assert forecaster.with_head(forecaster.model.head.state_dict(), forecaster.spread)._encoder is forecaster._encoder


def test_warming_up_and_reloading_record_the_traced_forward_before_any_forecast(quick_artifact: Path) -> None:
    predictor = Predictor.load(quick_artifact)
    assert "_encoder" not in vars(predictor.handle.current)  # nothing recorded at load
    predictor.warm_up()
    assert isinstance(vars(predictor.handle.current)["_encoder"], torch.jit.ScriptModule)
    # a reloaded artifact is swapped in warmed up, with no forecast asked of it
    predictor.reload(quick_artifact)
    assert isinstance(vars(predictor.handle.current)["_encoder"], torch.jit.ScriptModule)

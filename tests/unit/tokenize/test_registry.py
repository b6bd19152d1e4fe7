from __future__ import annotations

from pathlib import Path

import pytest
from forethought.tokenize import ModelTokenizer, TokenizerRegistry, UnknownModel
from forethought.tokenize.builtin import SMOLLM2, converted_folder


def test_unknown_model_names_the_model_and_the_known_ones(registry: TokenizerRegistry) -> None:
    with pytest.raises(UnknownModel, match="'gpt-9'.*SmolLM2-135M-Instruct") as error:
        registry.get("gpt-9")
    assert error.value.model == "gpt-9"


def test_hub_alias_is_the_same_tokenizer(registry: TokenizerRegistry, smollm2: ModelTokenizer) -> None:
    alias = registry.get("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert alias.encode_batch(["Hello world"]) == smollm2.encode_batch(["Hello world"])


def test_smollm2_vocabulary_and_eos(smollm2: ModelTokenizer) -> None:
    assert smollm2.vocab_size == 49152
    assert smollm2.eos_token_id == 2
    assert smollm2.decode([2]) == "<|im_end|>"


def test_registry_loads_a_tokenizer_folder_by_path(smollm2: ModelTokenizer) -> None:
    folder = converted_folder(SMOLLM2)
    by_path = TokenizerRegistry({"my-model": str(folder)}).get("my-model")
    assert by_path.encode_batch(["naïve café 東京"]) == smollm2.encode_batch(["naïve café 東京"])


def test_conversion_is_reproducible(tmp_path: Path) -> None:
    fresh = converted_folder(SMOLLM2, cache_root=tmp_path)
    cached = converted_folder(SMOLLM2)
    assert (fresh / "tokenizer.json").read_bytes() == (cached / "tokenizer.json").read_bytes()
    assert converted_folder(SMOLLM2, cache_root=tmp_path) == fresh


def test_builtin_marker_for_a_non_builtin_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="not a built-in model"):
        TokenizerRegistry({"llama": "builtin"})

from __future__ import annotations

import pytest
from forethought.tokenize import ModelTokenizer, TokenizerRegistry


@pytest.fixture(scope="session")
def registry() -> TokenizerRegistry:
    return TokenizerRegistry()


@pytest.fixture(scope="session")
def smollm2(registry: TokenizerRegistry) -> ModelTokenizer:
    return registry.get("SmolLM2-135M-Instruct")

"""One real vLLM engine (SmolLM2 on CPU, LoRA enabled) shared by every test in this folder.

Starting an engine takes 20-45 s on two cores, so the session shares one. ``lora_adapter`` writes a real
PEFT-format adapter (rank 8 on q_proj and v_proj, B = 0 so outputs equal the base model's).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import torch
from forethought.backends.vllm.backend import VllmEngineBackend, VllmEngineOptions
from safetensors.torch import save_file

LORA_RANK = 8


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vllm_backend() -> AsyncIterator[VllmEngineBackend]:
    backend = VllmEngineBackend(
        VllmEngineOptions(kv_cache_gib=1.0, max_model_len=2048, enable_lora=True, max_lora_rank=LORA_RANK)
    )
    await backend.start()
    print(f"vLLM engine ready in {backend.start_seconds:.1f} s")
    yield backend
    await backend.stop()


@pytest.fixture(scope="session")
def lora_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lora-adapter")
    generator = torch.Generator().manual_seed(0)
    tensors: dict[str, torch.Tensor] = {}
    for layer in range(30):  # SmolLM2-135M: 30 layers, hidden 576, 3 KV heads of 64
        for projection, out_features in (("q_proj", 576), ("v_proj", 192)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{projection}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(LORA_RANK, 576, generator=generator) * 0.01
            tensors[f"{prefix}.lora_B.weight"] = torch.zeros(out_features, LORA_RANK)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": LORA_RANK, "lora_alpha": 16,
        "lora_dropout": 0.0, "bias": "none", "target_modules": ["q_proj", "v_proj"],
    }
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder

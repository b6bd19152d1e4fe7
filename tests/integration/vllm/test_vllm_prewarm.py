"""Prewarming on a real vLLM engine (Hermes section 3.4): KV prefixes hit the cache, LoRA adapters serve."""

from __future__ import annotations

import pytest
from forethought.backends.vllm.backend import VllmEngineBackend
from forethought.domain import GenerationChunk, GenerationRequest, SamplingParams
from forethought.models import resolve_model
from forethought.prewarm import ModelLifecycle, PrewarmAgent, PrewarmKind, PrewarmStatus
from transformers import AutoTokenizer

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

DOCUMENT = (
    "Quarterly report. Revenue grew in every region; the northern stores opened late because of "
    "snow, the harbour warehouse was rebuilt, and the new delivery vans cut fuel use by a fifth. "
)


async def _final(backend: VllmEngineBackend, request_id: str, prompt: tuple[int, ...]) -> GenerationChunk:
    request = GenerationRequest(request_id, prompt, 1, sampling=SamplingParams(temperature=0.0))
    return [chunk async for chunk in backend.generate(request)][-1]


async def test_prewarmed_prefix_is_cached_for_the_next_request(vllm_backend: VllmEngineBackend) -> None:
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("SmolLM2-135M-Instruct"))
    question = tuple(tokenizer.encode(" Question: which region grew most?"))
    warm_doc = tuple(tokenizer.encode("Report A. " + DOCUMENT * 6))
    cold_doc = tuple(tokenizer.encode("Report B. " + DOCUMENT.upper() * 6))
    agent = PrewarmAgent(ModelLifecycle(lambda _model: vllm_backend))
    await agent.lifecycle.load(vllm_backend.model)

    prewarm = await agent.prewarm_prefix(vllm_backend.model, warm_doc)
    cold = await _final(vllm_backend, "cold", cold_doc + question)
    warm = await _final(vllm_backend, "warm", warm_doc + question)

    assert prewarm.status is PrewarmStatus.READY
    assert cold.usage is not None and warm.usage is not None
    print(
        f"\nprefix {len(warm_doc)} tokens prewarmed in {prewarm.warmup_s * 1000:.0f} ms; "
        f"TTFT cold {cold.usage.ttft_s * 1000:.1f} ms ({cold.usage.cached_prompt_tokens} cached) vs "
        f"prewarmed {warm.usage.ttft_s * 1000:.1f} ms ({warm.usage.cached_prompt_tokens} cached)"
    )
    assert warm.usage.cached_prompt_tokens >= len(warm_doc) - 32
    assert agent.use_prefix(vllm_backend.model, warm_doc + question) is True


async def test_prewarmed_lora_adapter_serves_requests(vllm_backend: VllmEngineBackend, lora_adapter) -> None:
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("SmolLM2-135M-Instruct"))
    agent = PrewarmAgent(ModelLifecycle(lambda _model: vllm_backend))
    await agent.lifecycle.load(vllm_backend.model)

    result = await agent.prewarm_lora(vllm_backend.model, "zero-delta", lora_adapter)
    prompt = tuple(tokenizer.encode("The capital of France is"))
    request = GenerationRequest(
        "with-lora", prompt, 4, sampling=SamplingParams(temperature=0.0), lora_name="zero-delta"
    )
    text = "".join([c.text async for c in vllm_backend.generate(request)])

    print(f"\nLoRA adapter loaded in {result.warmup_s * 1000:.1f} ms")
    assert result.status is PrewarmStatus.READY
    assert "Paris" in text  # B = 0: the adapter leaves the base model's answer unchanged
    assert agent.use(PrewarmKind.LORA, "zero-delta") is True

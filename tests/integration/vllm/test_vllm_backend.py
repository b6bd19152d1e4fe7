"""VllmEngineBackend on a real engine: streaming, abort, prefix-cache usage and cache events."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence

import pytest
from forethought.backends.vllm.backend import VllmEngineBackend
from forethought.domain import (
    BlockStored,
    CacheEvent,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    InvalidField,
    SamplingParams,
    ServiceClass,
    StructuredOutput,
)
from forethought.domain.block_hashes import chained_block_hashes
from forethought.models import resolve_model
from transformers import AutoTokenizer

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

GREEDY = SamplingParams(temperature=0.0)
STORY = (
    "In a quiet village by the sea, an old lighthouse keeper kept a journal of every ship that "
    "passed. Each night he wrote the names, the colours of their sails and the songs of the crews. "
)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_model("SmolLM2-135M-Instruct"))


async def _collect(backend: VllmEngineBackend, request: GenerationRequest) -> list[GenerationChunk]:
    return [chunk async for chunk in backend.generate(request)]


async def test_known_prompt_streams_paris(vllm_backend: VllmEngineBackend, tokenizer) -> None:
    ids = tuple(tokenizer.encode("The capital of France is"))
    chunks = await _collect(vllm_backend, GenerationRequest("paris", ids, 8, sampling=GREEDY))

    text = "".join(chunk.text for chunk in chunks)
    assert "Paris" in text
    assert len(chunks) > 1, "tokens arrive as a stream, not one reply"
    final = chunks[-1]
    assert final.finish_reason in (FinishReason.LENGTH, FinishReason.STOP)
    assert final.usage is not None
    assert final.usage.prompt_tokens == len(ids)
    assert final.usage.output_tokens == sum(len(c.token_ids) for c in chunks)
    assert tokenizer.decode([t for c in chunks for t in c.token_ids]) == text
    assert final.usage.ttft_s > 0


async def test_what_the_engine_cannot_serve_is_refused_naming_the_field(
    vllm_backend: VllmEngineBackend, tokenizer
) -> None:
    assert vllm_backend.vocabulary_size == len(tokenizer) == 49152
    ids = tuple(tokenizer.encode("Hello"))
    # Refused as the sampling parameters are built, then as the engine takes the request.
    for field, sampling in (("sampling.temperature", SamplingParams(temperature=3.0)),
                            ("sampling.stop_token_ids", SamplingParams(stop_token_ids=(10**8,)))):
        with pytest.raises(InvalidField) as refused:
            await _collect(vllm_backend, GenerationRequest(f"refused-{field}", ids, 4, sampling=sampling))
        assert refused.value.field == field
        assert refused.value.rule.startswith("refused by the vLLM engine: ")
    with pytest.raises(InvalidField) as refused:
        await _collect(vllm_backend, GenerationRequest("no-such-adapter", ids, 4, lora_name="no-such-adapter"))
    assert refused.value.field == "lora_adapter" and "not loaded" in refused.value.rule
    assert vllm_backend.num_unfinished_requests() == 0


async def test_each_token_comes_with_its_log_probability_when_asked(vllm_backend: VllmEngineBackend, tokenizer) -> None:
    ids = tuple(tokenizer.encode("The capital of France is"))
    sampling = SamplingParams(temperature=0.0, logprobs=3)
    chunks = await _collect(vllm_backend, GenerationRequest("logprobs", ids, 6, sampling=sampling))
    positions = [position for chunk in chunks for position in chunk.logprobs]
    assert [position.chosen.token_id for position in positions] == [token for chunk in chunks for token in chunk.token_ids]
    assert "".join(position.chosen.token for position in positions) == "".join(chunk.text for chunk in chunks)
    for position in positions:
        alternatives = [each.logprob for each in position.top]
        assert len(alternatives) == 3 and alternatives == sorted(alternatives, reverse=True) and alternatives[0] <= 0
        assert position.top[0] == position.chosen  # greedy: the likeliest token is the one chosen
    plain = await _collect(vllm_backend, GenerationRequest("no-logprobs", ids, 6, sampling=GREEDY))
    assert all(not chunk.logprobs and not chunk.prompt_logprobs for chunk in plain)


async def test_the_prompts_tokens_are_scored_once_on_the_first_chunk(vllm_backend: VllmEngineBackend, tokenizer) -> None:
    ids = tuple(tokenizer.encode("The capital of France is Paris"))
    sampling = SamplingParams(temperature=0.0, prompt_logprobs=2)
    chunks = await _collect(vllm_backend, GenerationRequest("prompt-logprobs", ids, 2, sampling=sampling))
    prompt = chunks[0].prompt_logprobs
    assert all(not chunk.prompt_logprobs for chunk in chunks[1:])
    assert [position.chosen.token_id for position in prompt] == list(ids)
    assert "".join(position.chosen.token for position in prompt) == "The capital of France is Paris"
    assert prompt[0].chosen.logprob is None and prompt[0].top == ()  # nothing predicts the first token
    assert all(position.chosen.logprob is not None and position.chosen.logprob <= 0 and len(position.top) == 2
               for position in prompt[1:])
    paris = prompt[-1]
    assert paris.chosen.logprob > -3, paris  # a model that knows its capitals expects " Paris" here


async def test_a_structured_output_holds_the_answer_to_its_form(vllm_backend: VllmEngineBackend, tokenizer) -> None:
    ids = tuple(tokenizer.encode("Is Paris the capital of France? Answer:"))

    async def answer(name: str, form: StructuredOutput, max_tokens: int = 24) -> str:
        request = GenerationRequest(f"form-{name}", ids, max_tokens, sampling=SamplingParams(temperature=0.0, structured_output=form))
        return "".join(chunk.text for chunk in await _collect(vllm_backend, request))

    assert await answer("choice", StructuredOutput(choice=("yes", "no"))) in {"yes", "no"}
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", await answer("regex", StructuredOutput(regex=r"[0-9]{3}-[0-9]{4}")))
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}}, "required": ["answer"]}
    assert json.loads(await answer("schema", StructuredOutput(json_schema=json.dumps(schema)), 40))["answer"] in {"yes", "no"}
    with pytest.raises(InvalidField) as refused:  # vLLM compiles the form: its refusal names the field
        await answer("bad-regex", StructuredOutput(regex="(["))
    assert refused.value.field == "sampling.structured_output" and "regex" in refused.value.rule
    assert vllm_backend.num_unfinished_requests() == 0


async def test_penalties_steer_a_greedy_answer_away_from_repeating_itself(
    vllm_backend: VllmEngineBackend, tokenizer
) -> None:
    ids = tuple(tokenizer.encode("List the days of the week, then list them again, and again:"))

    async def greedy(name: str, **penalties: float) -> list[int]:
        sampling = SamplingParams(temperature=0.0, ignore_eos=True, **penalties)
        chunks = await _collect(vllm_backend, GenerationRequest(f"penalty-{name}", ids, 40, sampling=sampling))
        return [token for chunk in chunks for token in chunk.token_ids]

    plain = await greedy("none")
    assert plain == await greedy("none-again"), "greedy decoding is deterministic"
    penalised = {name: await greedy(name, **{name: value}) for name, value in
                 (("frequency_penalty", 2.0), ("presence_penalty", 2.0), ("repetition_penalty", 1.5))}
    assert all(tokens != plain for tokens in penalised.values()), "each penalty reaches the engine"
    # The answer without a penalty repeats tokens; a frequency penalty makes its most repeated token rarer.
    most_repeated = {name: Counter(tokens).most_common(1)[0][1] for name, tokens in (("none", plain), *penalised.items())}
    assert most_repeated["frequency_penalty"] < most_repeated["none"], most_repeated


async def test_cancelling_the_stream_aborts_on_the_engine(
    vllm_backend: VllmEngineBackend, tokenizer
) -> None:
    ids = tuple(tokenizer.encode("Count slowly from one to one thousand:"))
    request = GenerationRequest(
        "to-cancel", ids, 1500, ServiceClass.RT, sampling=SamplingParams(temperature=0.0, ignore_eos=True)
    )
    seen = asyncio.Event()

    async def consume() -> None:
        async for _chunk in vllm_backend.generate(request):
            seen.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(seen.wait(), 30)
    assert vllm_backend.stats().rt.running == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):  # the abort travels to the engine process; allow up to 5 s
        if vllm_backend.num_unfinished_requests() == 0:
            break
        await asyncio.sleep(0.05)
    assert vllm_backend.num_unfinished_requests() == 0
    assert vllm_backend.stats().rt.running == 0


async def test_abort_by_id_ends_the_stream_with_abort(
    vllm_backend: VllmEngineBackend, tokenizer
) -> None:
    ids = tuple(tokenizer.encode("Write a very long poem about rivers."))
    request = GenerationRequest(
        "to-abort", ids, 1500, sampling=SamplingParams(temperature=0.0, ignore_eos=True)
    )
    chunks: list[GenerationChunk] = []

    async def consume() -> None:
        async for chunk in vllm_backend.generate(request):
            chunks.append(chunk)

    task = asyncio.create_task(consume())
    while not chunks:
        await asyncio.sleep(0.02)
    assert await vllm_backend.abort("to-abort") is True
    await asyncio.wait_for(task, 10)
    assert chunks[-1].finish_reason == FinishReason.ABORT
    assert await vllm_backend.abort("to-abort") is False
    assert vllm_backend.num_unfinished_requests() == 0


async def test_shared_prefix_hits_the_cache_and_reports_our_block_hashes(
    vllm_backend: VllmEngineBackend, tokenizer
) -> None:
    prefix = tuple(tokenizer.encode(STORY * 3))
    batches: list[Sequence[CacheEvent]] = []

    async def listen() -> None:
        async for batch in vllm_backend.cache_events():
            batches.append(batch)

    listener = asyncio.create_task(listen())
    await asyncio.sleep(0.1)
    first = await _collect(vllm_backend, GenerationRequest("p1", prefix + (42,), 2, sampling=GREEDY))
    second = await _collect(vllm_backend, GenerationRequest("p2", prefix + (7,), 2, sampling=GREEDY))
    await asyncio.sleep(0.5)  # events cross a socket after the step that stored the blocks
    listener.cancel()

    assert first[-1].usage is not None and second[-1].usage is not None
    cached = second[-1].usage.cached_prompt_tokens
    print(f"prompt {len(prefix) + 1} tokens, cached on the second request: {cached}")
    assert cached >= 32
    stored = [h for batch in batches for e in batch if isinstance(e, BlockStored) for h in e.block_hashes]
    expected = chained_block_hashes(prefix[:cached], 16)
    assert stored[: len(expected)] == expected
    stats = vllm_backend.stats()
    assert stats.block_size == 16
    assert stats.total_kv_blocks > 0
    assert stats.prefix_hit_ratio > 0
    assert stats.prefill_tokens_per_s > 0

"""A real vLLM engine behind ``EngineBackend`` (DESIGN.md, Engines; BROS section 4 via priorities).

``VllmEngineBackend`` wraps vLLM's in-process ``AsyncLLM`` front end (the engine core runs in its own
process): token-id prompts in, streamed token ids and text out, priority scheduling (lower first),
automatic prefix caching, abort on cancel, usage with cached prompt tokens and measured TTFT in the last
chunk. Load comes from a stat logger vLLM calls every step; prefix state from vLLM's KV cache events,
re-hashed into the project's chained block hashes (``vllm_events``). What of BROS this can honour is
written down in ``docs/vllm.md``. On a CPU the model runs in the engine-core process (``uni`` executor),
in float32 unless the operator asks for another dtype (``cpu_dtype``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from forethought.backends.vllm.bros_scheduler import slo_extra_args
from forethought.backends.vllm.cpu_dtype import AUTO, resolve_dtype
from forethought.backends.vllm.events import KvEventSubscriber, KvEventTranslator
from forethought.backends.vllm.stats import LoadMonitor
from forethought.domain import (
    CacheEvent,
    EngineStats,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    InvalidField,
    PositionLogprobs,
    SamplingParams,
    StructuredOutput,
    TokenLogprob,
    Usage,
)
from forethought.models import resolve_model
from vllm import SamplingParams as VllmSamplingParams
from vllm.config import KVEventsConfig
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.exceptions import VLLMValidationError
from vllm.inputs import TokensPrompt
from vllm.logprobs import Logprob
from vllm.lora.request import LoRARequest
from vllm.platforms import current_platform
from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.metrics.loggers import StatLoggerBase

_FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "abort": FinishReason.ABORT,
    "error": FinishReason.ERROR,
}


@dataclass(frozen=True)
class VllmEngineOptions:
    """How to start the engine.

    ``block_size`` is vLLM's KV block (CPU attention needs a multiple of 32); ``index_block_size`` is
    the granularity of the hashes reported in cache events (the prefix index's block, 16).
    """

    model: str = "SmolLM2-135M-Instruct"
    max_model_len: int = 2048
    kv_cache_gib: float = 1.0
    block_size: int = 32
    index_block_size: int = 16
    dtype: str = AUTO
    """``"auto"``: float32 on a CPU, vLLM's choice on a GPU."""
    enforce_eager: bool = True
    max_num_seqs: int = 64
    enable_lora: bool = False
    max_lora_rank: int = 16
    scheduler_cls: str | type | None = None
    """None for vLLM's own scheduler; ``BrosVllmScheduler`` for BROS's RT/BE ordering."""
    seed: int = 0
    executor: str = "uni"
    """vLLM's ``distributed_executor_backend``: ``uni`` runs the model in the engine-core process; ``mp``
    in a worker process of its own, which on a CPU pins its OpenMP threads to cores (docs/vllm.md)."""
    cpu_threads: int = 0
    """OpenMP threads of the ``uni`` executor on a CPU; 0: every usable CPU but one, as vLLM reserves."""
    engine_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables set while the engine starts, so its processes inherit them."""
    tensor_parallel_size: int = 1
    """Devices one replica of the model is split over (vLLM's ``tensor_parallel_size``; a GPU host). Above 1
    a ``uni`` executor becomes ``mp``: vLLM's single-process executor runs one device only."""

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be >= 1, got {self.tensor_parallel_size}")
        if self.block_size % self.index_block_size:
            raise ValueError(
                f"block_size {self.block_size} must be a multiple of index_block_size "
                f"{self.index_block_size}"
            )


class _MonitorStatLogger(StatLoggerBase):
    """Forwards vLLM's per-step scheduler and iteration stats into a ``LoadMonitor``."""

    def __init__(self, monitor: LoadMonitor) -> None:
        self._monitor = monitor

    def record(
        self,
        scheduler_stats: Any,
        iteration_stats: Any,
        mm_cache_stats: Any = None,
        engine_idx: int = 0,
    ) -> None:
        queries = hits = 0
        if scheduler_stats is not None:
            self._monitor.kv_cache_usage = scheduler_stats.kv_cache_usage
            queries = scheduler_stats.prefix_cache_stats.queries
            hits = scheduler_stats.prefix_cache_stats.hits
        prefill = decode = 0
        if iteration_stats is not None:
            prefill = iteration_stats.prompt_token_stats.computed
            decode = iteration_stats.num_generation_tokens
            for finished in iteration_stats.finished_requests:
                self._monitor.record_queueing_delay(finished.queued_time)
        self._monitor.record_iteration(prefill, decode, queries, hits)

    def log_engine_initialized(self) -> None:
        """Nothing to log: the backend reports readiness itself."""


@contextlib.contextmanager
def _environment(variables: Mapping[str, str]) -> Iterator[None]:
    """``variables`` set in ``os.environ`` inside the block, the previous values restored after it."""
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _to_vllm_sampling(request: GenerationRequest) -> VllmSamplingParams:
    sampling = request.sampling
    return VllmSamplingParams(
        max_tokens=request.max_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        seed=sampling.seed,
        stop=list(sampling.stop) or None,
        stop_token_ids=list(sampling.stop_token_ids) or None,
        ignore_eos=sampling.ignore_eos,
        presence_penalty=sampling.presence_penalty,
        frequency_penalty=sampling.frequency_penalty,
        repetition_penalty=sampling.repetition_penalty,
        logprobs=sampling.logprobs,
        prompt_logprobs=sampling.prompt_logprobs,
        structured_outputs=_structured(sampling.structured_output),
        output_kind=RequestOutputKind.DELTA,
        extra_args=slo_extra_args(request),
    )


def _structured(form: StructuredOutput | None) -> StructuredOutputsParams | None:
    if form is None:
        return None
    return StructuredOutputsParams(json=json.loads(form.json_schema) if form.json_schema else None,
                                   json_object=form.json_object or None, regex=form.regex or None,
                                   choice=list(form.choice) or None, grammar=form.grammar or None)


def positions_of(token_ids: Sequence[int], positions: Sequence[Mapping[int, Logprob]] | None,
                 alternatives: int) -> tuple[PositionLogprobs, ...]:
    """vLLM's log probabilities of the new tokens in this contract's form (none when not asked for). vLLM gives
    a mapping per position: the sampled token and the likeliest ``alternatives``, each with its rank."""
    if not positions:
        return ()
    return tuple(_position(token_id, position, alternatives) for token_id, position in zip(token_ids, positions, strict=True))


def _position(token_id: int, position: Mapping[int, Logprob], alternatives: int) -> PositionLogprobs:
    ranked = sorted((value.rank, candidate) for candidate, value in position.items()
                    if value.rank is not None and value.rank <= alternatives)
    return PositionLogprobs(_scored(token_id, position[token_id]),
                            tuple(_scored(candidate, position[candidate]) for _, candidate in ranked))


def _scored(token_id: int, value: Logprob) -> TokenLogprob:
    return TokenLogprob(token_id, value.logprob, value.decoded_token or "")


def refusal_of(error: VLLMValidationError, request: GenerationRequest) -> InvalidField:
    """vLLM's refusal of a request as this contract's field: its rules that the worker does not check up front
    (they change with vLLM's version) come back as INVALID_ARGUMENT, not as an internal error. vLLM names no
    parameter when it cannot compile a structured output's schema, regex or grammar."""
    parameter = error.parameter or ""
    sampling = {item.name for item in fields(SamplingParams)}
    if not parameter and request.sampling.structured_output is not None:
        parameter = "structured_output"
    field = f"sampling.{parameter}" if parameter in sampling else "max_tokens" if parameter == "max_tokens" else "request"
    return InvalidField(field, f"refused by the vLLM engine: {error.args[0] if error.args else error}")


def compute_threads(requested: int, usable_cpus: int) -> int:
    """``requested`` threads, or for 0 every usable CPU but one (left to the front end), at least one."""
    return requested if requested > 0 else max(1, usable_cpus - 1)


def executor_of(options: VllmEngineOptions) -> str:
    """vLLM's ``distributed_executor_backend`` for ``options``: ``mp`` in place of ``uni`` for a model split
    over several devices."""
    return "mp" if options.executor == "uni" and options.tensor_parallel_size > 1 else options.executor


def start_environment(options: VllmEngineOptions, on_cpu: bool, usable_cpus: int) -> dict[str, str]:
    """The environment an engine of ``options`` starts in: what the executor needs, then ``engine_env``."""
    env: dict[str, str] = {}
    if executor_of(options) == "uni" and on_cpu:
        # vLLM's CPU platform turns a uni executor into mp unless multiprocessing is off.
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # Without mp's binding, torch would start one thread per CPU, the front end's included.
        env["OMP_NUM_THREADS"] = str(compute_threads(options.cpu_threads, usable_cpus))
    return env | dict(options.engine_env)


def engine_args(
    options: VllmEngineOptions, model_path: Path, dtype: str, kv_endpoint: str
) -> AsyncEngineArgs:
    """vLLM's arguments for ``options`` with the model at ``model_path`` and ``dtype`` resolved."""
    return AsyncEngineArgs(
        model=str(model_path),
        served_model_name=[options.model],
        max_model_len=options.max_model_len,
        tensor_parallel_size=options.tensor_parallel_size,
        kv_cache_memory_bytes=int(options.kv_cache_gib * (1 << 30)),
        block_size=options.block_size,
        dtype=dtype,
        distributed_executor_backend=executor_of(options),
        enforce_eager=options.enforce_eager,
        enable_prefix_caching=True,
        scheduling_policy="priority",
        scheduler_cls=options.scheduler_cls,
        max_num_seqs=options.max_num_seqs,
        enable_lora=options.enable_lora,
        max_lora_rank=options.max_lora_rank,
        seed=options.seed,
        kv_events_config=KVEventsConfig(
            enable_kv_cache_events=True, publisher="zmq", endpoint=kv_endpoint, topic="kv"
        ),
    )


class VllmEngineBackend:
    """``EngineBackend`` over vLLM's ``AsyncLLM``; create, ``await start()``, serve, ``await stop()``."""

    detokenizes = True
    runs_model = True

    def __init__(
        self, options: VllmEngineOptions, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.options = options
        self.model = options.model
        self.start_seconds = 0.0
        """How long ``start()`` took: model load, KV cache allocation, engine process start."""
        self.dtype = options.dtype
        """The compute dtype the engine runs in, ``options.dtype`` with ``"auto"`` resolved at start."""
        self._clock = clock
        self._monitor = LoadMonitor(clock)
        self._engine: AsyncLLM | None = None
        self._events: KvEventSubscriber | None = None
        self._loras: dict[str, LoRARequest] = {}
        self._vocabulary_size: int | None = None  # known once the engine has started
        self._kv_socket = Path(tempfile.gettempdir()) / f"forethought-kv-{uuid.uuid4().hex[:12]}"

    @property
    def engine(self) -> AsyncLLM:
        """The running vLLM engine (for benchmarks comparing against it directly)."""
        if self._engine is None:
            raise RuntimeError("the vLLM engine is not started; await start() first")
        return self._engine

    @property
    def supports_lora(self) -> bool:
        return self.options.enable_lora

    @property
    def max_request_tokens(self) -> int:
        return self.options.max_model_len

    @property
    def vocabulary_size(self) -> int | None:
        return self._vocabulary_size

    async def start(self) -> None:
        if self._engine is not None:
            return
        started = self._clock()
        endpoint = f"ipc://{self._kv_socket}"
        # The first use of a known model name converts it (about 20 s): also off the event loop.
        model_path = await asyncio.to_thread(resolve_model, self.options.model)
        self.dtype = resolve_dtype(self.options.dtype, current_platform.is_cpu())
        args = engine_args(self.options, model_path, self.dtype, endpoint)
        monitor = self._monitor

        def stat_logger(_config: object, _engine_index: int) -> StatLoggerBase:
            return _MonitorStatLogger(monitor)

        # Built off the event loop: loading takes tens of seconds and AsyncLLM starts its loop tasks
        # lazily on the first request when constructed outside a running loop.
        env = start_environment(self.options, current_platform.is_cpu(), len(os.sched_getaffinity(0)))
        # NOTE: os.environ is the process's: engines started at once in one process share these values.
        with _environment(env):
            self._engine = await asyncio.to_thread(
                AsyncLLM.from_engine_args, args, stat_loggers=[stat_logger]
            )
        # vLLM's own bound: ids past the model's vocabulary or the tokenizer's, whichever is larger.
        tokenizer = self._engine.tokenizer
        self._vocabulary_size = max(self._engine.vllm_config.model_config.get_vocab_size(),
                                    tokenizer.max_token_id + 1 if tokenizer is not None else 0)
        vllm_blocks = self._engine.vllm_config.cache_config.num_gpu_blocks or 0
        # Reported in index blocks, the unit of EngineStats.block_size and of the cache events.
        per_vllm_block = self.options.block_size // self.options.index_block_size
        self._monitor.total_kv_blocks = vllm_blocks * per_vllm_block
        self._events = KvEventSubscriber(
            endpoint, "kv", KvEventTranslator(self.options.index_block_size)
        )
        await self._events.start()
        self.start_seconds = self._clock() - started

    async def stop(self) -> None:
        if self._engine is None:
            return
        engine, self._engine = self._engine, None
        inflight = self._monitor.inflight_ids()
        if inflight:
            await engine.abort(inflight)
        if self._events is not None:
            await self._events.stop()
            self._events = None
        engine.shutdown()
        # ZeroMQ leaves the ipc socket file behind when the publisher closes.
        self._kv_socket.unlink(missing_ok=True)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        """Streams the request; closing or cancelling the iterator aborts it on the engine."""
        engine = self.engine
        lora = self._loras.get(request.lora_name) if request.lora_name else None
        if request.lora_name and lora is None:
            loaded = ", ".join(sorted(self._loras)) or "none"
            raise InvalidField("lora_adapter", f"{request.lora_name!r} is not loaded on this worker's engine (loaded: "
                                               f"{loaded}); prewarm it first (PrewarmRequest, kind LORA)")
        try:
            sampling = _to_vllm_sampling(request)
        except VLLMValidationError as refused:
            raise refusal_of(refused, request) from None
        submitted = self._clock()
        self._monitor.submitted(request.request_id, request.service_class)
        stream = engine.generate(
            TokensPrompt(prompt_token_ids=list(request.prompt_token_ids)),
            sampling,
            request.request_id,
            priority=request.priority,
            lora_request=lora,
        )
        ttft = 0.0
        output_tokens = 0
        try:
            async for output in stream:
                completion = output.outputs[0]
                if completion.token_ids and output_tokens == 0:
                    ttft = self._clock() - submitted
                    self._monitor.first_token(request.request_id)
                output_tokens += len(completion.token_ids)
                yield self._chunk(request, output, ttft, output_tokens)
        except VLLMValidationError as refused:  # raised as the engine takes the request, before any output
            raise refusal_of(refused, request) from None
        finally:
            self._monitor.finished(request.request_id)
            # Closing vLLM's stream aborts the request there when it has not finished.
            await stream.aclose()

    def _chunk(
        self, request: GenerationRequest, output: Any, ttft: float, output_tokens: int
    ) -> GenerationChunk:
        completion = output.outputs[0]
        token_ids = tuple(completion.token_ids)
        logprobs = positions_of(token_ids, completion.logprobs, request.sampling.logprobs or 0)
        prompt_logprobs = self._prompt_positions(request, output.prompt_logprobs)
        if not output.finished:
            return GenerationChunk(request.request_id, token_ids, completion.text, logprobs=logprobs,
                                   prompt_logprobs=prompt_logprobs)
        usage = Usage(
            prompt_tokens=len(request.prompt_token_ids),
            cached_prompt_tokens=output.num_cached_tokens or 0,
            output_tokens=output_tokens,
            ttft_s=ttft,
        )
        reason = _FINISH_REASONS.get(completion.finish_reason or "stop", FinishReason.STOP)
        return GenerationChunk(request.request_id, token_ids, completion.text, reason, usage, logprobs, prompt_logprobs)

    def _prompt_positions(self, request: GenerationRequest,
                          positions: Sequence[Mapping[int, Logprob] | None] | None) -> tuple[PositionLogprobs, ...]:
        """The prompt's scores when this output carries them (the first does): vLLM gives none for the first
        token, which nothing predicts, so only its text is told."""
        if not positions:
            return ()
        first = request.prompt_token_ids[0]
        text = self.engine.tokenizer.decode([first]) if self.engine.tokenizer is not None else ""
        return (PositionLogprobs(TokenLogprob(first, None, text)),
                *positions_of(request.prompt_token_ids[1:], positions[1:], request.sampling.prompt_logprobs or 0))

    async def abort(self, request_id: str) -> bool:
        if self._engine is None or not self._monitor.is_inflight(request_id):
            return False
        await self._engine.abort(request_id)
        return True

    def failure(self) -> str | None:
        if self._engine is not None and self._engine.errored:
            return "the vLLM engine died (its engine core process or output loop ended)"
        return None

    def stats(self) -> EngineStats:
        return self._monitor.snapshot(self.options.index_block_size)

    async def cache_events(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Translated cache events from the moment of the call until the engine stops."""
        if self._events is None:
            raise RuntimeError("the vLLM engine is not started; await start() first")
        async for batch in self._events.batches():
            yield batch

    async def add_lora(self, name: str, path: str | Path) -> float:
        """Loads a LoRA adapter into the engine; returns the seconds it took."""
        if not self.options.enable_lora:
            raise NotImplementedError("the engine was started without enable_lora")
        started = self._clock()
        lora = self._loras.get(name) or LoRARequest(name, len(self._loras) + 1, str(path))
        await self.engine.add_lora(lora)
        self._loras[name] = lora
        return self._clock() - started

    def num_unfinished_requests(self) -> int:
        """Requests vLLM itself still tracks (ours and any added to ``engine`` directly)."""
        return self.engine.get_num_unfinished_requests()

"""The native iteration-level engine core (BROS sections 3-5, Preble section 4.3).

``EngineCore.step(now)`` is one iteration: ``Scheduler.schedule`` picks and commits a batch, the executor
says how long it takes, and ``_update`` advances the requests, samples tokens, seals computed prompt blocks
into the prefix cache and finishes requests. The core has no clock of its own: the caller passes ``now``
and advances its clock by ``StepOutput.duration_s``, in virtual time (the simulator) or real time
(``SimEngineBackend``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forethought.domain import (
    BlockRemoved,
    BlockStored,
    CacheEvent,
    ClassLoad,
    EngineStats,
    GenerationRequest,
    Usage,
)
from forethought.domain.block_hashes import ROOT_PARENT
from forethought.engine.block_manager import BidirectionalBlockManager
from forethought.engine.executor import Executor, IterationEstimator
from forethought.engine.kv_blocks import SealOutcome
from forethought.engine.metrics import IterationMetrics, LoadWindow, RequestOutcome
from forethought.engine.policies import ARRIVAL_GUARD_SHARE, POLICIES, make_policy
from forethought.engine.prefix_cache import PrefixCache
from forethought.engine.request import EngineRequest, EngineRequestStatus
from forethought.engine.scheduler import Scheduler, SchedulerOutput, running_by_class
from forethought.engine.tokens import SeededTokenSource, TokenSource

# NOTE: looking up an enum member (``SealOutcome.STORED``) costs a descriptor call on Python 3.11,
# about ten times a global read; the per-request loops read these aliases instead.
_REFUSED, _STORED = SealOutcome.REFUSED, SealOutcome.STORED


@dataclass(frozen=True)
class EngineConfig:
    """Engine knobs. ``host_tier_blocks``: host memory for lazy checkpoints, in blocks.

    ``chunked_prefill_tokens``: tokens one iteration may compute (decodes count one each), which chunks
    long prompts. ``priority_groups``: Preble's P (0 keeps arrival order). ``arrival_guard_share``: of the
    recent RT arrivals' TTFT objective, what a BROS iteration that adds BE may take (``math.inf``:
    unbounded). ``eos_token_id``: ends a request unless ``ignore_eos``. ``stats_window_s``: the window of
    the rates in ``stats()``.
    """

    num_blocks: int
    block_size: int = 16
    policy: str = "bros"
    bidirectional_kv: bool = True
    prefix_cache: bool = True
    host_tier_blocks: int = 256
    max_batch_size: int = 256
    initial_batch_size: int = 8
    chunked_prefill_tokens: int = 2048
    priority_groups: int = 10
    arrival_guard_share: float = ARRIVAL_GUARD_SHARE
    eos_token_id: int | None = None
    stats_window_s: float = 10.0

    def __post_init__(self) -> None:
        positive = ("num_blocks", "block_size", "max_batch_size", "initial_batch_size",
                    "chunked_prefill_tokens", "stats_window_s", "arrival_guard_share")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"EngineConfig.{name} must be positive")
        if self.host_tier_blocks < 0 or self.priority_groups < 0:
            raise ValueError("EngineConfig.host_tier_blocks and priority_groups must be >= 0")
        if self.initial_batch_size > self.max_batch_size:
            raise ValueError("EngineConfig.initial_batch_size must be <= max_batch_size")
        if self.policy not in POLICIES:
            raise ValueError(f"EngineConfig.policy must be one of {sorted(POLICIES)}, not {self.policy!r}")

    @property
    def total_slots(self) -> int:
        return self.num_blocks * self.block_size


@dataclass(frozen=True)
class StepOutput:
    """One iteration's effects; the caller advances its clock by ``duration_s``."""

    duration_s: float
    new_tokens: Mapping[str, tuple[int, ...]]
    finished: Mapping[str, RequestOutcome]
    cache_events: tuple[CacheEvent, ...]
    metrics: IterationMetrics


@dataclass
class _Update:
    new_tokens: dict[str, tuple[int, ...]] = field(default_factory=dict)
    finished: dict[str, RequestOutcome] = field(default_factory=dict)
    events: list[CacheEvent] = field(default_factory=list)
    counts: list[list[int]] = field(default_factory=lambda: [[0, 0, 0], [0, 0, 0]])
    """[requests, prefill tokens, decode tokens] of RT (row 0) and BE (row 1)."""


class EngineCore:
    """Requests in, tokens out, one ``step`` at a time."""

    def __init__(
        self, config: EngineConfig, executor: Executor, token_ids_for: TokenSource | None = None
    ) -> None:
        self.config = config
        self.executor = executor
        self.token_ids_for = token_ids_for or SeededTokenSource()
        self.prefix_cache = PrefixCache() if config.prefix_cache else None
        self.block_manager = BidirectionalBlockManager(
            config.num_blocks, config.block_size, config.host_tier_blocks,
            config.bidirectional_kv, self.prefix_cache,
        )
        estimate = (
            executor.estimate_iteration_time
            if isinstance(executor, IterationEstimator)
            else executor.iteration_time
        )
        self.scheduler = Scheduler(
            self.block_manager,
            self.prefix_cache,
            make_policy(config.policy, config.initial_batch_size, config.max_batch_size,
                        config.priority_groups, config.arrival_guard_share),
            estimate,
            config.chunked_prefill_tokens,
            config.max_batch_size,
        )
        self._requests: dict[str, EngineRequest] = {}
        self._origins: dict[str, GenerationRequest] = {}
        self._sequence = itertools.count()
        self._iteration = 0
        self._clock = 0.0
        self._window = LoadWindow(config.stats_window_s)
        self._prompt_tokens_admitted = 0
        self._cached_tokens_admitted = 0

    # ---- requests ------------------------------------------------------------------------------------

    def add_request(
        self, request: GenerationRequest, now: float, prompt_block_hashes: Sequence[int] | None = None
    ) -> None:
        """Queues a request; ValueError names the field when it is malformed or can never fit.
        ``prompt_block_hashes``: the prompt's chained block hashes at this engine's block size, when the
        caller has them already (placement does)."""
        if request.request_id in self._requests:
            raise ValueError(f"request_id {request.request_id!r} is already in the engine")
        needed = len(request.prompt_token_ids) + request.max_tokens
        if needed > self.config.total_slots:
            raise ValueError(
                f"prompt_token_ids + max_tokens = {needed} exceeds the KV capacity "
                f"of {self.config.total_slots} tokens"
            )
        engine_request = EngineRequest.from_generation(
            request, now, next(self._sequence), self.config.block_size, prompt_block_hashes
        )
        self._requests[request.request_id] = engine_request
        self._origins[request.request_id] = request
        self.scheduler.add(engine_request)
        self._clock = max(self._clock, now)

    def abort(self, request_id: str, now: float) -> bool:
        """Stops a request and frees its slots; False when it is unknown or already finished."""
        request = self._requests.get(request_id)
        if request is None:
            return False
        request.status = EngineRequestStatus.FINISHED_ABORTED
        self._forget(request)
        self._clock = max(self._clock, now)
        return True

    def set_priority(self, request_id: str, priority: int) -> None:
        """Changes a live request's priority (lower runs first); KeyError when unknown."""
        if request_id not in self._requests:
            raise KeyError(f"unknown request_id {request_id!r}")
        self._requests[request_id].priority = priority

    def has_work(self) -> bool:
        return bool(self._requests)

    def request(self, request_id: str) -> EngineRequest:
        return self._requests[request_id]

    # ---- one iteration -------------------------------------------------------------------------------

    def step(self, now: float) -> StepOutput:
        """Schedules, executes and updates one iteration starting at ``now``."""
        self._clock = max(self._clock, now)
        output = self.scheduler.schedule(now, self._iteration)
        self._iteration += 1
        duration = self.executor.iteration_time(output.shape) if output.scheduled else 0.0
        end = now + duration
        update = _Update()
        if output.evicted_hashes:
            update.events.append(BlockRemoved(output.evicted_hashes))
        self._record_admissions(output, now)
        self._update(output, end, update)
        self._window.record_iteration(now, end, output.shape.prefill_tokens, output.shape.decode_requests)
        self._clock = end
        return StepOutput(
            duration_s=duration,
            new_tokens=update.new_tokens,
            finished=update.finished,
            cache_events=tuple(update.events),
            metrics=self._metrics(output, update),
        )

    def _update(self, output: SchedulerOutput, end: float, update: _Update) -> None:
        counts = update.counts
        for item in output.scheduled:
            request, num_tokens = item.request, item.num_tokens
            computed_before = request.num_computed_tokens
            request.num_computed_tokens = computed = computed_before + num_tokens
            row = counts[0 if request.is_rt else 1]
            row[0] += 1
            if computed_before < request.num_prompt_tokens:
                row[1] += num_tokens
                self._seal_prompt_blocks(request, update.events)  # only prompt tokens make blocks to seal
            else:
                row[2] += num_tokens
            if computed < request.num_tokens:
                continue  # a prefill chunk: no token yet
            origin = self._origins[request.request_id]
            token = self.token_ids_for(origin, request.num_output_tokens)
            request.append_token(token, end)
            update.new_tokens[request.request_id] = (token,)
            status = self._finish_status(request, token)
            if status is not None:
                request.status = status
                update.finished[request.request_id] = self._outcome(request, end)
                self._forget(request)

    def _seal_prompt_blocks(self, request: EngineRequest, events: list[CacheEvent]) -> None:
        """Offers each newly computed full prompt block to the prefix cache; one event per stored run."""
        size = self.config.block_size
        hashes = request.prompt_block_hashes
        computed = min(request.num_computed_tokens, request.num_prompt_tokens) // size
        first, stop = request.num_hashed_blocks, min(computed, len(hashes))
        if first >= stop:
            return
        outcomes = self.block_manager.seal_chain(
            request.request_id, first * size, hashes[first:stop], hashes[first - 1] if first else ROOT_PARENT)
        run_start = first  # the first block of the current run of newly stored blocks
        for index, outcome in enumerate(outcomes, first):
            if outcome is not _STORED:
                self._announce(request, run_start, index, events)
                run_start = index + 1
        if outcomes[-1] is _REFUSED:
            request.num_hashed_blocks = len(hashes)  # the chain broke: later blocks would be unreachable
        else:
            request.num_hashed_blocks = first + len(outcomes)
            self._announce(request, run_start, request.num_hashed_blocks, events)

    def _announce(self, request: EngineRequest, first: int, stop: int, events: list[CacheEvent]) -> None:
        """One ``BlockStored`` for the newly stored prompt blocks ``[first, stop)``, if any."""
        if first >= stop:
            return
        size, hashes = self.config.block_size, request.prompt_block_hashes
        events.append(BlockStored(
            block_hashes=tuple(hashes[first:stop]),
            parent_hash=hashes[first - 1] if first else ROOT_PARENT,
            token_ids=request.prompt_token_ids[first * size : stop * size],
            block_size=size,
        ))

    def _finish_status(self, request: EngineRequest, token: int) -> EngineRequestStatus | None:
        sampling = request.sampling
        if token in sampling.stop_token_ids:
            return EngineRequestStatus.FINISHED_STOPPED
        if token == self.config.eos_token_id and not sampling.ignore_eos:
            return EngineRequestStatus.FINISHED_STOPPED
        if request.num_output_tokens >= request.max_tokens:
            return EngineRequestStatus.FINISHED_LENGTH
        return None

    def _outcome(self, request: EngineRequest, end: float) -> RequestOutcome:
        reason = request.status.finish_reason
        assert reason is not None  # NOTE: only called for finished requests
        ttft = request.first_token_s - request.arrival_s if request.first_token_s is not None else 0.0
        usage = Usage(
            prompt_tokens=request.num_prompt_tokens,
            cached_prompt_tokens=request.num_cached_prompt_tokens,
            output_tokens=request.num_output_tokens,
            ttft_s=ttft,
        )
        return RequestOutcome(request.request_id, request.service_class, reason, usage, end)

    def _forget(self, request: EngineRequest) -> None:
        self.scheduler.remove(request)
        del self._requests[request.request_id]
        del self._origins[request.request_id]

    def _record_admissions(self, output: SchedulerOutput, now: float) -> None:
        for request_id in output.admitted:
            request = self._requests[request_id]
            if request.first_scheduled_s == now:
                self._window.record_queueing_delay(now, now - request.arrival_s)
                self._prompt_tokens_admitted += request.num_prompt_tokens
                self._cached_tokens_admitted += request.num_cached_prompt_tokens

    # ---- observation ---------------------------------------------------------------------------------

    def _metrics(self, output: SchedulerOutput, update: _Update) -> IterationMetrics:
        (rt_requests, rt_prefill, rt_decode), (be_requests, be_prefill, be_decode) = update.counts
        usage = self.block_manager.usage()
        return IterationMetrics(
            batch_limit=output.batch_limit,
            rt_kv_slots=usage.rt_slots,
            be_kv_slots=usage.be_slots,
            cached_kv_slots=usage.sealed_in_use_slots,
            kv_usage=usage.used_fraction,
            host_slots=usage.host_slots,
            preemptions=len(output.dropped),
            checkpointed_slots=output.checkpointed_slots,
            restored_slots=output.restored_slots,
            prefix_hit_tokens=output.prefix_hit_tokens,
            evicted_blocks=len(output.evicted_hashes),
            rt_requests=rt_requests,
            be_requests=be_requests,
            rt_prefill_tokens=rt_prefill,
            be_prefill_tokens=be_prefill,
            rt_decode_tokens=rt_decode,
            be_decode_tokens=be_decode,
        )

    def stats(self) -> EngineStats:
        """Load snapshot at the end of the latest iteration (or the latest request event)."""
        rt_running, be_running = running_by_class(self.scheduler.running)
        rt_waiting, be_waiting = running_by_class(self.scheduler.waiting)
        prefill_rate, decode_rate = self._window.rates(self._clock)
        admitted = self._prompt_tokens_admitted
        return EngineStats(
            rt=ClassLoad(running=rt_running, waiting=rt_waiting),
            be=ClassLoad(running=be_running, waiting=be_waiting),
            kv_cache_usage=self.block_manager.usage().used_fraction,
            prefill_tokens_per_s=prefill_rate,
            decode_tokens_per_s=decode_rate,
            mean_queueing_delay_s=self._window.mean_queueing_delay(self._clock),
            prefix_hit_ratio=self._cached_tokens_admitted / admitted if admitted else 0.0,
            total_kv_blocks=self.config.num_blocks,
            block_size=self.config.block_size,
        )


"""The discrete-event cluster simulator: engine cores behind a global queue and a router (Preble section 5,
BROS section 7 replays, the Vidur event model).

Requests arrive from a ``Workload`` into the scheduler's own ``Dispatcher`` (``forethought.scheduling``,
the code the scheduler service runs): a ``GlobalQueue`` ordered by a ``QueuePolicy``, per-engine room
(at most ``max_waiting_per_engine`` requests placed but not yet running) and a ``Router``, which sees how
many leading prompt blocks each engine caches according to an ``InMemoryPrefixIndex`` fed only by the
engines' own cache events. Each engine is the serving
``EngineCore``: an iteration runs ``step(now)`` and its tokens appear ``duration_s`` later on the virtual
clock. Closed-loop batches resubmit when a batch completes; a conversation's next turn arrives a think time
after the previous turn completes. A request no engine could ever hold (prompt + max_tokens over every
engine's KV capacity) is refused on arrival with its reason, as a serving deployment answers it, and counted
in the results (``SimulationResult.refused``); a refused conversation turn ends its conversation. Same
inputs and seeds, same run: nothing reads the wall clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from forethought.domain import GenerationRequest, SamplingParams, ServiceClass
from forethought.domain.block_hashes import chained_block_hashes
from forethought.engine.core import EngineCore, StepOutput
from forethought.prefix.memory_index import InMemoryPrefixIndex
from forethought.queueing.global_queue import GlobalQueue
from forethought.queueing.policy import QueuedRequest
from forethought.routing.router import Router
from forethought.scheduling import Dispatcher, ScheduledRequest, WorkerSlots, WorkerView
from forethought.sim.events import (
    BatchSubmitted,
    DispatchDue,
    Event,
    IterationDone,
    IterationStarted,
    RequestArrived,
)
from forethought.sim.metrics import MetricsReport, Refusal, RequestRecord, summarize_by_class
from forethought.workloads.workload import Conversation, TraceRequest, Workload


@dataclass
class _Flight:
    """A request between its arrival and its completion."""

    request: TraceRequest
    arrival_s: float
    engine_id: str = ""
    first_token_s: float | None = None
    conversation: Conversation | None = None
    turn: int = 0
    batch: tuple[int, int] | None = None  # (source index, batch index) of a closed-loop request


@dataclass
class _Engine:
    core: EngineCore
    stepping: bool = False
    load_reported_s: float = float("-inf")


@dataclass(frozen=True)
class SimulationResult:
    """What a run produced: one record per completed request, in completion order, and one per request
    refused on arrival (no engine could ever hold it), in arrival order."""

    records: tuple[RequestRecord, ...]
    end_s: float
    horizon_s: float | None
    events: int
    unfinished: int
    refused: tuple[Refusal, ...] = ()

    @property
    def duration_s(self) -> float:
        """The measured window: the horizon when one was set, else until the last event."""
        return self.horizon_s if self.horizon_s is not None else max(self.end_s, 1e-9)

    def metrics(self, duration_s: float | None = None) -> MetricsReport:
        return summarize_by_class(self.records, duration_s or self.duration_s, self.refused)


UNBOUNDED = 1 << 62
"""An engine's capacity in the dispatcher's slots (the simulated engines take every request placed on
them), and its waiting room when ``max_waiting_per_engine`` is None."""


class ClusterSimulator:
    """One replay of ``workload`` over ``engines``; call ``run`` once.

    Args:
        engines: engine id -> a fresh engine core (ids are what the router and prefix index name).
        router: places each dispatched request (with one engine it has one choice).
        queue: the global wait queue and its order.
        max_waiting_per_engine: placed-but-not-running requests an engine may hold (the scheduler's
            ``--max-waiting-per-worker``); None admits everything at once (one engine with its own
            scheduler, as in the BROS experiments).
        block_size: prefix-cache block size of the engines, for prompt block hashes.
        output_predictor: forecast of a request's output tokens for the queue order and the router
            (SSJF's proxy model, or an oracle reading the trace); None forecasts 0.
        load_report_interval_s: how often each engine reports its load to the router, like a worker's
            periodic stats stream (simulated seconds).
    """

    def __init__(self, workload: Workload, engines: Mapping[str, EngineCore], router: Router,
                 queue: GlobalQueue, max_waiting_per_engine: int | None = 8, block_size: int = 16,
                 output_predictor: Callable[[TraceRequest], float] | None = None,
                 load_report_interval_s: float = 0.25) -> None:
        if not engines:
            raise ValueError("the cluster needs at least one engine")
        self._workload = workload
        self._engines = {engine_id: _Engine(core) for engine_id, core in engines.items()}
        self._kv_capacity_tokens = max(core.config.total_slots for core in engines.values())
        waiting_room = UNBOUNDED if max_waiting_per_engine is None else max_waiting_per_engine
        self._dispatcher = Dispatcher(router, queue, WorkerSlots(waiting_room))
        self._dispatcher.sync_workers({engine_id: WorkerView(engine_id, UNBOUNDED) for engine_id in engines}, 0.0)
        self._block_size = block_size
        self._predict = output_predictor or (lambda request: 0.0)
        self._load_report_interval_s = load_report_interval_s
        self._prefix_index = InMemoryPrefixIndex()
        self._flights: dict[str, _Flight] = {}
        self._arriving: dict[str, _Flight] = {}
        self._batch_outstanding: dict[tuple[int, int], int] = {}
        self._records: list[RequestRecord] = []
        self._refusals: list[Refusal] = []
        self._dispatch_pending = False

    def run(self, until_s: float | None = None) -> SimulationResult:
        """Replays until no event is left or the next one is after ``until_s``."""
        if until_s is None and any(source.is_endless for source in self._workload.batches):
            raise ValueError("an endless closed-loop source needs a horizon (until_s)")
        heap: list[tuple[float, int, int, Event]] = []
        sequence = itertools.count()
        for event in self._initial_events():
            heapq.heappush(heap, (event.time_s, event.order, next(sequence), event))
        events, now = 0, 0.0
        while heap and (until_s is None or heap[0][0] <= until_s):
            now, _, _, event = heapq.heappop(heap)
            events += 1
            for caused in event.handle(self):
                heapq.heappush(heap, (caused.time_s, caused.order, next(sequence), caused))
        return SimulationResult(tuple(self._records), now, until_s, events,
                                unfinished=len(self._flights) + len(self._arriving) + self._dispatcher.waiting,
                                refused=tuple(self._refusals))

    def _initial_events(self) -> list[Event]:
        events: list[Event] = [RequestArrived(r.arrival_s, r) for r in self._workload.requests]
        for conversation in self._workload.conversations:
            first = conversation.turns[0].at(conversation.start_s)
            self._arriving[first.request_id] = _Flight(first, first.arrival_s, conversation=conversation)
            events.append(RequestArrived(first.arrival_s, first))
        events.extend(BatchSubmitted(source.start_s, index, 0)
                      for index, source in enumerate(self._workload.batches))
        return events

    # --- event handlers -------------------------------------------------------------------------

    def admit(self, request: TraceRequest, now: float) -> Sequence[Event]:
        """A request arrives: it waits in the global queue until an engine has room, or is refused when
        no engine could ever hold it."""
        flight = self._arriving.pop(request.request_id, None) or _Flight(request, now)
        flight.arrival_s = now
        needed = request.prompt_tokens + _max_tokens(request)
        if needed > self._kv_capacity_tokens:
            return self._refuse(flight, needed, now)
        self._flights[request.request_id] = flight
        queued = QueuedRequest(
            request_id=request.request_id, arrival_s=now, prompt_tokens=request.prompt_tokens,
            predicted_output_tokens=self._predict(request), service_class=request.service_class,
            ttft_slo_s=request.ttft_slo_s,
        )
        generation = _generation_request(request)
        # One engine needs no prefix match: the router has no choice to make.
        hashes = chained_block_hashes(generation.prompt_token_ids, self._block_size) if len(self._engines) > 1 else []
        self._dispatcher.submit(ScheduledRequest(queued, "", tuple(hashes), self._block_size, generation), now)
        return self._dispatch_soon(now)

    def submit_batch(self, source_index: int, batch_index: int, now: float) -> Sequence[Event]:
        """A closed-loop source submits batch ``batch_index``; its completion triggers the next."""
        source = self._workload.batches[source_index]
        if not source.submits(batch_index, now):
            return ()
        batch = source.batch(batch_index, now)
        self._batch_outstanding[(source_index, batch_index)] = len(batch)
        for request in batch:
            self._arriving[request.request_id] = _Flight(request, now, batch=(source_index, batch_index))
        return [RequestArrived(now, request) for request in batch]

    def dispatch(self, now: float) -> Sequence[Event]:
        """Places waiting requests, in queue order, as many as the engines have room for."""
        self._dispatch_pending = False
        woken: list[Event] = []
        for taken in self._dispatcher.take(now):
            placed = self._dispatcher.place(taken.request_id, self._prefix_index.match(taken.block_hashes), now)
            assert placed is not None  # NOTE: nothing cancels a request or removes an engine mid-run
            flight = self._flights[taken.request_id]
            engine_id = flight.engine_id = placed.worker_id
            engine = self._engines[engine_id]
            # The trace's class priority, not placement's: Preble's engine keeps its group order among BE requests.
            # Placement hashed the prompt already: the engine reuses the hashes at its own block size.
            hashes = placed.block_hashes if placed.block_size == engine.core.config.block_size and placed.block_hashes else None
            engine.core.add_request(replace(placed.generation, ttft_slo_s=placed.ttft_slo_left_s()), now, hashes)
            if not engine.stepping:
                engine.stepping = True
                woken.append(IterationStarted(now, engine_id))
        return woken

    def start_iteration(self, engine_id: str, now: float) -> Sequence[Event]:
        """The engine runs one iteration; its results land after the modelled duration."""
        engine = self._engines[engine_id]
        output = engine.core.step(now)
        if output.duration_s <= 0 and not output.new_tokens and not output.finished:
            # Nothing could be scheduled: sleep until a dispatch wakes the engine.
            engine.stepping = False
            return ()
        return [IterationDone(now + output.duration_s, engine_id, output)]

    def finish_iteration(self, engine_id: str, output: StepOutput, now: float) -> Sequence[Event]:
        """Tokens and completions of an iteration become visible; finished work frees room."""
        engine = self._engines[engine_id]
        self._prefix_index.apply(engine_id, output.cache_events)
        for request_id in output.new_tokens:
            flight = self._flights.get(request_id)
            if flight is not None and flight.first_token_s is None:
                flight.first_token_s = now
                self._dispatcher.first_token(request_id, now)
        caused: list[Event] = []
        for request_id, outcome in output.finished.items():
            caused.extend(self._complete(request_id, outcome.usage.cached_prompt_tokens,
                                         outcome.usage.output_tokens, now))
        if len(self._engines) > 1 and now - engine.load_reported_s >= self._load_report_interval_s:
            engine.load_reported_s = now
            self._dispatcher.router.observe_load(engine_id, engine.core.stats(), now)
        if engine.core.has_work():
            caused.append(IterationStarted(now, engine_id))
        else:
            engine.stepping = False
        caused.extend(self._dispatch_soon(now))
        return caused

    # --- bookkeeping ----------------------------------------------------------------------------

    def _complete(self, request_id: str, cached_tokens: int, output_tokens: int,
                  now: float) -> Sequence[Event]:
        flight = self._flights.pop(request_id)
        self._dispatcher.finish(request_id, now, output_tokens)
        request = flight.request
        self._records.append(RequestRecord(
            request_id=request_id, service_class=request.service_class, arrival_s=flight.arrival_s,
            first_token_s=flight.first_token_s if flight.first_token_s is not None else now,
            finish_s=now, prompt_tokens=request.prompt_tokens, cached_prompt_tokens=cached_tokens,
            output_tokens=output_tokens, ttft_slo_s=request.ttft_slo_s, tpot_slo_s=request.tpot_slo_s,
        ))
        if flight.conversation is not None:
            return self._next_turn(flight.conversation, flight.turn + 1, now)
        if flight.batch is not None:
            return self._batch_member_done(flight.batch, now)
        return ()

    def _refuse(self, flight: _Flight, needed: int, now: float) -> Sequence[Event]:
        request = flight.request
        self._refusals.append(Refusal(
            request_id=request.request_id, service_class=request.service_class, arrival_s=now,
            prompt_tokens=request.prompt_tokens, max_tokens=_max_tokens(request),
            reason=(f"prompt_tokens + max_tokens = {needed} exceeds the KV capacity of every engine "
                    f"({self._kv_capacity_tokens} tokens)"),
        ))
        if flight.batch is not None:
            return self._batch_member_done(flight.batch, now)
        return ()  # a refused turn ends its conversation: the next turns hold it, so none could fit either

    def _next_turn(self, conversation: Conversation, turn: int, now: float) -> Sequence[Event]:
        if turn >= len(conversation.turns):
            return ()
        arrival = now + conversation.think_time_s
        request = conversation.turns[turn].at(arrival)
        self._arriving[request.request_id] = _Flight(request, arrival, conversation=conversation, turn=turn)
        return [RequestArrived(arrival, request)]

    def _batch_member_done(self, batch: tuple[int, int], now: float) -> Sequence[Event]:
        self._batch_outstanding[batch] -= 1
        if self._batch_outstanding[batch] > 0:
            return ()
        del self._batch_outstanding[batch]
        return [BatchSubmitted(now, batch[0], batch[1] + 1)]

    def _dispatch_soon(self, now: float) -> Sequence[Event]:
        # One dispatch per instant, after every arrival of that instant.
        if self._dispatch_pending or not self._dispatcher.waiting:
            return ()
        self._dispatch_pending = True
        return [DispatchDue(now)]


def _max_tokens(request: TraceRequest) -> int:
    """The trace fixes the output length: generate exactly that many tokens (at least one)."""
    return max(1, request.output_tokens)


def _generation_request(request: TraceRequest) -> GenerationRequest:
    # The trace fixes the output length: generate exactly that many tokens.
    return GenerationRequest(
        request_id=request.request_id, prompt_token_ids=request.prompt_token_ids(),
        max_tokens=_max_tokens(request), service_class=request.service_class,
        priority=0 if request.service_class is ServiceClass.RT else 1,
        ttft_slo_s=request.ttft_slo_s, tpot_slo_s=request.tpot_slo_s,
        sampling=SamplingParams(ignore_eos=True),
    )

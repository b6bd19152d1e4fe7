"""An LLM engine of the application simulator: a fixed number of batch slots, requests advancing as a
fluid at the speed their batch size allows (``EngineModel.speed``).

Work is in seconds of the request alone on the engine. ``advance(now)`` moves every running request on
by the time passed times the current speed and returns that progress per request, which the simulator
credits as attained service. Any change of the batch changes the speed, so the simulator advances the
engine first and re-reads ``next_finish_s`` after.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forethought.appsim.service_time import EngineModel

FINISHED_EPSILON_S = 1e-9


@dataclass
class LlmRequest:
    """One request of an LLM step: its run, step index, and work still to do (alone seconds)."""

    request_id: int
    run_id: str
    step: int
    work_s: float
    enqueued_s: float
    remaining_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.remaining_s = self.work_s


class Engine:
    """Requests running on one engine and how far each has got."""

    def __init__(self, index: int, model: EngineModel) -> None:
        self.index = index
        self.model = model
        self.running: dict[int, LlmRequest] = {}
        self.updated_s = 0.0
        self.version = 0  # NOTE: a finish event carries the version it was computed at; older ones are stale

    @property
    def free_slots(self) -> int:
        return self.model.slots - len(self.running)

    def advance(self, now_s: float) -> list[tuple[LlmRequest, float]]:
        """Moves the running requests on to ``now_s``; returns (request, work done) for each."""
        speed = self.model.speed(len(self.running))
        done = []
        for request in self.running.values():
            progress = min(request.remaining_s, (now_s - self.updated_s) * speed)
            request.remaining_s -= progress
            done.append((request, progress))
        self.updated_s = now_s
        return done

    def start(self, request: LlmRequest) -> None:
        """Adds a request; the caller advanced the engine to now first."""
        self.running[request.request_id] = request
        self.version += 1

    def take_finished(self) -> list[LlmRequest]:
        """Removes and returns the requests with no work left."""
        finished = [r for r in self.running.values() if r.remaining_s <= FINISHED_EPSILON_S]
        for request in finished:
            del self.running[request.request_id]
        if finished:
            self.version += 1
        return finished

    def next_finish_s(self) -> float | None:
        """When the first running request finishes if the batch stays as it is; None when idle."""
        if not self.running:
            return None
        least = min(request.remaining_s for request in self.running.values())
        return self.updated_s + least / self.model.speed(len(self.running))

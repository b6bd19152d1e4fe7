"""Runs in progress as the demand service hears of them, and the prewarm timers of one watcher.

A run reports the step it is in with ``Estimate`` (``run_id`` and ``current_step``); recording a
finished step takes it out until its next report. ``RunBoard`` keeps the latest report of each run and
hands every report to each watcher (``WatchPrewarm`` stream), whose ``ReportInbox`` keeps only what a
late reader still needs of each run. A watcher keeps ``PrewarmTimers``: one
timer per (report, downstream step), due when Eq. 3's ``p_e`` falls to K; a newer report of the run
makes the older timers stale, so a decision is never sent for a step the run has left.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from forethought.demand import RunPosition

RunKey = tuple[str, str]
"""(application, run_id)."""


@dataclass(frozen=True)
class RunReport:
    """A run's step as reported (``position`` None: the run left its step), with when that step started."""

    application: str
    run_id: str
    position: RunPosition | None
    started_s: float
    sequence: int
    reported_s: float = 0.0

    @property
    def key(self) -> RunKey:
        return (self.application, self.run_id)


class RunBoard:
    """The latest report of each run in progress, fanned out to every watcher; a run silent for ``ttl_s``
    is dropped as abandoned."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._ttl_s = ttl_s
        self._swept_s = clock()
        self._runs: dict[RunKey, RunReport] = {}
        self._watchers: set[ReportInbox] = set()
        self._sequence = itertools.count(1)

    def report(self, application: str, run_id: str, position: RunPosition, attained_s: float) -> None:
        """The run is in ``position.unit``, which has had ``attained_s`` of service so far."""
        now_s = self.clock()
        self._publish(RunReport(application, run_id, position, now_s - attained_s, next(self._sequence), now_s))
        if now_s - self._swept_s > min(self._ttl_s, 60.0):
            self._sweep(now_s)

    def leave(self, application: str, run_id: str) -> None:
        """The run finished its step (or the run itself): its timers are stale."""
        if (application, run_id) in self._runs:
            self._publish(RunReport(application, run_id, None, self.clock(), next(self._sequence)))

    def forget_application(self, application: str) -> None:
        """The application was replaced: its runs' steps may no longer exist, so their timers are stale."""
        for application_name, run_id in [key for key in self._runs if key[0] == application]:
            self.leave(application_name, run_id)

    def close(self) -> None:
        """Ends every watch: each watcher's inbox reads None (the service is stopping)."""
        for inbox in self._watchers:
            inbox.close()

    @contextmanager
    def watch(self) -> Iterator[ReportInbox]:
        """An inbox of reports, starting with every run in progress, then None if the board closes."""
        inbox = ReportInbox()
        for report in self._runs.values():
            inbox.put(report)
        self._watchers.add(inbox)
        try:
            yield inbox
        finally:
            self._watchers.discard(inbox)

    def _sweep(self, now_s: float) -> None:
        """Drops the runs silent for longer than ``ttl_s``: abandoned, or lost by their caller."""
        self._swept_s = now_s
        for key, report in list(self._runs.items()):
            if report.reported_s < now_s - self._ttl_s:
                self.leave(*key)

    def _publish(self, report: RunReport) -> None:
        if report.position is None:
            self._runs.pop(report.key, None)
        else:
            self._runs[report.key] = report
        for inbox in self._watchers:
            inbox.put(report)


class ReportInbox:
    """One watcher's unread reports: per run, its latest report and whether it left a step since the last
    read. A newer report makes a run's older ones stale, so a watcher that reads late (its stream held
    back by its client) holds one or two reports per run, however many arrived meanwhile.
    """

    def __init__(self) -> None:
        self._unread: dict[RunKey, tuple[RunReport | None, RunReport | None]] = {}  # (leave, latest), oldest first
        self._changed = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return sum((leave is not None) + (latest is not None) for leave, latest in self._unread.values())

    def put(self, report: RunReport) -> None:
        leave, _ = self._unread.pop(report.key, (None, None))
        # The leave stays ahead of a later report: it is what resets the steps decided for the run.
        self._unread[report.key] = (report, None) if report.position is None else (leave, report)
        self._changed.set()

    def close(self) -> None:
        self._closed = True
        self._changed.set()

    def empty(self) -> bool:
        return not self._unread and not self._closed

    def get_nowait(self) -> RunReport | None:
        """The oldest unread report, None once closed.

        Raises:
            asyncio.QueueEmpty: nothing unread.
        """
        if self._closed:
            return None
        if not self._unread:
            raise asyncio.QueueEmpty
        key, (leave, latest) = next(iter(self._unread.items()))
        if leave is not None and latest is not None:
            self._unread[key] = (None, latest)
            return leave
        del self._unread[key]
        return leave or latest

    async def get(self) -> RunReport | None:
        while self.empty():
            self._changed.clear()
            await self._changed.wait()
        return self.get_nowait()


@dataclass(frozen=True)
class Timer:
    due_s: float
    report: RunReport
    unit: str


class PrewarmTimers:
    """One watcher's pending decisions: a heap by due time; a timer of an outdated report is dropped, and
    a step is decided once while its run stays in the same step (a run re-reports it as it is re-ranked)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []
        self._latest: dict[RunKey, int] = {}
        self._sent: dict[RunKey, tuple[str, set[str]]] = {}  # the run's step, and the steps decided in it
        self._order = itertools.count()

    def update(self, report: RunReport) -> None:
        """Makes the run's earlier timers stale."""
        if report.position is None:
            self._latest.pop(report.key, None)
            self._sent.pop(report.key, None)
        else:
            self._latest[report.key] = report.sequence
            if self._sent.get(report.key, ("", set()))[0] != report.position.unit:
                self._sent[report.key] = (report.position.unit, set())

    def sent(self, timer: Timer) -> bool:
        """Whether the timer's step was decided already while its run is in this step."""
        return timer.unit in self._sent.get(timer.report.key, ("", set()))[1]

    def mark_sent(self, timer: Timer) -> None:
        self._sent.setdefault(timer.report.key, ("", set()))[1].add(timer.unit)

    def add(self, timer: Timer) -> None:
        heapq.heappush(self._heap, (timer.due_s, next(self._order), timer))

    def wait_s(self, now_s: float) -> float | None:
        """Seconds until the next timer (0 when one is due), None when none is pending."""
        self._drop_stale()
        return max(0.0, self._heap[0][0] - now_s) if self._heap else None

    def pop_due(self, now_s: float) -> list[Timer]:
        due = []
        while self._heap and self._heap[0][0] <= now_s:
            timer = heapq.heappop(self._heap)[2]
            if self._is_current(timer):
                due.append(timer)
        return due

    def _drop_stale(self) -> None:
        while self._heap and not self._is_current(self._heap[0][2]):
            heapq.heappop(self._heap)

    def _is_current(self, timer: Timer) -> bool:
        return self._latest.get(timer.report.key) == timer.report.sequence

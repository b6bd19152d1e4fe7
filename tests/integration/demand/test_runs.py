"""Runs in progress and one watcher's prewarm timers, on an injected clock."""

from __future__ import annotations

from forethought.demand import RunPosition
from forethought.services.demand.runs import PrewarmTimers, RunBoard, Timer


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_watcher_starts_with_the_runs_in_progress_and_hears_them_leave():
    clock = Clock()
    board = RunBoard(ttl_s=3600, clock=clock)
    board.report("app", "a", RunPosition("fetch"), attained_s=2.0)
    board.report("app", "b", RunPosition("fetch"), attained_s=0.0)
    board.leave("app", "b")
    with board.watch() as reports:
        first = reports.get_nowait()
        assert (first.run_id, first.started_s) == ("a", 98.0) and reports.empty()
        board.leave("app", "a")
        assert reports.get_nowait().position is None
        board.close()
        assert reports.get_nowait() is None


def test_a_run_silent_for_the_ttl_is_dropped():
    clock = Clock()
    board = RunBoard(ttl_s=30, clock=clock)
    board.report("app", "silent", RunPosition("fetch"), attained_s=0.0)
    clock.now_s += 31
    board.report("app", "active", RunPosition("fetch"), attained_s=0.0)
    with board.watch() as reports:
        assert [reports.get_nowait().run_id] == ["active"] and reports.empty()


def test_timers_fire_in_due_order_and_a_newer_report_makes_older_ones_stale():
    clock = Clock()
    board = RunBoard(ttl_s=3600, clock=clock)
    timers = PrewarmTimers()
    with board.watch() as reports:
        board.report("app", "a", RunPosition("fetch"), attained_s=0.0)
        board.report("app", "b", RunPosition("fetch"), attained_s=0.0)
        first_a, first_b = reports.get_nowait(), reports.get_nowait()
        for report, due_s in ((first_a, 105.0), (first_b, 102.0)):
            timers.update(report)
            timers.add(Timer(due_s, report, "search"))
        assert timers.wait_s(100.0) == 2.0
        board.report("app", "a", RunPosition("search"), attained_s=0.0)  # a moved on: its timer is stale
        timers.update(reports.get_nowait())
        assert [timer.report.run_id for timer in timers.pop_due(110.0)] == ["b"]
        assert timers.wait_s(110.0) is None


def test_a_step_is_decided_once_while_its_run_stays_in_the_same_step():
    clock = Clock()
    board = RunBoard(ttl_s=3600, clock=clock)
    timers = PrewarmTimers()
    with board.watch() as reports:
        board.report("app", "a", RunPosition("fetch"), attained_s=0.0)
        first = reports.get_nowait()
        timers.update(first)
        timer = Timer(101.0, first, "search")
        assert not timers.sent(timer)
        timers.mark_sent(timer)
        board.report("app", "a", RunPosition("fetch"), attained_s=1.0)  # re-ranked in the same step
        again = reports.get_nowait()
        timers.update(again)
        assert timers.sent(Timer(102.0, again, "search")) and not timers.sent(Timer(102.0, again, "lookup"))
        board.report("app", "a", RunPosition("search"), attained_s=0.0)  # moved on: decided afresh
        moved = reports.get_nowait()
        timers.update(moved)
        assert not timers.sent(Timer(103.0, moved, "search"))


def test_a_watcher_that_reads_late_holds_each_runs_latest_report_only():
    clock = Clock()
    board = RunBoard(ttl_s=3600, clock=clock)
    with board.watch() as reports:
        for second in range(100):  # ten runs re-ranked every second while the watcher's client holds it back
            clock.now_s += 1
            for run in range(10):
                board.report("app", f"r{run}", RunPosition("fetch"), attained_s=float(second))
        assert len(reports) == 10
        latest = [reports.get_nowait() for _ in range(10)]
        assert [report.run_id for report in latest] == [f"r{run}" for run in range(10)]
        assert {report.started_s for report in latest} == {clock.now_s - 99.0} and reports.empty()


def test_a_run_that_left_its_step_and_came_back_is_read_as_a_leave_then_its_latest_report():
    clock = Clock()
    board = RunBoard(ttl_s=3600, clock=clock)
    timers = PrewarmTimers()
    with board.watch() as reports:
        board.report("app", "a", RunPosition("fetch"), attained_s=0.0)
        first = reports.get_nowait()
        timers.update(first)
        timers.mark_sent(Timer(101.0, first, "search"))
        board.leave("app", "a")  # the step ended; a loop brings the run back to it before the watcher reads
        board.report("app", "a", RunPosition("fetch"), attained_s=0.0)
        board.report("app", "a", RunPosition("fetch"), attained_s=0.5)
        assert len(reports) == 2
        leave, back = reports.get_nowait(), reports.get_nowait()
        assert leave.position is None and back.started_s == 99.5 and reports.empty()
        timers.update(leave)
        timers.update(back)
        assert not timers.sent(Timer(102.0, back, "search"))  # a new execution of the step: decided afresh

"""The launcher's state file as the commands read it."""

from __future__ import annotations

from pathlib import Path

from forethought.cache import started_services


def test_the_services_up_recorded_are_read_and_an_unreadable_file_reads_as_none(tmp_path: Path) -> None:
    state = tmp_path / "up.json"
    assert started_services(state) == {}  # no up runs
    state.write_text('{"redis": "redis://127.0.0.1:1/0", "services": {"scheduler": "127.0.0.1:60051"}}')
    assert started_services(state) == {"scheduler": "127.0.0.1:60051"}
    for broken in ('{"services": {"sched', '{"services": ["127.0.0.1:1"]}', "[]", '{"redis": "x"}'):
        state.write_text(broken)
        assert started_services(state) == {}, broken

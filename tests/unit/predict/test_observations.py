from __future__ import annotations

from pathlib import Path

from forethought.predict import Observation, ObservationStore


def test_store_keeps_the_newest_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "obs.jsonl"
    store = ObservationStore(path, capacity=3)
    for index in range(5):
        store.append(Observation(f"prompt {index}", index))
    assert [o.output_tokens for o in store.snapshot()] == [2, 3, 4]
    assert [o.output_tokens for o in ObservationStore(path, capacity=3).snapshot()] == [2, 3, 4]


def test_file_is_compacted_at_twice_the_capacity(tmp_path: Path) -> None:
    path = tmp_path / "obs.jsonl"
    store = ObservationStore(path, capacity=3)
    for index in range(6):
        store.append(Observation("p", index))
    assert len(path.read_text().splitlines()) == 3
    store.append(Observation("p", 6))
    assert len(path.read_text().splitlines()) == 4


def test_in_memory_store_writes_nothing(tmp_path: Path) -> None:
    store = ObservationStore(None, capacity=2)
    store.append(Observation("p", 1))
    assert len(store) == 1 and list(tmp_path.iterdir()) == []

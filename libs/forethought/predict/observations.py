"""Completed requests' true lengths, kept for online refits (DESIGN.md "predictor": learns from completed requests).

A JSONL file bounded like a ring: the newest ``capacity`` observations are kept; the file is compacted
(atomically rewritten) once it holds twice that many lines, so appends stay O(1).
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from forethought.predict.history import NO_HISTORY, ConversationHistory


@dataclass(frozen=True)
class Observation:
    """A completed request: its prompt, length and history, the served model ("" for the default), and for
    a model the predictor does not know, its model-agnostic log estimate (the online calibration's input)."""

    prompt: str
    output_tokens: int
    history: ConversationHistory = NO_HISTORY
    model: str = ""
    agnostic_log_estimate: float | None = None


class ObservationStore:
    """Bounded store of observations, persisted to ``path`` (or in memory only when ``path`` is None)."""

    def __init__(self, path: Path | None, capacity: int = 20_000) -> None:
        self._path = Path(path) if path else None
        self._capacity = capacity
        self._recent: deque[Observation] = deque(maxlen=capacity)
        self._lines_in_file = 0
        self._lock = threading.Lock()
        if self._path and self._path.exists():
            for line in self._path.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    history = ConversationHistory(tuple(record.get("earlier_answer_chars", ())))
                    estimate = record.get("agnostic_log_estimate")
                    self._recent.append(Observation(
                        record["prompt"], int(record["output_tokens"]), history, str(record.get("model", "")),
                        None if estimate is None else float(estimate),
                    ))
                    self._lines_in_file += 1

    def __len__(self) -> int:
        return len(self._recent)

    def snapshot(self) -> list[Observation]:
        with self._lock:
            return list(self._recent)

    def append(self, observation: Observation) -> None:
        with self._lock:
            self._recent.append(observation)
            if self._path is None:
                return
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with self._path.open("a") as stream:
                stream.write(_line(observation))
            self._lines_in_file += 1
            if self._lines_in_file >= 2 * self._capacity:
                self._compact()

    def _compact(self) -> None:
        assert self._path is not None
        staging = self._path.with_suffix(".compacting")
        staging.write_text("".join(_line(observation) for observation in self._recent))
        os.replace(staging, self._path)
        self._lines_in_file = len(self._recent)


def _line(observation: Observation) -> str:
    record = {"prompt": observation.prompt, "output_tokens": observation.output_tokens,
              "earlier_answer_chars": list(observation.history.earlier_answer_chars), "model": observation.model,
              "agnostic_log_estimate": observation.agnostic_log_estimate}
    return json.dumps(record) + "\n"

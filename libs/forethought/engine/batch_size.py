"""TCP-like adaptive batch size (BROS section 4.2, "Adaptive Batch Sizing").

Start conservative; grow by one each iteration that left no RT request waiting (additive increase);
reset to the initial size as soon as the estimated iteration time overran the tightest RT residual time
(aggressive backoff).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AdaptiveBatchSize:
    initial: int
    maximum: int
    current: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.initial <= self.maximum:
            raise ValueError("need 1 <= initial batch size <= maximum batch size")
        self.current = self.current or self.initial

    def update(self, backed_off: bool, rt_left_waiting: bool) -> None:
        if backed_off:
            self.current = self.initial
        elif not rt_left_waiting:
            self.current = min(self.maximum, self.current + 1)

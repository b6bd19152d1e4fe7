"""TCP-like adaptive batch size (BROS section 4.2, "Adaptive Batch Sizing").

Start conservative; grow by one every iteration whose RT selection did not take Algorithm 1's early return
(lines 11-12), whether or not RT requests are queued (gradual expansion); reset to the initial size as
soon as the estimated iteration time overran the tightest RT residual time (aggressive backoff). Growth
must not wait for an empty RT queue: under steady RT load the queue is never empty, and a batch frozen at
its initial size leaves running RT requests undecoded until they miss their TPOT.
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

    def update(self, backed_off: bool) -> None:
        if backed_off:
            self.current = self.initial
        else:
            self.current = min(self.maximum, self.current + 1)

"""The model load-time cost table (SamuLLM sections 2 and 4.1).

The paper profiles, per model and execution plan, the time to load the weights onto the plan's devices and
to set up tensor parallelism's communication, and adds it to the running time of every model that a stage
newly starts (a model kept with the same plan pays nothing). It reports 11-47 s for its models on
A100-80GB (section 5.1) but publishes no per-model table, so ``LoadTimeModel`` takes measured entries
(``table``, keyed by model name and plan) and falls back on the cost profiles' terms for the rest:

    load = startup_s + tp_setup_s * (tp - 1) + weight_bytes / (tp * read_bytes_per_s)

Replicas of a data-parallel plan load side by side, so ``dp`` does not add time. The defaults are not
measured: 8 s of engine start-up (process, allocator, CUDA graphs), 3 s per extra tensor-parallel rank
(communicator set-up) and 2 GB/s of weight reads per device (a local NVMe SSD). They put the paper's
models (6-13B on one to eight devices, 70B on four or eight) inside its 11-47 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from forethought.planner.plans import ExecutionPlan, ModelNode


@dataclass(frozen=True)
class LoadTimeModel:
    """Seconds to load a model with a plan: a measured entry, or the formula above."""

    startup_s: float = 8.0
    tp_setup_s: float = 3.0
    read_bytes_per_s: float = 2e9
    table: Mapping[tuple[str, ExecutionPlan], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.startup_s < 0 or self.tp_setup_s < 0 or self.read_bytes_per_s <= 0:
            raise ValueError("load times must be >= 0 and read_bytes_per_s positive")

    def load_time(self, model: ModelNode, plan: ExecutionPlan) -> float:
        measured = self.table.get((model.name, plan))
        if measured is not None:
            return measured
        weights = model.spec.weight_bytes / (plan.tp * self.read_bytes_per_s)
        return self.startup_s + self.tp_setup_s * (plan.tp - 1) + weights

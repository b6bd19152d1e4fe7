"""A simulated cluster from one configuration: engines, router and queue built by name (STYLE habit 5).

Engines are ``EngineCore``s over a ``CostModelExecutor`` of a named profile. Each engine's KV capacity is
stated in ``ClusterConfig``: ``kv_capacity_tokens`` when set, else the profile's (``CostProfile.kv_capacity_tokens``:
the GPU memory a serving engine may use, 90%, less the weights, over the model's KV bytes per token;
``llama-7b-a100`` holds 111,618 tokens, docs/simulator.md), or ``engine.num_blocks`` with
``use_profile_capacity=False``. Routers come from
``forethought.routing.build_router`` and queue orders from ``forethought.queueing.build_policy``, so a
benchmark swaps any of them by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from forethought.costmodel import CostModelExecutor, get_profile
from forethought.engine.core import EngineConfig, EngineCore
from forethought.queueing import GlobalQueue, build_policy
from forethought.routing import build_router
from forethought.sim.cluster import ClusterSimulator
from forethought.workloads.workload import TraceRequest, Workload


@dataclass(frozen=True)
class ClusterConfig:
    """What to simulate.

    Args:
        engines: number of engines (ids ``engine-0`` ... ``engine-{n-1}``).
        profile: cost profile name (``forethought.costmodel.profile_names()``).
        engine: engine knobs; its ``num_blocks`` counts only with ``use_profile_capacity=False`` and no
            ``kv_capacity_tokens``.
        kv_capacity_tokens: KV tokens each engine holds (rounded down to whole blocks); None: the profile's
            when ``use_profile_capacity`` is set, else ``engine.num_blocks`` blocks.
        router / router_options: placement policy by name.
        queue_policy / queue_options: global queue order by name.
        queue_capacity: most requests waiting in the global queue.
        max_waiting_per_engine: admitted-but-not-running requests per engine; None admits all at once.
    """

    engines: int = 1
    profile: str = "llama-13b-a100"
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(num_blocks=1))
    use_profile_capacity: bool = True
    kv_capacity_tokens: int | None = None
    router: str = "round_robin"
    router_options: Mapping[str, Any] = field(default_factory=dict)
    queue_policy: str = "fcfs"
    queue_options: Mapping[str, Any] = field(default_factory=dict)
    queue_capacity: int = 1_000_000
    max_waiting_per_engine: int | None = 8

    def engine_config(self) -> EngineConfig:
        """The engine config with the stated KV capacity (see ``kv_capacity_tokens``)."""
        if self.kv_capacity_tokens is not None:
            capacity = self.kv_capacity_tokens
        elif self.use_profile_capacity:
            capacity = get_profile(self.profile).kv_capacity_tokens
        else:
            return self.engine
        return replace(self.engine, num_blocks=capacity // self.engine.block_size)


def build_simulator(workload: Workload, config: ClusterConfig,
                    output_predictor: Callable[[TraceRequest], float] | None = None,
                    engine_factory: Callable[[EngineConfig, CostModelExecutor], EngineCore] = EngineCore,
                    ) -> ClusterSimulator:
    """A fresh simulator of ``config`` replaying ``workload``; ``engine_factory`` builds each engine core
    (a benchmark may pass an instrumented one)."""
    if config.engines < 1:
        raise ValueError(f"engines must be at least 1, got {config.engines}")
    engine_config = config.engine_config()
    profile = get_profile(config.profile)
    engines = {f"engine-{index}": engine_factory(engine_config, CostModelExecutor(profile))
               for index in range(config.engines)}
    queue = GlobalQueue(build_policy(config.queue_policy, **config.queue_options), config.queue_capacity)
    return ClusterSimulator(
        workload, engines, build_router(config.router, **config.router_options), queue,
        max_waiting_per_engine=config.max_waiting_per_engine, block_size=engine_config.block_size,
        output_predictor=output_predictor,
    )

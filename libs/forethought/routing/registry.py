"""One registry that builds every placement policy by name (E2 and the baselines alike).

A benchmark or the scheduler's configuration swaps policies by name:
``build_router("e2", history_window_s=60)``, ``build_router("weighted", weights={"prefix": 1})``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forethought.routing.baselines import (
    CacheAwareRouter,
    KvCostRouter,
    LeastLoadRouter,
    RoundRobinRouter,
)
from forethought.routing.e2 import E2Router
from forethought.routing.router import Router
from forethought.routing.scoring import build_weighted_router

_ROUTERS: dict[str, Callable[..., Router]] = {
    E2Router.name: E2Router,
    RoundRobinRouter.name: RoundRobinRouter,
    LeastLoadRouter.name: LeastLoadRouter,
    CacheAwareRouter.name: CacheAwareRouter,
    KvCostRouter.name: KvCostRouter,
    "weighted": build_weighted_router,
}

ROUTER_NAMES: tuple[str, ...] = tuple(_ROUTERS)


def build_router(name: str, **options: Any) -> Router:
    """Builds a router by name with its options.

    Raises:
        ValueError: unknown name or option, naming the valid choices.
    """
    factory = _ROUTERS.get(name)
    if factory is None:
        raise ValueError(f"unknown router {name!r}; choose one of {', '.join(ROUTER_NAMES)}")
    try:
        return factory(**options)
    except TypeError as error:
        raise ValueError(f"bad options for router {name!r}: {error}") from None

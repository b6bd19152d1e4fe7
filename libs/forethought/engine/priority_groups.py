"""Preble's wait-queue ordering by cached-token ratio (Preble section 4.3).

A waiting request goes to priority group ``floor(ratio * P)`` of ``P + 1`` groups (63 of 100 prompt tokens
cached with P = 10: group 6). Batches are picked proportionally: each round takes up to ``g + 1``
requests from group ``g``, highest group first, so well-cached requests go first without starving the
rest. Within a group, arrival order is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def priority_group(cached_ratio: float, num_groups: int) -> int:
    """Group index in ``[0, num_groups]`` of a request with ``cached_ratio`` of its prompt cached."""
    return min(num_groups, max(0, int(cached_ratio * num_groups)))


def proportional_order(
    items: Sequence[Item], cached_ratio: Callable[[Item], float], num_groups: int
) -> list[Item]:
    """``items`` (in arrival order) reordered by proportional picks over the priority groups."""
    if num_groups <= 0:
        return list(items)
    groups: list[list[Item]] = [[] for _ in range(num_groups + 1)]
    for item in items:
        groups[priority_group(cached_ratio(item), num_groups)].append(item)
    ordered: list[Item] = []
    cursors = [0] * len(groups)
    while len(ordered) < len(items):
        for group in range(num_groups, -1, -1):
            take = groups[group][cursors[group] : cursors[group] + group + 1]
            cursors[group] += len(take)
            ordered.extend(take)
    return ordered

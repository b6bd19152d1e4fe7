"""Preble's E2 global scheduler (section 4.2, Algorithms 1 and 2): the router and its named parts.

- ``router``: ``E2Router``, which composes the parts below over the ledger of its own placements.
- ``worker_state``: ``E2WorkerState``, everything E2 keeps about one worker.
- ``load_cost``: ``LoadCost``, Algorithm 2's ``L + M + P``, and ``W``, the wait for KV held by requests in flight.
- ``exploit_explore``: the phases of Algorithm 1 (``Exploit`` with ``Rebalance``,
  ``PrefillDecodeBalance``, ``Explore``).
- ``replication``: ``HotPrefixReplication`` of prefixes whose TTFT doubles on an overloaded holder.
"""

from forethought.routing.e2.router import E2Decision, E2Router

__all__ = ["E2Decision", "E2Router"]

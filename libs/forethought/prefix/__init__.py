"""Prefix matching (Preble section 4.1): the global prefix index, in memory and in Redis.

Blocks are named by the chained block hashes of ``forethought.domain``.
"""

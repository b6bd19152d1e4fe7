"""Prefix matching (Preble section 4.1): the global prefix index, in memory and in Redis, over the chained block hashes of ``forethought.domain``."""

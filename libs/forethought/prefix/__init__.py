"""Prefix matching: chained block hashes and the global prefix index (in memory and in Redis)."""

"""Forethought: a demand-aware gRPC serving mesh for LLM applications."""

__version__ = "0.1.0"

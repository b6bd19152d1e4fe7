"""Latency cost models of LLM iterations (BROS section 4.1; SamuLLM section 4) and the named profiles."""

from forethought.costmodel.executor import CostModelExecutor
from forethought.costmodel.profiles import (
    CostProfile,
    HardwareSpec,
    ModelSpec,
    derive_profile,
)
from forethought.costmodel.registry import PROFILES, get_profile, profile_names

__all__ = [
    "PROFILES",
    "CostModelExecutor",
    "CostProfile",
    "HardwareSpec",
    "ModelSpec",
    "derive_profile",
    "get_profile",
    "profile_names",
]

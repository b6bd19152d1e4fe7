"""Backend prewarming on a worker (Hermes section 3.4): KV prefixes, LoRA adapters, models, tools."""

from forethought.prewarm.agent import (
    PREWARM_PRIORITY,
    PrewarmAgent,
    PrewarmResult,
    PrewarmStatus,
)
from forethought.prewarm.ledger import (
    ExpiredEntry,
    PrewarmKind,
    PrewarmLedger,
    PrewarmMetrics,
)
from forethought.prewarm.lifecycle import EngineFactory, ModelLifecycle
from forethought.prewarm.tools import (
    Availability,
    DockerContainerLauncher,
    ProcessPoolSandbox,
    ToolLauncher,
)

__all__ = [
    "PREWARM_PRIORITY",
    "Availability",
    "DockerContainerLauncher",
    "EngineFactory",
    "ExpiredEntry",
    "ModelLifecycle",
    "PrewarmAgent",
    "PrewarmKind",
    "PrewarmLedger",
    "PrewarmMetrics",
    "PrewarmResult",
    "PrewarmStatus",
    "ProcessPoolSandbox",
    "ToolLauncher",
]

"""The worker's prewarm agent (Hermes section 3.4): warm what the next request will need, on signal.

The demand service decides *when* to prewarm (Eq. 3, knob K); this agent does the warming on one
worker and reports when each backend is ready and how long warming took. Four kinds:

- KV prefix: run the prefix's prefill with one output token, discarded, so a later request sharing it
  hits the engine's prefix cache;
- LoRA adapter: load it into the engine, where the engine supports adapters;
- model: load it through the worker's ``ModelLifecycle``;
- tool: start a non-LLM backend through a ``ToolLauncher`` (sandbox pool, container).

Warmed entries go into a ``PrewarmLedger``: used before the TTL they count as hits, otherwise they
expire as waste and the agent releases tools and models it started.
"""

from __future__ import annotations

import asyncio
import enum
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forethought.backends.protocol import EngineBackend
from forethought.domain import GenerationRequest, SamplingParams, ServiceClass
from forethought.domain.block_hashes import chained_block_hashes
from forethought.prewarm.ledger import (
    ExpiredEntry,
    PrewarmKind,
    PrewarmLedger,
    PrewarmMetrics,
)
from forethought.prewarm.lifecycle import ModelLifecycle
from forethought.prewarm.tools import ToolLauncher

PREWARM_PRIORITY = 1_000_000
"""vLLM priority of prefix prewarms: after every real request (lower runs first)."""

_INDEX_BLOCK = 16  # the prefix index's block (forethought.domain.block_hashes), whatever the engine's


class PrewarmStatus(enum.Enum):
    READY = "ready"
    UNSUPPORTED = "unsupported"
    FAILED = "failed"


@dataclass(frozen=True)
class PrewarmResult:
    """Outcome of one prewarm: ``warmup_s`` is the measured time until the backend was ready."""

    kind: PrewarmKind
    key: str
    status: PrewarmStatus
    warmup_s: float = 0.0
    reason: str = ""


class _Unsupported(Exception):
    """Raised inside a warm-up to report UNSUPPORTED with its message as the reason."""


class PrewarmAgent:
    """Warms KV prefixes, LoRA adapters, models and tool backends; tallies hits and waste.

    Args:
        lifecycle: the worker's engines by model name.
        tools: launchers by kind (``ProcessPoolSandbox.kind``, ``DockerContainerLauncher.kind``).
        ttl_s: how long a prewarmed, unused backend is kept before it counts as waste.
        clock: monotonic seconds (injected so tests control expiry).
    """

    def __init__(
        self,
        lifecycle: ModelLifecycle,
        tools: Mapping[str, ToolLauncher] | None = None,
        ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifecycle = lifecycle
        self.tools = dict(tools or {})
        self.ledger = PrewarmLedger(ttl_s, clock)
        self._clock = clock
        self._started_models: set[str] = set()

    async def prewarm_prefix(self, model: str, prompt_token_ids: Sequence[int]) -> PrewarmResult:
        """Prefills ``prompt_token_ids`` on ``model``'s engine so its blocks are cached."""
        key = _prefix_key(model, prompt_token_ids)
        return await self._run(
            PrewarmKind.KV_PREFIX, key, lambda: self._prefill(model, prompt_token_ids)
        )

    async def prewarm_lora(self, model: str, lora_name: str, lora_path: str | Path) -> PrewarmResult:
        """Loads a LoRA adapter into ``model``'s engine."""
        return await self._run(
            PrewarmKind.LORA, lora_name, lambda: self._load_lora(model, lora_name, lora_path)
        )

    async def prewarm_model(self, model: str) -> PrewarmResult:
        """Loads ``model``; READY at once (and no bet recorded) when it is already loaded."""
        if self.lifecycle.engine(model) is not None:
            return PrewarmResult(PrewarmKind.MODEL, model, PrewarmStatus.READY, 0.0, "already loaded")
        result = await self._run(PrewarmKind.MODEL, model, lambda: self.lifecycle.load(model))
        if result.status is PrewarmStatus.READY:
            self._started_models.add(model)
        return result

    async def prewarm_tool(self, kind: str) -> PrewarmResult:
        """Starts the tool backend of ``kind`` through its launcher."""
        return await self._run(PrewarmKind.TOOL, kind, lambda: self._warm_tool(kind))

    def use_prefix(self, model: str, prompt_token_ids: Sequence[int]) -> bool:
        """A request with this prompt arrived: a hit when it extends a prewarmed, unexpired prefix."""
        waiting = set(self.ledger.waiting_keys(PrewarmKind.KV_PREFIX))
        if not waiting:
            return False  # the common case: hashing the whole prompt would cost every request for nothing
        for block in reversed(chained_block_hashes(prompt_token_ids, _INDEX_BLOCK)):
            key = f"{model}:{block:016x}"
            if key in waiting:
                return self.ledger.use(PrewarmKind.KV_PREFIX, key)
        return False

    def use(self, kind: PrewarmKind, key: Hashable) -> bool:
        """A request used this model, adapter or tool: a hit when it was prewarmed and unexpired."""
        return self.ledger.use(kind, key)

    async def expire(self) -> list[ExpiredEntry]:
        """Expires idle prewarms (counted as waste) and releases the tools and models they hold."""
        expired = self.ledger.expire()
        for entry in expired:
            if entry.kind is PrewarmKind.TOOL and entry.key in self.tools:
                await self.tools[str(entry.key)].release()
            elif entry.kind is PrewarmKind.MODEL and entry.key in self._started_models:
                self._started_models.discard(str(entry.key))
                await self.lifecycle.unload(str(entry.key))
        return expired

    def metrics(self, kind: PrewarmKind | None = None) -> PrewarmMetrics:
        return self.ledger.metrics(kind)

    async def close(self) -> None:
        """Releases every tool backend (models belong to the lifecycle)."""
        for launcher in self.tools.values():
            await launcher.release()

    async def _run(
        self, kind: PrewarmKind, key: str, warm_up: Callable[[], Awaitable[object]]
    ) -> PrewarmResult:
        started = self._clock()
        try:
            await warm_up()
        except _Unsupported as unsupported:
            self.ledger.declined(kind, unsupported=True)
            return PrewarmResult(kind, key, PrewarmStatus.UNSUPPORTED, 0.0, str(unsupported))
        except Exception as error:
            self.ledger.declined(kind, unsupported=False)
            return PrewarmResult(kind, key, PrewarmStatus.FAILED, self._clock() - started, repr(error))
        warmup_s = self._clock() - started
        self.ledger.warmed(kind, key, warmup_s)
        return PrewarmResult(kind, key, PrewarmStatus.READY, warmup_s)

    def _engine(self, model: str) -> EngineBackend:
        engine = self.lifecycle.engine(model)
        if engine is None:
            raise _Unsupported(f"model {model!r} is not loaded on this worker")
        return engine

    async def _prefill(self, model: str, prompt_token_ids: Sequence[int]) -> None:
        if len(prompt_token_ids) < _INDEX_BLOCK:
            raise _Unsupported(f"a prefix shorter than {_INDEX_BLOCK} tokens fills no cache block")
        request = GenerationRequest(
            request_id=f"prewarm-{uuid.uuid4().hex[:12]}",
            prompt_token_ids=tuple(prompt_token_ids),
            max_tokens=1,
            service_class=ServiceClass.BE,
            priority=PREWARM_PRIORITY,
            sampling=SamplingParams(temperature=0.0),
        )
        async for _chunk in self._engine(model).generate(request):
            pass  # the output token is discarded: only the cached blocks matter

    async def _load_lora(self, model: str, lora_name: str, lora_path: str | Path) -> None:
        engine = self._engine(model)
        # LoRA is optional in EngineBackend: engines that serve adapters expose add_lora.
        add_lora = getattr(engine, "add_lora", None)
        if add_lora is None or not getattr(engine, "supports_lora", False):
            raise _Unsupported(
                f"the engine of {model!r} serves no LoRA adapters (start it with enable_lora)"
            )
        await add_lora(lora_name, lora_path)

    async def _warm_tool(self, kind: str) -> None:
        launcher = self.tools.get(kind)
        if launcher is None:
            raise _Unsupported(f"no tool launcher of kind {kind!r} on this worker")
        availability = await asyncio.to_thread(launcher.availability)  # `docker info` may take seconds: not on the loop
        if not availability.available:
            raise _Unsupported(availability.reason)
        await launcher.warm()


def _prefix_key(model: str, prompt_token_ids: Sequence[int]) -> str:
    hashes = chained_block_hashes(prompt_token_ids, _INDEX_BLOCK)
    return f"{model}:{hashes[-1]:016x}" if hashes else f"{model}:short"

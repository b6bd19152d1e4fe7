"""PrewarmAgent over a recording engine and real tool launchers (Hermes section 3.4)."""

from __future__ import annotations

import os

from forethought.domain.block_hashes import chained_block_hashes
from forethought.prewarm import (
    PREWARM_PRIORITY,
    DockerContainerLauncher,
    ModelLifecycle,
    PrewarmAgent,
    PrewarmKind,
    PrewarmMetrics,
    PrewarmStatus,
    ProcessPoolSandbox,
)

PREFIX = tuple(range(100, 140))  # 40 tokens: two full index blocks


def _agent(clock, engines: dict, **kwargs) -> PrewarmAgent:
    return PrewarmAgent(ModelLifecycle(engines.__getitem__, clock=clock), clock=clock, ttl_s=30.0, **kwargs)


async def test_prefix_prewarm_prefills_one_discarded_token_at_lowest_priority(clock, make_engine) -> None:
    engine = make_engine()
    agent = _agent(clock, {"m": engine})
    await agent.lifecycle.load("m")

    result = await agent.prewarm_prefix("m", PREFIX)

    assert result.status is PrewarmStatus.READY
    assert result.key == f"m:{chained_block_hashes(PREFIX, 16)[-1]:016x}"
    (request,) = engine.requests
    assert request.prompt_token_ids == PREFIX
    assert request.max_tokens == 1
    assert request.priority == PREWARM_PRIORITY


async def test_request_extending_a_prewarmed_prefix_is_a_hit_once(clock, make_engine) -> None:
    agent = _agent(clock, {"m": make_engine()})
    await agent.lifecycle.load("m")
    await agent.prewarm_prefix("m", PREFIX)

    assert agent.use_prefix("other-model", PREFIX + (1, 2, 3)) is False
    assert agent.use_prefix("m", PREFIX[:20]) is False
    assert agent.use_prefix("m", PREFIX + (1, 2, 3)) is True
    assert agent.use_prefix("m", PREFIX + (1, 2, 3)) is False
    assert agent.metrics() == PrewarmMetrics(warmed=1, hits=1)


async def test_prefix_on_an_unloaded_model_or_too_short_is_unsupported(clock, make_engine) -> None:
    agent = _agent(clock, {"m": make_engine()})
    not_loaded = await agent.prewarm_prefix("m", PREFIX)
    await agent.lifecycle.load("m")
    too_short = await agent.prewarm_prefix("m", PREFIX[:10])

    assert not_loaded.status is PrewarmStatus.UNSUPPORTED
    assert "not loaded" in not_loaded.reason
    assert too_short.status is PrewarmStatus.UNSUPPORTED
    assert "shorter than 16" in too_short.reason
    assert agent.metrics() == PrewarmMetrics(unsupported=2)


async def test_lora_on_an_engine_without_adapters_is_unsupported(clock, make_engine) -> None:
    agent = _agent(clock, {"m": make_engine()})
    await agent.lifecycle.load("m")

    result = await agent.prewarm_lora("m", "sql-adapter", "/nowhere")

    assert result.status is PrewarmStatus.UNSUPPORTED
    assert "enable_lora" in result.reason


async def test_model_prewarm_loads_it_and_expiry_unloads_it_as_waste(clock, make_engine) -> None:
    engine = make_engine()
    agent = _agent(clock, {"m": engine})

    result = await agent.prewarm_model("m")
    again = await agent.prewarm_model("m")
    clock.advance(31.0)
    expired = await agent.expire()

    assert result.status is PrewarmStatus.READY
    assert again.reason == "already loaded"
    assert [e.key for e in expired] == ["m"]
    assert engine.started == 1 and engine.stopped == 1
    assert agent.lifecycle.loaded() == []
    assert agent.metrics() == PrewarmMetrics(warmed=1, wasted=1, wasted_idle_s=31.0)


async def test_failed_model_load_is_reported_not_raised(clock) -> None:
    agent = _agent(clock, {})
    result = await agent.prewarm_model("missing")
    assert result.status is PrewarmStatus.FAILED
    assert "missing" in result.reason


async def test_sandbox_prewarm_runs_code_in_a_spawned_process_and_expires(clock) -> None:
    sandbox = ProcessPoolSandbox(workers=1)
    agent = _agent(clock, {}, tools={sandbox.kind: sandbox})
    try:
        result = await agent.prewarm_tool(sandbox.kind)
        assert result.status is PrewarmStatus.READY
        assert sandbox.is_warm
        answer = await sandbox.run_code("import os\nresult = (os.getpid(), sum(range(10)))")
        assert answer[1] == 45
        assert answer[0] != os.getpid()
        assert agent.use(PrewarmKind.TOOL, sandbox.kind) is True

        await agent.prewarm_tool(sandbox.kind)
        clock.advance(30.0)
        await agent.expire()
        assert not sandbox.is_warm
        assert agent.metrics() == PrewarmMetrics(warmed=2, hits=1, wasted=1, wasted_idle_s=30.0)
    finally:
        await agent.close()


async def test_unknown_tool_kind_and_missing_docker_report_unsupported(clock, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    docker = DockerContainerLauncher()
    agent = _agent(clock, {}, tools={docker.kind: docker})

    unknown = await agent.prewarm_tool("gpu-vit")
    container = await agent.prewarm_tool(docker.kind)

    assert unknown.status is PrewarmStatus.UNSUPPORTED
    assert "gpu-vit" in unknown.reason
    assert container.status is PrewarmStatus.UNSUPPORTED
    assert "docker" in container.reason

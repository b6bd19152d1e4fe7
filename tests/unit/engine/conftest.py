"""Factories shared by the engine tests: requests, engines on a cost-model executor."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from forethought.costmodel import CostModelExecutor, get_profile
from forethought.domain import GenerationRequest, SamplingParams, ServiceClass
from forethought.engine.core import EngineConfig, EngineCore, StepOutput

RequestFactory = Callable[..., GenerationRequest]


def build_request(
    request_id: str,
    prompt_len: int = 32,
    max_tokens: int = 4,
    service_class: ServiceClass = ServiceClass.BE,
    prompt: tuple[int, ...] | None = None,
    ttft_slo_s: float = 0.0,
    tpot_slo_s: float = 0.0,
    sampling: SamplingParams | None = None,
) -> GenerationRequest:
    """A request whose prompt defaults to ids derived from its id (distinct prompts, no prefix hits)."""
    if prompt is None:
        base = (sum(map(ord, request_id)) * 7919) % 40000
        prompt = tuple(base + i for i in range(prompt_len))
    return GenerationRequest(
        request_id=request_id,
        prompt_token_ids=prompt,
        max_tokens=max_tokens,
        service_class=service_class,
        ttft_slo_s=ttft_slo_s,
        tpot_slo_s=tpot_slo_s,
        sampling=sampling or SamplingParams(),
    )


def build_engine(profile: str = "llama-7b-a100", **config: object) -> EngineCore:
    settings: dict[str, object] = {"num_blocks": 256}
    settings.update(config)
    return EngineCore(EngineConfig(**settings), CostModelExecutor(get_profile(profile)))


def step_until_idle(engine: EngineCore, now: float = 0.0, max_steps: int = 10_000) -> list[tuple[float, StepOutput]]:
    """Steps the engine in virtual time until it has no work; returns (start time, output) per step."""
    steps: list[tuple[float, StepOutput]] = []
    while engine.has_work():
        output = engine.step(now)
        steps.append((now, output))
        now += output.duration_s
        assert len(steps) < max_steps, "engine made no progress"
    return steps


@pytest.fixture
def make_request() -> RequestFactory:
    return build_request


@pytest.fixture
def make_engine() -> Callable[..., EngineCore]:
    return build_engine


@pytest.fixture
def run_until_idle() -> Callable[..., list[tuple[float, StepOutput]]]:
    return step_until_idle

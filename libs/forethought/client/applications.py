"""Running an application file through the mesh (docs/applications.md): register it with the demand
service, draw one run from the file's own description (its branches and length distributions, as
profiling draws them), and play it through the scheduler: each LLM step's parallel requests as
``generate`` calls of the run, each tool step waited out and reported, then the finish.

Prompts are text of the drawn length (a replay of the application's shape, not of a real task's text).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from forethought.client.client import AsyncForethoughtClient
from forethought.client.connection import client_channel
from forethought.client.results import ApplicationRun, ClientError, Completion, FinishedRun
from forethought.demand import BackendKind, PDGraph, UnitExecution, application_from_dict, draw_runs
from forethought.documents import read_document
from forethought.domain import SamplingParams
from forethought.v1 import demand_pb2, demand_pb2_grpc

FILLER = ("Summarize what this step of the application must do, and then do it carefully and concisely. "
          "Explain each decision in one short sentence. ")


@dataclass(frozen=True)
class PlayOptions:
    """How a drawn run is played: the served model every LLM step runs on, caps on the drawn prompt and
    output lengths (the served model's context) and tool duration (a live replay stays short), and the
    seed of the draw."""

    model: str = "SmolLM2-135M-Instruct"
    max_tokens: int = 32
    max_tool_s: float = 2.0
    seed: int = 0
    max_prompt_tokens: int = 1024


@dataclass(frozen=True)
class StepPlayed:
    """One step execution as played: its answers for an LLM step, its duration for a tool step."""

    step: str
    answers: tuple[Completion, ...] = ()
    duration_s: float = 0.0


def step_prompt(application: str, step: str, index: int, input_tokens: int) -> str:
    """About ``input_tokens`` tokens of English (four characters a token) for one request of a step."""
    head = f"Application {application}, step {step}, request {index}. "
    return head + FILLER * max(1, (4 * input_tokens - len(head)) // len(FILLER))


async def register_application(demand_address: str, content: str, timeout_s: float = 60.0) -> str:
    """Registers an application file's content with the demand service (kept when registered already);
    returns its name."""
    channel = client_channel(demand_address, None, None)
    try:
        reply = await demand_pb2_grpc.DemandServiceStub(channel).RegisterApplication(
            demand_pb2.RegisterApplicationRequest(application_file=content, keep_existing=True), timeout=timeout_s)
    except grpc.aio.AioRpcError as error:
        raise ClientError.of(error) from error
    finally:
        await channel.close()
    return str(reply.application)


async def run_application_file(
    client: AsyncForethoughtClient, demand_address: str, path: str | Path, options: PlayOptions | None = None,
    started: Callable[[ApplicationRun, list[UnitExecution]], None] = lambda run, steps: None,
    played: Callable[[StepPlayed], None] = lambda step: None,
) -> FinishedRun:
    """Registers ``path``, draws one run, plays it step by step, and finishes it.

    ``started`` hears the submitted run and its drawn steps, ``played`` each step as it ends.

    Raises:
        forethought.domain.InvalidField: the file breaks a rule (nothing was sent).
        ClientError: a call failed.
    """
    options = options or PlayOptions()
    data = read_document(path)
    graph = application_from_dict(data, random.Random(0))  # checks the file before anything is sent
    (steps,) = draw_runs(data, 1, random.Random(options.seed))
    await register_application(demand_address, Path(path).read_text())
    run = await client.submit_application(graph.name)
    started(run, steps)
    try:
        for index, execution in enumerate(steps):
            played(await _play(client, graph, run.run_id, index, execution, options))
    except BaseException:
        with contextlib.suppress(ClientError):  # the run is abandoned, not left open until the scheduler expires it
            await asyncio.shield(client.finish_application(run.run_id, failed=True))
        raise
    return await client.finish_application(run.run_id)


async def _play(client: AsyncForethoughtClient, graph: PDGraph, run_id: str, position: int, execution: UnitExecution,
                options: PlayOptions) -> StepPlayed:
    consumption = execution.consumption
    if graph.units[execution.unit].backend.kind is BackendKind.TOOL:
        duration_s = min(consumption.tool_duration_s, options.max_tool_s)
        await asyncio.sleep(duration_s)
        await client.report_step(run_id, execution.unit, duration_s)
        return StepPlayed(execution.unit, duration_s=duration_s)
    max_tokens = max(1, min(consumption.output_tokens, options.max_tokens))
    prefix = graph.units[execution.unit].backend.prompt_prefix  # the part a prewarm may have computed already
    answers = await asyncio.gather(*(client.complete(
        model=options.model, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0),
        prompt=prefix + step_prompt(graph.name, execution.unit, index, min(consumption.input_tokens, options.max_prompt_tokens)),
        application_id=run_id, step=execution.unit, execution=position,  # joined however late a request arrives
    ) for index in range(consumption.parallelism)))  # one execution: its requests go together
    return StepPlayed(execution.unit, answers=tuple(answers))

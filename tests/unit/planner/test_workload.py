"""Realising a job: lengths sampled once in the job's order and capped, prompts grown by their inputs'
outputs; advancing the work after a stage."""

from __future__ import annotations

import random

import pytest
from forethought.domain import InvalidField
from forethought.planner import Job, JobRequest, OutputLengthCDF, RequestWork, realise

from .conftest import make_model, make_pool


def test_prompts_take_their_inputs_outputs_and_lengths_are_capped() -> None:
    summarizer, judge = make_model("s", max_seq_len=512, max_output_tokens=100), make_model("j")
    requests = (JobRequest("c0", "s", 300), JobRequest("c1", "s", 300, ("c0",)),
                JobRequest("e", "j", 20, ("c1",), output_tokens=7))
    job = Job((summarizer, judge), requests, make_pool(), (("s", "s"), ("s", "j")))
    cdfs = {"s": OutputLengthCDF.from_observations([150])}
    workload = realise(job, cdfs, random.Random(0))
    assert workload.remaining == (
        RequestWork("c0", "s", 300, 100, ()),  # min(150, y=100, 512 - 300)
        RequestWork("c1", "s", 400, 100, ("c0",)),  # prompt 300 + 100; min(150, 100, 112)
        RequestWork("e", "j", 120, 7, ("c1",)),  # the known length
    )


def test_the_same_seed_gives_the_same_lengths() -> None:
    job = Job((make_model("m"),), tuple(JobRequest(f"r{i}", "m", 5) for i in range(20)), make_pool())
    cdfs = {"m": OutputLengthCDF.from_observations(range(1, 500))}
    first = realise(job, cdfs, random.Random(3))
    assert first == realise(job, cdfs, random.Random(3))
    assert first != realise(job, cdfs, random.Random(4))


def test_a_model_without_an_ecdf_is_named() -> None:
    job = Job((make_model("m"),), (JobRequest("r", "m", 5),), make_pool())
    with pytest.raises(InvalidField, match=r"models\[m\]: has requests of unknown output length"):
        realise(job, {}, random.Random(0))


def test_advance_drops_finished_requests_and_moves_generated_tokens_into_the_prompt() -> None:
    job = Job((make_model("m"),), (JobRequest("a", "m", 5, output_tokens=3), JobRequest("b", "m", 5, output_tokens=9)),
              make_pool())
    after = realise(job, {}, random.Random(0)).advance({"a"}, {"b": 4})
    assert after.remaining == (RequestWork("b", "m", 9, 5, ()),)
    assert after.finished == frozenset({"a"})
    assert not after.is_model_finished("m")
    assert after.advance({"b"}, {}).is_done

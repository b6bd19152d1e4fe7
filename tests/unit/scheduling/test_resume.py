"""The continuation of a stream whose worker was lost: greedy or seeded decoding, without output penalties."""

from __future__ import annotations

from forethought.domain import GenerationRequest, SamplingParams
from forethought.scheduling.resume import continuation, resumable


def request(**sampling: object) -> GenerationRequest:
    return GenerationRequest("r", (1, 2, 3), max_tokens=10, sampling=SamplingParams(**sampling))  # type: ignore[arg-type]


def test_a_greedy_stream_continues_from_the_delivered_tokens():
    rest = continuation(request(temperature=0.0), [7, 8, 9])
    assert rest is not None and rest.prompt_token_ids == (1, 2, 3, 7, 8, 9) and rest.max_tokens == 7
    assert rest.request_id == "r" and rest.sampling.temperature == 0.0


def test_a_seeded_stream_continues_and_an_unseeded_sampled_one_does_not():
    assert resumable(request(temperature=0.8, seed=1)) and continuation(request(temperature=0.8, seed=1), [5]) is not None
    assert not resumable(request(temperature=0.8)) and continuation(request(temperature=0.8), [5]) is None


def test_a_continuation_asks_for_no_prompt_scores_but_keeps_the_outputs():
    rest = continuation(request(temperature=0.0, logprobs=2, prompt_logprobs=2), [7])
    assert rest is not None and rest.sampling.prompt_logprobs is None and rest.sampling.logprobs == 2


def test_penalties_on_generated_tokens_make_a_stream_unresumable():
    assert not resumable(request(temperature=0.0, frequency_penalty=0.5))
    assert not resumable(request(temperature=0.8, seed=1, presence_penalty=-1.0))
    assert resumable(request(temperature=0.0, repetition_penalty=1.2))  # it reads the prompt too: unchanged


def test_nothing_left_to_generate_is_no_continuation():
    assert continuation(request(temperature=0.0), list(range(10))) is None

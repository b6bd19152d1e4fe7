"""The client's typed requests and results: arguments to ``GenerateRequest``, replies to chunks and completions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from forethought.client import ChatMessage, Chunk, Completion, ServiceLevelObjective, generate_request
from forethought.domain import (
    FinishReason,
    InvalidField,
    PositionLogprobs,
    SamplingParams,
    ServiceClass,
    StructuredOutput,
    TokenLogprob,
    Usage,
)
from forethought.rpc import convert
from forethought.v1 import common_pb2, scheduler_pb2


def test_a_chat_request_carries_every_field():
    request = generate_request(
        model="m", max_tokens=9, chat=[ChatMessage("system", "Be brief."), ("user", "Hi")],
        sampling=SamplingParams(temperature=0.0, seed=7, stop=("END",)), service_class=ServiceClass.RT,
        slo=ServiceLevelObjective(ttft_s=0.5, tpot_s=0.05), deadline=datetime(2030, 1, 1, tzinfo=UTC),
        application_id="run-1", step="plan", request_id="r1")
    assert (request.request_id, request.model, request.max_tokens, request.return_text) == ("r1", "m", 9, True)
    assert [(m.role, m.content) for m in request.chat.messages] == [("system", "Be brief."), ("user", "Hi")]
    assert (request.sampling.temperature, request.sampling.seed, list(request.sampling.stop)) == (0.0, 7, ["END"])
    assert request.service_class == common_pb2.SERVICE_CLASS_REAL_TIME
    assert (request.slo.ttft_s, request.slo.tpot_s) == (0.5, 0.05)
    assert request.deadline.seconds == int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())
    assert (request.application_id, request.step) == ("run-1", "plan")


def test_a_prompt_is_text_or_token_ids_and_unset_fields_stay_unset():
    text = generate_request(model="m", max_tokens=1, prompt="Hello", deadline=1_900_000_000.5)
    assert text.WhichOneof("prompt") == "text" and text.text == "Hello"
    assert text.deadline.ToNanoseconds() == 1_900_000_000_500_000_000
    assert not text.HasField("sampling") and text.service_class == common_pb2.SERVICE_CLASS_UNSPECIFIED
    ids = generate_request(model="m", max_tokens=1, token_ids=[5, 6])
    assert list(ids.token_ids.ids) == [5, 6]


@pytest.mark.parametrize("sampling", [
    SamplingParams(),
    SamplingParams(temperature=0.0, top_p=0.9, top_k=5, seed=0, stop=("a", "b"), stop_token_ids=(2,), ignore_eos=True,
                   presence_penalty=-0.5, frequency_penalty=1.5, repetition_penalty=1.3, logprobs=0, prompt_logprobs=2,
                   structured_output=StructuredOutput(choice=("yes", "no"))),
    SamplingParams(structured_output=StructuredOutput(json_schema='{"type": "object"}')),
    SamplingParams(structured_output=StructuredOutput(json_object=True)),
    SamplingParams(structured_output=StructuredOutput(regex="[0-9]+")),
    SamplingParams(structured_output=StructuredOutput(grammar='root ::= "a"')),
], ids=["defaults", "every-field", "json-schema", "json-object", "regex", "grammar"])
def test_sampling_parameters_survive_the_wire(sampling):
    message = generate_request(model="m", max_tokens=1, prompt="x", sampling=sampling).sampling
    assert convert.sampling_from_proto(message) == sampling


def test_a_structured_output_of_several_kinds_is_refused_before_sending():
    with pytest.raises(InvalidField) as refused:  # the message's oneof would keep one kind and drop the rest
        generate_request(model="m", max_tokens=1, prompt="x",
                         sampling=SamplingParams(structured_output=StructuredOutput(regex="a", json_object=True)))
    assert refused.value.field == "sampling.structured_output"


def test_a_length_to_fit_is_the_callers_choice():
    assert not generate_request(model="m", max_tokens=9, prompt="x").fit_max_tokens
    assert generate_request(model="m", max_tokens=9, prompt="x", fit_max_tokens=True).fit_max_tokens


@pytest.mark.parametrize("prompts", [{}, {"prompt": "a", "token_ids": [1]}], ids=["none", "two"])
def test_exactly_one_prompt_form(prompts):
    with pytest.raises(InvalidField) as refused:
        generate_request(model="m", max_tokens=1, **prompts)
    assert refused.value.field == "prompt"


@pytest.mark.parametrize(("arguments", "field"), [
    ({"prompt": [1, 2]}, "prompt"),
    ({"token_ids": "1 2"}, "token_ids"),
    ({"token_ids": [1, "2"]}, "token_ids"),
    ({"token_ids": [1 << 40]}, "token_ids"),
    ({"chat": "hello"}, "chat"),
    ({"chat": [("user",)]}, "chat"),
    ({"chat": [("user", 5)]}, "chat"),
    ({"prompt": "hi", "max_tokens": "3"}, "max_tokens"),
], ids=["prompt-ids", "ids-text", "id-text", "id-past-int32", "chat-text", "chat-single", "chat-content", "max-tokens-text"])
def test_an_argument_of_the_wrong_type_is_refused_naming_it(arguments: dict, field: str):
    with pytest.raises(InvalidField) as refused:
        generate_request(model="m", **{"max_tokens": 4, **arguments})
    assert refused.value.field == field


def test_token_ids_and_a_chat_may_be_any_iterable_read_once():
    request = generate_request(model="m", max_tokens=4, token_ids=(token for token in (7, 8, 9)))
    assert list(request.token_ids.ids) == [7, 8, 9]
    chat = generate_request(model="m", max_tokens=4, chat=iter([("user", "hi")]))
    assert [(message.role, message.content) for message in chat.chat.messages] == [("user", "hi")]


def test_a_naive_datetime_deadline_is_refused():
    with pytest.raises(InvalidField) as refused:
        generate_request(model="m", max_tokens=1, prompt="a", deadline=datetime(2030, 1, 1))
    assert refused.value.field == "deadline"


@pytest.mark.parametrize("deadline", [1e308, float("inf"), float("nan"), -1.0, 253_402_300_800])
def test_a_deadline_no_timestamp_holds_is_refused_naming_the_field(deadline: float):
    with pytest.raises(InvalidField) as refused:
        generate_request(model="m", max_tokens=1, prompt="a", deadline=deadline)
    assert refused.value.field == "deadline" and "9999-12-31" in refused.value.rule


def test_the_last_second_a_timestamp_holds_is_a_deadline():
    request = generate_request(model="m", max_tokens=1, prompt="a", deadline=253_402_300_799)
    assert request.deadline.seconds == 253_402_300_799


def test_a_completion_gathers_its_chunks():
    replies = [
        scheduler_pb2.GenerateResponse(request_id="r", token_ids=[1, 2], text="Hel", worker_id="w0", predicted_output_tokens=40),
        scheduler_pb2.GenerateResponse(request_id="r", token_ids=[3], text="lo"),
        scheduler_pb2.GenerateResponse(request_id="r", finish_reason=common_pb2.FINISH_REASON_LENGTH, usage=common_pb2.Usage(
            prompt_tokens=10, cached_prompt_tokens=4, output_tokens=3, ttft_s=0.1, queue_s=0.02)),
    ]
    chunks = [Chunk.of(reply) for reply in replies]
    assert chunks[0].finish_reason is None and chunks[0].usage is None
    completion = Completion.of(chunks)
    assert completion == Completion(request_id="r", text="Hello", token_ids=(1, 2, 3), finish_reason=FinishReason.LENGTH,
                                    usage=Usage(10, 4, 3, 0.1), worker_id="w0", forecast=40.0, queue_s=0.02)


def test_a_completion_keeps_every_tokens_log_probabilities_in_order():
    def position(token_id: int, text: str, logprob: float) -> PositionLogprobs:
        return PositionLogprobs(TokenLogprob(token_id, logprob, text), (TokenLogprob(token_id, logprob, text), TokenLogprob(9, -3.0, "x")))

    first, second = (position(1, "Hel", -0.5),), (position(3, "lo", -0.25),)
    replies = [scheduler_pb2.GenerateResponse(request_id="r", token_ids=[1], text="Hel", logprobs=convert.logprobs_to_proto(first)),
               scheduler_pb2.GenerateResponse(request_id="r", token_ids=[3], text="lo", logprobs=convert.logprobs_to_proto(second),
                                              finish_reason=common_pb2.FINISH_REASON_LENGTH)]
    chunks = [Chunk.of(reply) for reply in replies]
    assert chunks[0].logprobs == first
    assert Completion.of(chunks).logprobs == first + second

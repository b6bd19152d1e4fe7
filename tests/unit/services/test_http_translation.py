"""The HTTP front door's pure parts: OpenAI bodies and headers to ``GenerateRequest``, gRPC statuses to
OpenAI errors, and answers to OpenAI's objects."""

from __future__ import annotations

import json

import grpc
import pytest
from forethought.domain import InvalidField
from forethought.services.http.openai_errors import http_error
from forethought.services.http.openai_requests import chat_request, completion_request, deadline_of, require_unicode_text
from forethought.services.http.openai_responses import Answer, Route, Said, answer_json, chunk_json, sse, usage_chunk_json
from forethought.v1 import common_pb2, scheduler_pb2

MODEL = "m"


def completion(body: dict, headers: dict[str, str] | None = None):
    return completion_request({"model": MODEL, **body}, headers or {}, "cmpl-1", 256)


def test_a_completion_maps_openai_fields_onto_the_request():
    parsed = completion({"prompt": "Hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3, "stop": "END",
                         "stream": True, "stream_options": {"include_usage": True}})
    request = parsed.generate
    assert (request.request_id, request.model, request.text, request.max_tokens, request.return_text) == ("cmpl-1", MODEL, "Hi", 7, True)
    assert (request.sampling.temperature, request.sampling.top_p, request.sampling.seed) == (0.5, 0.9, 3)
    assert list(request.sampling.stop) == ["END"]
    assert parsed.stream and parsed.include_usage
    assert request.service_class == common_pb2.SERVICE_CLASS_UNSPECIFIED


def test_unset_sampling_stays_unset_and_the_length_defaults():
    request = completion({"prompt": "Hi"}).generate
    assert not request.sampling.HasField("temperature") and not request.sampling.HasField("seed")
    assert request.max_tokens == 256 and request.fit_max_tokens  # the default: a ceiling the worker may lower
    assert not completion({"prompt": "Hi", "max_tokens": 256}).generate.fit_max_tokens  # a length sent is kept


def test_log_probabilities_are_asked_for_in_each_routes_own_terms():
    assert completion({"prompt": "Hi", "logprobs": 3}).generate.sampling.logprobs == 3
    assert completion({"prompt": "Hi", "logprobs": 0}).generate.sampling.HasField("logprobs")  # the chosen tokens' only
    assert not completion({"prompt": "Hi"}).generate.sampling.HasField("logprobs")

    def chat(extra: dict) -> common_pb2.SamplingParams:
        return chat_request({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], **extra}, {}, "c", 8).generate.sampling

    assert chat({"logprobs": True, "top_logprobs": 5}).logprobs == 5
    assert chat({"logprobs": True}).HasField("logprobs") and chat({"logprobs": True}).logprobs == 0
    assert not chat({"logprobs": False, "top_logprobs": 0}).HasField("logprobs")
    for extra, field in (({"top_logprobs": 2}, "top_logprobs"), ({"logprobs": 2}, "logprobs"),
                         ({"logprobs": True, "top_logprobs": 21}, "top_logprobs")):
        with pytest.raises(InvalidField) as refused:
            chat(extra)
        assert refused.value.field == field, extra
    for body, field in (({"logprobs": 21}, "logprobs"), ({"logprobs": True}, "logprobs"), ({"top_logprobs": 1}, "top_logprobs")):
        with pytest.raises(InvalidField) as refused:
            completion({"prompt": "Hi", **body})
        assert refused.value.field == field, body


@pytest.mark.parametrize(("prompt", "which", "expected"), [
    ("Hi", "text", "Hi"), (["Hi"], "text", "Hi"), ([1, 2, 3], "token_ids", [1, 2, 3]), ([[4, 5]], "token_ids", [4, 5]),
], ids=["text", "batch-of-one-text", "token-ids", "batch-of-one-token-ids"])
def test_a_prompt_is_text_or_token_ids(prompt, which, expected):
    request = completion({"prompt": prompt}).generate
    assert request.WhichOneof("prompt") == which
    assert (request.text if which == "text" else list(request.token_ids.ids)) == expected


def test_a_chat_maps_roles_and_text_parts_and_prefers_max_completion_tokens():
    request = chat_request({"model": MODEL, "max_tokens": 9, "max_completion_tokens": 5, "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
    ]}, {}, "chatcmpl-1", 256).generate
    assert [(m.role, m.content) for m in request.chat.messages] == [("system", "Be brief."), ("user", "Hello there")]
    assert request.max_tokens == 5


def test_forethought_fields_come_from_the_body_or_headers_and_the_body_wins():
    headers = {"x-forethought-service-class": "be", "x-forethought-application-id": "run-h", "x-forethought-step": "s",
               "x-forethought-execution": "3", "x-forethought-slo-ttft-s": "0.5", "x-forethought-slo-tpot-s": "0.05",
               "x-forethought-deadline": "1700000000"}
    from_headers = completion({"prompt": "Hi"}, headers).generate
    assert from_headers.service_class == common_pb2.SERVICE_CLASS_BEST_EFFORT
    assert (from_headers.application_id, from_headers.step, from_headers.execution) == ("run-h", "s", 3)
    assert completion({"prompt": "Hi", "execution": 0}, headers).generate.execution == 0
    assert not completion({"prompt": "Hi"}).generate.HasField("execution")
    assert (from_headers.slo.ttft_s, from_headers.slo.tpot_s) == (0.5, 0.05)
    assert from_headers.deadline.seconds == 1_700_000_000
    body = completion({"prompt": "Hi", "service_class": "rt", "application_id": "run-b", "slo": {"ttft_s": 2}}, headers).generate
    assert body.service_class == common_pb2.SERVICE_CLASS_REAL_TIME
    assert body.application_id == "run-b" and body.slo.ttft_s == 2 and body.slo.tpot_s == 0.05


@pytest.mark.parametrize(("value", "seconds"), [
    (1700000000, 1700000000), ("1700000000.5", 1700000000.5), ("2023-11-14T22:13:20Z", 1700000000),
    ("2023-11-14T23:13:20+01:00", 1700000000),
], ids=["unix-number", "unix-text", "rfc3339-utc", "rfc3339-offset"])
def test_a_deadline_is_unix_seconds_or_rfc3339(value, seconds):
    assert deadline_of(value).ToNanoseconds() / 1e9 == seconds


@pytest.mark.parametrize(("body", "field"), [
    ({"prompt": ""}, "prompt"), ({"prompt": ["a", "b"]}, "prompt"), ({"prompt": [1, "x"]}, "prompt"),
    ({"prompt": "Hi", "model": ""}, "model"), ({"prompt": "Hi", "max_tokens": "8"}, "max_tokens"),
    ({"prompt": "Hi", "max_tokens": 1 << 40}, "max_tokens"), ({"prompt": "Hi", "temperature": True}, "temperature"),
    ({"prompt": "Hi", "n": 17}, "n"), ({"prompt": "Hi", "stop": [1]}, "stop"), ({"prompt": "Hi", "echo": 1}, "echo"),
    ({"prompt": "Hi", "stream_options": {"include_usage": True}}, "stream_options"),
    ({"prompt": "Hi", "deadline": "2030-01-01T00:00:00"}, "deadline"), ({"prompt": "Hi", "slo": {"ttft_s": -1}}, "slo.ttft_s"),
    ({"prompt": "Hi", "service_class": "RT"}, "service_class"), ({"prompt": "Hi", "application_id": 7}, "application_id"),
    ({"prompt": [1, 1 << 40]}, "prompt"), ({"prompt": "Hi", "stop_token_ids": [-1]}, "stop_token_ids"),
    ({"prompt": "Hi", "top_k": -2}, "top_k"), ({"prompt": "Hi", "execution": -1}, "execution"),
    ({"prompt": "Hi", "execution": 1.5}, "execution"), ({"prompt": "Hi", "execution": "first"}, "execution"),
], ids=["empty-prompt", "two-prompts", "mixed-ids", "empty-model", "length-as-text", "length-too-large", "bool-temperature",
        "n", "stop-ids", "echo", "stream-options-without-stream", "deadline-without-offset", "negative-slo",
        "service-class-case", "application-id-type", "token-id-past-int32", "negative-stop-token", "top-k-below-off",
        "negative-execution", "fractional-execution", "execution-as-a-name"])
def test_a_broken_field_names_its_openai_parameter(body, field):
    with pytest.raises(InvalidField) as refused:
        completion(body)
    assert refused.value.field == field


@pytest.mark.parametrize(("body", "field"), [
    ('{"prompt": "ok \\ud800"}', "prompt"),
    ('{"messages": [{"content": "a"}, {"content": "b\\udfff"}]}', "messages[1].content"),
    ('{"stop": ["a", "\\ud83d"]}', "stop[1]"),
    ('{"\\ud800": 1}', "body (a key)"),
])
def test_a_lone_surrogate_is_refused_naming_its_string(body, field):
    with pytest.raises(InvalidField) as refused:
        require_unicode_text(json.loads(body))
    assert refused.value.field == field and "lone surrogate" in refused.value.rule


def test_a_surrogate_pair_is_unicode_text():
    require_unicode_text(json.loads('{"prompt": "\\ud83d\\ude00 and text", "stop": ["x"]}'))  # an emoji: no refusal


def test_vllms_top_k_off_is_this_contracts_zero():
    assert completion({"prompt": "Hi", "top_k": -1}).generate.sampling.top_k == 0
    assert completion({"prompt": "Hi", "top_k": 20}).generate.sampling.top_k == 20


def test_harmless_values_of_unsupported_features_are_accepted():
    request = completion({"prompt": "Hi", "n": 1, "logprobs": None, "echo": False, "best_of": 1}).generate
    assert request.text == "Hi"


def test_penalties_reach_the_sampling_parameters_and_unset_ones_stay_unset():
    sampling = completion({"prompt": "Hi", "presence_penalty": 0.5, "frequency_penalty": -1,
                           "repetition_penalty": 1.2}).generate.sampling
    assert (sampling.presence_penalty, sampling.frequency_penalty, sampling.repetition_penalty) == (0.5, -1.0, 1.2)
    assert not completion({"prompt": "Hi"}).generate.sampling.HasField("repetition_penalty")
    with pytest.raises(InvalidField) as refused:
        completion({"prompt": "Hi", "frequency_penalty": "high"})
    assert refused.value.field == "frequency_penalty"


def test_a_refused_penalty_or_logprobs_names_its_openai_parameter():
    for field in ("presence_penalty", "frequency_penalty", "repetition_penalty", "logprobs"):
        error = http_error(grpc.StatusCode.INVALID_ARGUMENT, f"sampling.{field}: out of range", f"sampling.{field}")
        assert error.body["error"]["param"] == field


@pytest.mark.parametrize(("code", "status", "kind"), [
    (grpc.StatusCode.INVALID_ARGUMENT, 400, "invalid_request_error"), (grpc.StatusCode.UNAUTHENTICATED, 401, "authentication_error"),
    (grpc.StatusCode.PERMISSION_DENIED, 403, "permission_error"), (grpc.StatusCode.NOT_FOUND, 404, "not_found_error"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, 429, "rate_limit_error"), (grpc.StatusCode.UNAVAILABLE, 503, "service_unavailable_error"),
    (grpc.StatusCode.DEADLINE_EXCEEDED, 504, "timeout_error"), (grpc.StatusCode.ALREADY_EXISTS, 500, "server_error"),
    (grpc.StatusCode.INTERNAL, 500, "server_error"),
], ids=lambda value: getattr(value, "name", str(value)))
def test_statuses_map_to_http_codes(code, status, kind):
    error = http_error(code, "why")
    assert (error.status, error.body) == (status, {"error": {"message": "why", "type": kind, "param": None, "code": code.name.lower()}})


def test_a_refused_scheduler_field_is_named_as_the_openai_parameter():
    assert http_error(grpc.StatusCode.INVALID_ARGUMENT, "x", "sampling.stop").body["error"]["param"] == "stop"
    assert http_error(grpc.StatusCode.INVALID_ARGUMENT, "x", "max_tokens").body["error"]["param"] == "max_tokens"


def test_a_refused_prompt_is_named_as_the_routes_prompt_parameter():
    for field in ("text", "token_ids.ids", "prompt_token_ids"):
        assert http_error(grpc.StatusCode.INVALID_ARGUMENT, "x", field).body["error"]["param"] == "prompt"
        assert http_error(grpc.StatusCode.INVALID_ARGUMENT, "x", field, prompt_param=Route.CHAT.prompt_param
                          ).body["error"]["param"] == "messages"
    assert http_error(grpc.StatusCode.INVALID_ARGUMENT, "x", "chat.messages").body["error"]["param"] == "messages"


def test_a_retry_delay_becomes_retry_after_rounded_up():
    full = http_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", retry_after_s=0.4)
    assert full.headers == {"Retry-After": "1", "retry-after-ms": "400"}
    assert http_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", retry_after_s=2.01).headers["Retry-After"] == "3"
    assert http_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "full").headers == {}


def answered() -> Answer:
    answer = Answer("chatcmpl-1", MODEL, 100)
    answer.add(scheduler_pb2.GenerateResponse(text="Hel", worker_id="w0", predicted_output_tokens=12.0))
    answer.add(scheduler_pb2.GenerateResponse(text="lo", finish_reason=common_pb2.FINISH_REASON_STOP, usage=common_pb2.Usage(
        prompt_tokens=10, cached_prompt_tokens=4, output_tokens=2, ttft_s=0.25, queue_s=0.01)))
    return answer


def test_a_whole_answer_is_openai_shaped_with_forethoughts_account():
    body = answer_json(Route.CHAT, [answered()])
    assert body["object"] == "chat.completion" and body["choices"] == [
        {"index": 0, "logprobs": None, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello"}}]
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
                             "prompt_tokens_details": {"cached_tokens": 4}}
    assert body["forethought"] == {"request_id": "chatcmpl-1", "worker_id": "w0", "predicted_output_tokens": 12.0,
                                   "ttft_s": 0.25, "queue_s": 0.01}
    assert answer_json(Route.COMPLETION, [answered()])["choices"][0]["text"] == "Hello"


def test_chunks_name_the_role_first_and_the_usage_comes_last():
    answer = answered()
    first = chunk_json(Route.CHAT, answer, scheduler_pb2.GenerateResponse(), Said("Hel", []), first=True, include_usage=True)
    later = chunk_json(Route.CHAT, answer, scheduler_pb2.GenerateResponse(), Said("lo", []), first=False, include_usage=False)
    assert first["object"] == "chat.completion.chunk" and first["usage"] is None
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "Hel"}
    assert later["choices"][0]["delta"] == {"content": "lo"} and "usage" not in later
    last = usage_chunk_json(Route.CHAT, [answer])
    assert last["choices"] == [] and last["usage"]["total_tokens"] == 12
    assert sse({"a": 1}) == b'data: {"a":1}\n\n' and json.loads(sse(last)[6:]) == last


def scored(*tokens: tuple[str, float]) -> list[common_pb2.PositionLogprobs]:
    """Positions whose chosen token is also the likeliest, with one less likely alternative."""
    return [common_pb2.PositionLogprobs(
        chosen=common_pb2.TokenLogprob(token_id=index, logprob=logprob, token=text),
        top=[common_pb2.TokenLogprob(token_id=index, logprob=logprob, token=text),
             common_pb2.TokenLogprob(token_id=99, logprob=float("-inf"), token="é")])
        for index, (text, logprob) in enumerate(tokens)]


def test_log_probabilities_take_each_routes_shape_and_only_when_asked():
    answer = Answer("c", MODEL, 100)
    answer.add(scheduler_pb2.GenerateResponse(text="Hel", logprobs=scored(("Hel", -0.5))))
    answer.add(scheduler_pb2.GenerateResponse(text="lo", logprobs=scored(("lo", -0.25))))
    assert answer_json(Route.CHAT, [answer])["choices"][0]["logprobs"] is None
    chat = answer_json(Route.CHAT, [answer], logprobs=True)["choices"][0]["logprobs"]["content"]
    assert [entry["token"] for entry in chat] == ["Hel", "lo"] and chat[1]["bytes"] == [108, 111]
    assert chat[0]["top_logprobs"][1] == {"token": "é", "logprob": -9999.0, "bytes": [195, 169]}  # JSON has no -inf
    legacy = answer_json(Route.COMPLETION, [answer], logprobs=True)["choices"][0]["logprobs"]
    assert legacy["tokens"] == ["Hel", "lo"] and legacy["token_logprobs"] == [-0.5, -0.25]
    assert legacy["text_offset"] == [0, 3] and legacy["top_logprobs"][0] == {"Hel": -0.5, "é": -9999.0}
    json.loads(sse(answer_json(Route.CHAT, [answer], logprobs=True))[6:])  # strict JSON


def test_a_streamed_chunk_carries_its_own_tokens_log_probabilities_and_where_they_start():
    answer = Answer("c", MODEL, 100)
    replies = [scheduler_pb2.GenerateResponse(text="Hel", logprobs=scored(("Hel", -0.5))),
               scheduler_pb2.GenerateResponse(text="lo!", logprobs=scored(("lo", -0.25), ("!", -1.0)))]
    chunks, said = [], []
    for index, reply in enumerate(replies):
        said.append(answer.add(reply))
        chunks.append(chunk_json(Route.COMPLETION, answer, reply, said[-1], index == 0, include_usage=False, logprobs=True))
    assert [chunk["choices"][0]["logprobs"]["text_offset"] for chunk in chunks] == [[0], [3, 5]]
    chat = chunk_json(Route.CHAT, answer, replies[1], said[1], first=False, include_usage=False, logprobs=True)
    assert [entry["token"] for entry in chat["choices"][0]["logprobs"]["content"]] == ["lo", "!"]


def first_token_unscored(text: str, token_id: int = 0) -> common_pb2.PositionLogprobs:
    return common_pb2.PositionLogprobs(chosen=common_pb2.TokenLogprob(token_id=token_id, token=text))


def test_an_echoing_completion_starts_with_its_prompt_in_text_and_scores():
    prompt = [first_token_unscored("The"), *scored((" sky", -3.0))]
    reply = scheduler_pb2.GenerateResponse(text=" is", logprobs=scored((" is", -0.5)), prompt_logprobs=prompt)
    answer = Answer("c", MODEL, 100, echo=True, prompt_text="The sky")
    said = answer.add(reply)
    assert said.text == "The sky is" and len(said.logprobs) == 3
    legacy = answer_json(Route.COMPLETION, [answer], logprobs=True)["choices"][0]
    assert legacy["text"] == "The sky is"
    assert legacy["logprobs"]["tokens"] == ["The", " sky", " is"]
    assert legacy["logprobs"]["token_logprobs"] == [None, -3.0, -0.5] and legacy["logprobs"]["top_logprobs"][0] is None
    assert legacy["logprobs"]["text_offset"] == [0, 3, 7]
    later = scheduler_pb2.GenerateResponse(text="!")
    assert answer.add(later).text == "!"  # the prompt comes once
    # A token-id prompt's text is its tokens'; without echo the prompt's scores are not shown.
    ids = Answer("c", MODEL, 100, echo=True)
    assert ids.add(reply).text == "The sky is"
    assert Answer("c", MODEL, 100).add(reply) == Said(" is", list(reply.logprobs))


def test_echo_asks_the_engine_for_the_prompts_scores_only_when_the_answer_needs_them():
    text_only = completion({"prompt": "Hi", "echo": True})
    assert text_only.echo and not text_only.generate.sampling.HasField("prompt_logprobs")  # echoed as sent
    assert completion({"prompt": "Hi", "echo": True, "logprobs": 2}).generate.sampling.prompt_logprobs == 2
    ids = completion({"prompt": [5, 6], "echo": True}).generate.sampling
    assert ids.HasField("prompt_logprobs") and not ids.HasField("logprobs")  # the tokens' texts, not their scores
    assert not completion({"prompt": "Hi"}).echo
    with pytest.raises(InvalidField) as refused:
        chat_request({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "echo": True}, {}, "c", 8)
    assert refused.value.field == "echo"


def test_each_choice_is_a_request_of_its_own_with_its_own_id_and_seed():
    one = completion({"prompt": "Hi", "seed": 7})
    assert one.n == 1 and one.choice_requests() == [one.generate]
    three = completion({"prompt": "Hi", "n": 3, "seed": 7})
    choices = three.choice_requests()
    assert [choice.request_id for choice in choices] == ["cmpl-1-0", "cmpl-1-1", "cmpl-1-2"]
    assert [choice.sampling.seed for choice in choices] == [7, 6, 5]  # distinct, each reproducible
    assert all(choice.text == "Hi" and choice.model == MODEL for choice in choices)
    edge = completion({"prompt": "Hi", "n": 2, "seed": (1 << 63) - 1}).choice_requests()
    assert edge[1].sampling.seed == (1 << 63) - 2  # no overflow past int64
    assert not any(choice.sampling.HasField("seed") for choice in completion({"prompt": "Hi", "n": 2}).choice_requests())


def test_several_choices_answer_with_their_indexes_and_the_usage_of_all():
    answers = []
    for index, (text, tokens) in enumerate((("Hel", 3), ("Yo", 2))):
        answer = Answer("cmpl-1", MODEL, 100, index=index, call_id=f"cmpl-1-{index}")
        answer.add(scheduler_pb2.GenerateResponse(text=text, worker_id=f"w{index}", finish_reason=common_pb2.FINISH_REASON_LENGTH,
                                                  usage=common_pb2.Usage(prompt_tokens=10, cached_prompt_tokens=4,
                                                                         output_tokens=tokens)))
        answers.append(answer)
    body = answer_json(Route.COMPLETION, answers)
    assert [(choice["index"], choice["text"]) for choice in body["choices"]] == [(0, "Hel"), (1, "Yo")]
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                             "prompt_tokens_details": {"cached_tokens": 4}}
    assert body["id"] == "cmpl-1" and body["forethought"]["request_id"] == "cmpl-1-0"
    assert [each["worker_id"] for each in body["forethought"]["choices"]] == ["w0", "w1"]
    chunk = chunk_json(Route.CHAT, answers[1], scheduler_pb2.GenerateResponse(), Said("Yo", []), first=True, include_usage=False)
    assert chunk["choices"][0]["index"] == 1 and chunk["id"] == "cmpl-1"
    assert "choices" not in answer_json(Route.COMPLETION, answers[:1])["forethought"]


def test_a_response_format_or_vllms_structured_outputs_constrain_the_answer():
    def form(extra: dict) -> common_pb2.StructuredOutput:
        return completion({"prompt": "Hi", **extra}).generate.sampling.structured_output

    assert form({"response_format": {"type": "json_object"}}).json_object
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    assert json.loads(form({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}})
                      .json_schema) == schema
    assert form({"structured_outputs": {"choice": ["yes", "no"]}}).choice.options == ["yes", "no"]
    assert form({"structured_outputs": {"regex": "[0-9]+"}}).regex == "[0-9]+"
    assert json.loads(form({"structured_outputs": {"json": schema}}).json_schema) == schema
    assert not completion({"prompt": "Hi", "response_format": {"type": "text"}}).generate.sampling.HasField("structured_output")
    for extra, field in (({"response_format": {"type": "xml"}}, "response_format.type"),
                         ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
                         ({"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}}, "structured_outputs"),
                         ({"structured_outputs": {"choice": "yes"}}, "structured_outputs.choice"),
                         ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "sampling.structured_output"),
                         ({"structured_outputs": {}}, "sampling.structured_output")):
        with pytest.raises(InvalidField) as refused:
            completion({"prompt": "Hi", **extra})
        assert refused.value.field == field, extra
    error = http_error(grpc.StatusCode.INVALID_ARGUMENT, "x", "sampling.structured_output.json_schema")
    assert error.body["error"]["param"] == "response_format"

"""The HTTP front door over a live sim mesh, driven by the official ``openai`` client and by curl.

The sim engine makes token ids, not language; the scheduler detokenizes them, so answers are text of the
right length, and every field, header, stream and error is the front door's own behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import sys
import threading
import time
import urllib.request

import openai
import pytest
from forethought.cluster.ports import free_port
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.live_mesh import (
    MODEL,
    SIM_CONTEXT_TOKENS,
    Mesh,
    http_json,
    list_workers,
    wait_http,
    wait_until,
)


def client(sim_mesh: Mesh, **options: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim_mesh.base_url, api_key="unused", max_retries=0, **options)


def test_a_chat_completion_answers_text_with_usage_and_where_it_ran(sim_mesh: Mesh):
    reply = client(sim_mesh).chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
        max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    assert reply.model == MODEL
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"
    assert reply.usage.completion_tokens == 6
    assert reply.usage.prompt_tokens > 5  # the chat template wraps both messages
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 6
    extra = reply.model_extra["forethought"]
    assert extra["request_id"] == reply.id and extra["worker_id"] in {"w0", "w1"}


def test_a_completion_takes_text_or_token_ids(sim_mesh: Mesh):
    api = client(sim_mesh)
    text = api.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=4,
                                  extra_body={"ignore_eos": True})
    assert text.object == "text_completion" and text.id.startswith("cmpl-")
    assert text.choices[0].text and text.usage.completion_tokens == 4
    ids = api.completions.create(model=MODEL, prompt=list(range(100, 140)), max_tokens=3, extra_body={"ignore_eos": True})
    assert ids.usage.prompt_tokens == 40 and ids.usage.completion_tokens == 3
    echoed = api.completions.create(model=MODEL, prompt="Echo me:", max_tokens=2, echo=True, extra_body={"ignore_eos": True})
    assert echoed.choices[0].text.startswith("Echo me:") and len(echoed.choices[0].text) > len("Echo me:")


def test_a_request_without_a_length_gets_the_context_its_prompt_leaves(sim_mesh: Mesh):
    # The sim worker serves SIM_CONTEXT_TOKENS of prompt plus output; the default length (256) does not fit here.
    api = client(sim_mesh)
    prompt = [5] * (SIM_CONTEXT_TOKENS - 168)
    fitted = api.completions.create(model=MODEL, prompt=prompt, extra_body={"ignore_eos": True})
    assert (fitted.usage.prompt_tokens, fitted.usage.completion_tokens) == (len(prompt), 168)
    assert fitted.choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError) as refused:  # a length the caller chose is not changed
        api.completions.create(model=MODEL, prompt=prompt, max_tokens=256, extra_body={"ignore_eos": True})
    assert refused.value.body["param"] == "max_tokens" and "must be at most 168" in refused.value.body["message"]


async def test_the_async_client_streams_chunks_and_a_last_usage_chunk(sim_mesh: Mesh):
    api = openai.AsyncOpenAI(base_url=sim_mesh.base_url, api_key="unused", max_retries=0)
    stream = await api.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Count to ten"}], max_tokens=8, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = [chunk async for chunk in stream]
    await api.close()
    choices = [chunk for chunk in chunks if chunk.choices]
    assert choices[0].choices[0].delta.role == "assistant"
    assert choices[-1].choices[0].finish_reason == "length"
    assert all(chunk.usage is None for chunk in choices)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8
    assert "".join(chunk.choices[0].delta.content or "" for chunk in choices)
    assert len({chunk.id for chunk in chunks}) == 1


def test_n_choices_come_back_whole_or_streamed_with_their_indexes(sim_mesh: Mesh):
    api = client(sim_mesh)
    whole = api.completions.create(model=MODEL, prompt="Pick a number:", max_tokens=4, n=3, seed=11,
                                   extra_body={"ignore_eos": True})
    assert [choice.index for choice in whole.choices] == [0, 1, 2] and all(choice.text for choice in whole.choices)
    assert whole.usage.completion_tokens == 12  # every choice's tokens; the prompt once
    accounts = whole.model_extra["forethought"]["choices"]
    assert [account["request_id"] for account in accounts] == [f"{whole.id}-{index}" for index in range(3)]
    stream = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=5, n=2,
                                         stream=True, stream_options={"include_usage": True},
                                         extra_body={"ignore_eos": True})
    chunks = list(stream)
    by_choice: dict[int, list] = {0: [], 1: []}
    for chunk in chunks:
        for choice in chunk.choices:
            by_choice[choice.index].append(choice)
    assert all(choices[0].delta.role == "assistant" and choices[-1].finish_reason == "length"
               for choices in by_choice.values())
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10


def test_several_async_calls_at_once_each_get_their_own_answer(sim_mesh: Mesh):
    async def many() -> list[int]:
        api = openai.AsyncOpenAI(base_url=sim_mesh.base_url, api_key="unused", max_retries=0)
        replies = await asyncio.gather(*(api.completions.create(model=MODEL, prompt=f"Item {n}:", max_tokens=n,
                                                                extra_body={"ignore_eos": True}) for n in range(1, 6)))
        await api.close()
        return [reply.usage.completion_tokens for reply in replies]

    assert asyncio.run(many()) == [1, 2, 3, 4, 5]


def test_forethought_fields_travel_in_the_body_and_as_headers(sim_mesh: Mesh):
    api = client(sim_mesh)
    in_body = api.completions.create(model=MODEL, prompt="Hi", max_tokens=2, extra_body={
        "service_class": "rt", "slo": {"ttft_s": 5, "tpot_s": 1}, "deadline": "2030-01-01T00:00:00Z", "ignore_eos": True})
    assert in_body.usage.completion_tokens == 2
    in_headers = api.completions.create(model=MODEL, prompt="Hi", max_tokens=2, extra_body={"ignore_eos": True}, extra_headers={
        "X-Forethought-Service-Class": "rt", "X-Forethought-Slo-Ttft-S": "5", "X-Forethought-Deadline": str(time.time() + 60)})
    assert in_headers.usage.completion_tokens == 2
    # A real-time request needs an objective: the scheduler's rule, answered as OpenAI's error.
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/completions", {"model": MODEL, "prompt": "Hi", "max_tokens": 2},
                                {"X-Forethought-Service-Class": "rt"})
    assert status == 400 and body["error"]["param"] == "slo", body
    # The scheduler looks the application run up: its refusal shows the id arrived, from the body or a header,
    # and a body field wins over its header.
    for extra_body, headers in (({"application_id": "run-b", "step": "plan"}, {"X-Forethought-Application-Id": "run-h"}),
                                ({}, {"X-Forethought-Application-Id": "run-h", "X-Forethought-Step": "plan"})):
        status, _, body = http_json("POST", f"{sim_mesh.base_url}/completions",
                                    {"model": MODEL, "prompt": "Hi", "max_tokens": 2, **extra_body}, headers)
        expected = extra_body.get("application_id", "run-h")
        assert status == 404 and f"'{expected}'" in body["error"]["message"], body


@pytest.mark.parametrize(("body", "param", "message"), [
    ({"model": MODEL, "prompt": "Hi", "max_tokens": 0}, "max_tokens", "must be in 1..65536"),
    ({"model": MODEL, "prompt": "Hi", "temperature": -1}, "temperature", "must be >= 0"),
    ({"model": MODEL, "prompt": "Hi", "temperature": 2.5}, "temperature", "must be at most 2"),
    ({"model": MODEL, "prompt": "Hi", "stop": ["END", ""]}, "stop", "must not hold an empty string"),
    ({"model": MODEL, "prompt": "Hi", "stop": ["\n"]}, "stop", "stop strings"),
    ({"model": MODEL, "prompt": "Hi", "n": 17}, "n", "must be in 1..16"),
    ({"model": MODEL, "prompt": 5}, "prompt", "must be a non-empty string"),
    ({"prompt": "Hi"}, "model", "must be a non-empty string"),
    ({"model": MODEL, "prompt": "Hi", "service_class": "gold"}, "service_class", "must be rt or be"),
    ({"model": MODEL, "prompt": "Hi", "deadline": "tomorrow"}, "deadline", "RFC 3339"),
    ({"model": MODEL, "prompt": "Hi", "deadline": 1e308}, "deadline", "9999-12-31"),
    ({"model": MODEL, "prompt": "Hi", "step": "s1"}, "step", "needs application_id"),
    ({"model": MODEL, "prompt": "Hi", "suffix": "!"}, "suffix", "not supported"),
    ({"model": MODEL, "prompt": "Hi", "presence_penalty": 2.5}, "presence_penalty", "must be in [-2, 2]"),
    ({"model": MODEL, "prompt": "Hi", "logprobs": 2}, "logprobs", "computes no token probabilities"),
    ({"model": MODEL, "prompt": [1, 2, 3], "echo": True}, "echo", "computes no token probabilities"),
    ({"model": MODEL, "prompt": "Hi", "response_format": {"type": "json_object"}}, "response_format", "runs no model"),
], ids=["scheduler-range", "scheduler-sampling", "temperature-above-two", "empty-stop-string", "engine-stop", "n",
        "prompt-type", "model-missing", "service-class", "deadline",
        "deadline-past-9999", "step-without-application", "unsupported", "penalty-range", "engine-logprobs",
        "engine-echo-of-token-ids", "engine-structured-output"])
def test_a_bad_field_answers_400_naming_the_openai_parameter(sim_mesh: Mesh, body: dict, param: str, message: str):
    with pytest.raises(openai.BadRequestError) as refused:
        client(sim_mesh).post("/completions", body=body, cast_to=object)  # extra fields too, as sent
    error = refused.value.body
    assert refused.value.status_code == 400
    assert error["param"] == param and message in error["message"] and error["type"] == "invalid_request_error", error


def test_the_front_doors_own_refusals_share_the_error_shape(sim_mesh: Mesh):
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/chat/completions", b"{not json")
    assert status == 400 and body["error"]["code"] == "invalid_argument" and "not JSON" in body["error"]["message"]
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/chat/completions", ["a list"])
    assert status == 400 and body["error"]["param"] == "body"
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/chat/completions",
                                {"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]})
    assert status == 400 and body["error"]["param"] == "messages[0].role"
    # JSON's escapes can spell half a UTF-16 pair, which no protobuf string takes (this was a 500)
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/chat/completions",
                                {"model": MODEL, "messages": [{"role": "user", "content": "hi \ud800"}]})
    assert status == 400 and body["error"]["param"] == "messages[0].content"
    assert body["error"]["message"] == ("messages[0].content: must be Unicode text: it holds a lone surrogate (\\ud800) "
                                        "at character 3")
    status, _, body = http_json("GET", f"{sim_mesh.base_url}/nowhere")
    assert status == 404 and body["error"]["type"] == "not_found_error"


def test_a_prompt_too_long_for_the_engine_is_named_as_each_routes_prompt_parameter(sim_mesh: Mesh):
    text = "hi " * (SIM_CONTEXT_TOKENS + 2_000)  # a token a word: past the sim engine's context
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/completions", {"model": MODEL, "prompt": text, "max_tokens": 4})
    assert status == 400 and body["error"]["param"] == "prompt", body
    status, _, body = http_json("POST", f"{sim_mesh.base_url}/chat/completions",
                                {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 4})
    assert status == 400 and body["error"]["param"] == "messages", body  # OpenAI's parameter, not the completion's


def test_an_unknown_model_is_404(sim_mesh: Mesh):
    with pytest.raises(openai.NotFoundError) as missing:
        client(sim_mesh).chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert missing.value.body["code"] == "not_found" and "no-such-model" in missing.value.body["message"]


def test_models_lists_what_the_workers_serve_and_health_and_ready_answer(sim_mesh: Mesh):
    models = client(sim_mesh).models.list()
    assert [model.id for model in models.data] == [MODEL]
    assert http_json("GET", f"{sim_mesh.http}/health")[0] == 200
    status, _, body = http_json("GET", f"{sim_mesh.http}/ready")
    assert status == 200 and body["scheduler"] == sim_mesh.scheduler


def test_curl_streams_server_sent_events_ending_in_done(sim_mesh: Mesh):
    body = json.dumps({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 5, "stream": True,
                       "stream_options": {"include_usage": True}, "ignore_eos": True})
    curl = subprocess.run(["curl", "-sS", "-N", "-D", "-", f"{sim_mesh.base_url}/completions", "-H", "Content-Type: application/json",
                           "-d", body], capture_output=True, text=True, timeout=60)
    assert curl.returncode == 0, curl.stderr
    head, _, events = curl.stdout.partition("\n\n")  # text mode reads curl's CRLF as LF
    assert head.startswith("HTTP/1.1 200") and "text/event-stream" in head and "x-forethought-request-id: cmpl-" in head
    lines = [line for line in events.split("\n\n") if line]
    assert lines and all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]", curl.stdout
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


def scheduler_metric(sim_mesh: Mesh, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{sim_mesh.scheduler_metrics_port}/metrics", timeout=5).read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


def running_on_workers(sim_mesh: Mesh) -> int:
    return sum(worker.load.real_time.running + worker.load.best_effort.running
               + worker.load.real_time.waiting + worker.load.best_effort.waiting for worker in list_workers(sim_mesh.scheduler))


def test_closing_the_stream_cancels_the_request_on_its_worker(sim_mesh: Mesh):
    cancelled = {"service": "SchedulerService", "method": "Generate", "code": "CANCELLED"}
    before = scheduler_metric(sim_mesh, "forethought_rpc_requests_total", **cancelled)
    stream = client(sim_mesh).completions.create(model=MODEL, prompt="Tell a very long story", max_tokens=8_000, stream=True,
                                             extra_body={"ignore_eos": True})
    try:
        # Sim tokens are arbitrary ids: a chunk may end inside a UTF-8 character and carry no text of its own.
        texts = [next(stream).choices[0].text for _ in range(3)]
        assert "".join(texts)
        wait_until(lambda: running_on_workers(sim_mesh) == 1, "the request shows in its worker's load")
    finally:
        stream.close()  # also when an assertion failed: the next test of this mesh starts with idle workers
    wait_until(lambda: scheduler_metric(sim_mesh, "forethought_rpc_requests_total", **cancelled) == before + 1,
               "the scheduler's Generate call ends CANCELLED")
    wait_until(lambda: running_on_workers(sim_mesh) == 0, "the worker let the request go")


def test_a_client_that_gives_up_on_a_whole_answer_cancels_it_too(sim_mesh: Mesh):
    cancelled = {"service": "SchedulerService", "method": "Generate", "code": "CANCELLED"}
    before = scheduler_metric(sim_mesh, "forethought_rpc_requests_total", **cancelled)
    with pytest.raises(openai.APITimeoutError):  # no stream: nothing is sent until the answer is whole
        client(sim_mesh, timeout=2.0).completions.create(model=MODEL, prompt="Tell a very long story", max_tokens=8_000,
                                                         n=2, extra_body={"ignore_eos": True})
    wait_until(lambda: scheduler_metric(sim_mesh, "forethought_rpc_requests_total", **cancelled) == before + 2,
               "both choices' Generate calls end CANCELLED")
    wait_until(lambda: running_on_workers(sim_mesh) == 0, "the worker let the request go")


def test_a_full_queue_answers_429_with_the_schedulers_retry_hint(start_service, tmp_path):
    start_service("worker", "--engine", "sim", "--sim-speedup", "0.001", "--worker-id", "slow", "--heartbeat-s", "0.5",
                  "--heartbeat-ttl-s", "2")  # its first prefill takes minutes: what it holds stays held
    front = start_service("scheduler", "--registry-poll-s", "0.1", "--heartbeat-ttl-s", "2", "--max-queue", "1",
                          "--max-waiting-per-worker", "1")
    port = free_port()
    with (tmp_path / "http.log").open("wb") as log:
        http = subprocess.Popen([sys.executable, "-m", "forethought.cli", "serve", "http", "--port", str(port),
                                 "--scheduler-address", front.address], stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_http(f"http://127.0.0.1:{port}/ready", http), (tmp_path / "http.log").read_text()
        wait_until(lambda: len(list_workers(front.address)) == 1, "the worker registered")
        time.sleep(0.3)  # the scheduler's next registry read adopts it
        api = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        for number in range(2):  # one on the worker, one waiting in the queue; neither answers while the test runs
            threading.Thread(target=_swallow, args=(api, number), daemon=True).start()
            time.sleep(1.0)
        with pytest.raises(openai.RateLimitError) as full:
            api.completions.create(model=MODEL, prompt=[7] * 64, max_tokens=4)
    finally:
        http.terminate()
        http.wait(30)
    assert full.value.status_code == 429 and full.value.body["code"] == "resource_exhausted"
    retry_after_ms = int(full.value.response.headers["retry-after-ms"])
    assert retry_after_ms > 0 and int(full.value.response.headers["retry-after"]) == max(1, math.ceil(retry_after_ms / 1000))


def _swallow(api: openai.OpenAI, number: int) -> None:
    with contextlib.suppress(openai.APIError):
        api.completions.create(model=MODEL, prompt=list(range(64 * number, 64 * number + 64)), max_tokens=4)

"""The OpenAI-compatible routes fuzzed with generated bodies against a live sim mesh: JSON of every shape,
the right fields with wrong types and out-of-range values, Forethought's extra fields, and bytes that are
not JSON. Every answer is a 2xx or a 4xx/503 carrying OpenAI's error object; never a 500, never a hang."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MODEL = "SmolLM2-135M-Instruct"
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
ANY = st.one_of(JSON, st.sampled_from([-1, 0, 2**31, 1e308, "", "x" * 3000, [], {}]))


def bodies(route: str) -> st.SearchStrategy[dict[str, object]]:
    """Valid requests (streamed or not, with Forethought's fields), the same with one field made anything,
    and bodies of random fields."""
    prompt = {"prompt": st.text(min_size=1, max_size=200)} if route == "completions" else {
        "messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                                    "content": st.text(max_size=100)}), min_size=1, max_size=3)}
    valid = st.fixed_dictionaries({"model": st.just(MODEL), "max_tokens": st.integers(1, 8), **prompt}, optional={
        "temperature": st.floats(0, 2), "top_p": st.floats(0.01, 1), "seed": st.integers(0, 2**31 - 1),
        "stream": st.booleans(), "stream_options": st.just({"include_usage": True}), "service_class": st.just("be"),
        "stop": st.lists(st.text(min_size=1, max_size=5), max_size=2),
        "presence_penalty": st.floats(-2, 2), "frequency_penalty": st.floats(-2, 2),
        "repetition_penalty": st.floats(0.01, 2),
    })
    fields = ["model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "seed", "stream",
              "stream_options", "service_class", "slo", "deadline", "application_id", "step", "presence_penalty",
              "frequency_penalty", "repetition_penalty", "logprobs", "top_logprobs", "echo", "response_format",
              "structured_outputs", *prompt]
    one_bad = st.tuples(valid, st.sampled_from(fields), ANY).map(lambda drawn: {**drawn[0], drawn[1]: drawn[2]})
    random_fields = st.dictionaries(st.sampled_from(fields), ANY, max_size=6)
    return st.one_of(valid, one_bad, random_fields)


def post(url: str, payload: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=payload, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def fuzz_route(route: str, check) -> None:
    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(bodies(route))
    def generated(body: dict[str, object]) -> None:
        if "max_tokens" not in body and "max_completion_tokens" not in body:
            body["max_tokens"] = 4  # an absent limit means "the model's": keep the fuzzing short
        check(route, json.dumps(body).encode())

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=80), st.just(b"{"), st.just(b'{"prompt": "\xff\xfe"}'), st.just(b"[]")))
    def raw(payload: bytes) -> None:
        check(route, payload)

    generated()
    raw()


def test_every_route_answers_generated_bodies_with_a_status_and_an_error_object(sim_mesh):
    codes: Counter[int] = Counter()

    def check(route: str, payload: bytes) -> None:
        status, body = post(f"{sim_mesh.base_url}/{route}", payload)
        codes[status] += 1
        assert status < 500 or status == 503, f"{route}: {status} {body[:300]!r} for {payload[:300]!r}"
        if status >= 400:
            error = json.loads(body)["error"]
            assert isinstance(error["message"], str) and error["message"] and "type" in error, body[:300]

    for route in ("completions", "chat/completions"):
        fuzz_route(route, check)
    print(f"fuzzed {sum(codes.values())} HTTP calls: {dict(codes)}")
    assert sum(codes.values()) >= 380 and codes[200] > 0 and codes[400] > 0
    with urllib.request.urlopen(f"{sim_mesh.http}/health", timeout=5) as reply:
        assert reply.status == 200

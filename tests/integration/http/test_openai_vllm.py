"""The OpenAI client against a mesh whose worker runs the real vLLM CPU engine with SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from forethought.cluster.redis_server import RedisProcess

from tests.integration.live_mesh import MODEL, start_mesh, stop_mesh


@pytest.mark.slow
def test_the_openai_client_streams_real_text_through_the_mesh(redis_server: RedisProcess, tmp_path: Path):
    mesh = start_mesh(redis_server.url, tmp_path, workers=1, worker_args=("--engine", "vllm"))
    try:
        api = openai.OpenAI(base_url=mesh.base_url, api_key="unused", max_retries=0)
        stream = api.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "What is the capital of France?"}], max_tokens=24,
            temperature=0, stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        # What only the model's engine can judge is refused as a bad request naming the parameter, never
        # as a worker failure: an id past SmolLM2's 49,152 and a temperature past OpenAI's 2.
        refusals = {}
        for param, extra in (("stop_token_ids", {"extra_body": {"stop_token_ids": [10**8]}}),
                             ("temperature", {"temperature": 3.0})):
            with pytest.raises(openai.BadRequestError) as refused:
                api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4, **extra)
            refusals[param] = refused.value.body
        again = api.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=4, temperature=0)
        scored = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Name a colour."}],
                                             max_tokens=6, temperature=0, logprobs=True, top_logprobs=2)
        # How evaluation harnesses score a text: the prompt echoed with its tokens' log probabilities.
        schema = {"type": "object", "properties": {"capital": {"type": "string", "maxLength": 12}}, "required": ["capital"]}
        structured = api.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "What is the capital of France? Answer in JSON."}],
            max_tokens=40, temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "capital", "schema": schema}})
        likelihood = api.completions.create(model=MODEL, prompt="The capital of France is Paris", max_tokens=1,
                                            temperature=0, logprobs=1, echo=True)
    finally:
        stop_mesh(mesh)
    assert {param: body["param"] for param, body in refusals.items()} == {"stop_token_ids": "stop_token_ids",
                                                                        "temperature": "temperature"}
    assert "0..49151" in refusals["stop_token_ids"]["message"], refusals
    assert again.usage.completion_tokens == 4  # the worker serves on after refusing
    content = scored.choices[0].logprobs.content
    assert len(content) == scored.usage.completion_tokens
    assert "".join(entry.token for entry in content) == scored.choices[0].message.content
    assert all(len(entry.top_logprobs) == 2 and entry.top_logprobs[0].token == entry.token for entry in content)
    assert isinstance(json.loads(structured.choices[0].message.content)["capital"], str)
    echoed = likelihood.choices[0]
    assert echoed.text.startswith("The capital of France is Paris")
    assert len(echoed.logprobs.tokens) == likelihood.usage.prompt_tokens + 1
    assert echoed.logprobs.token_logprobs[0] is None and echoed.logprobs.top_logprobs[0] is None
    assert all(value <= 0 for value in echoed.logprobs.token_logprobs[1:])
    assert echoed.logprobs.text_offset[-1] == len("The capital of France is Paris")
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert "Paris" in text, text
    assert 0 < chunks[-1].usage.completion_tokens <= 24
    assert chunks[-1].usage.prompt_tokens > 10 and chunks[-1].choices == []

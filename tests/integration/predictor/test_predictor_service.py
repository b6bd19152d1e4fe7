"""The predictor service as a real process over a real proxy model (quick-trained, or the shipped one)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile

import grpc
import pytest
from forethought.v1 import predictor_pb2, predictor_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

PROMPTS = ["Write a haiku about autumn.", "Explain, step by step, how a compiler turns source code into machine code."]


@pytest.fixture
def stub(start_service, quick_artifact, tmp_path):
    service = start_service("predictor", "--model-dir", str(quick_artifact),
                            "--observations-path", str(tmp_path / "observations.jsonl"), timeout_s=120)
    with grpc.insecure_channel(service.address) as channel:
        yield predictor_pb2_grpc.PredictorServiceStub(channel)


def test_predict_answers_a_distribution_per_prompt(stub):
    reply = stub.Predict(predictor_pb2.PredictRequest(prompts=PROMPTS), timeout=60)
    assert len(reply.forecasts) == 2
    for forecast in reply.forecasts:
        tokens = [quantile.tokens for quantile in forecast.quantiles]
        assert [quantile.percent for quantile in forecast.quantiles] == sorted(q.percent for q in forecast.quantiles)
        assert tokens == sorted(tokens) and forecast.mean > 0
        assert abs(sum(forecast.histogram) - 1.0) < 1e-6
        assert 0 <= forecast.bucket < len(forecast.histogram)
        assert forecast.source == predictor_pb2.PREDICTION_SOURCE_MODEL
    assert reply.model_version


def test_a_history_of_long_answers_changes_the_forecast(stub):
    """The same prompt after a conversation of short answers and after one of long answers."""
    histories = [predictor_pb2.ConversationHistory(earlier_answer_chars=chars) for chars in ([], [40, 30], [3000, 2500])]
    reply = stub.Predict(predictor_pb2.PredictRequest(prompts=[PROMPTS[0]] * 3, histories=histories), timeout=60)
    means = [forecast.mean for forecast in reply.forecasts]
    assert len(set(means)) == 3


def test_an_observed_prompt_is_answered_from_the_length_cache(stub):
    assert stub.Observe(predictor_pb2.ObserveRequest(prompt=PROMPTS[0], output_tokens=42), timeout=30).stored == 1
    forecast = stub.Predict(predictor_pb2.PredictRequest(prompts=[PROMPTS[0]]), timeout=60).forecasts[0]
    assert forecast.source == predictor_pb2.PREDICTION_SOURCE_LENGTH_CACHE
    assert forecast.mean == 42


def test_reload_swaps_the_model_and_bad_input_names_the_field(stub, quick_artifact):
    assert stub.Reload(predictor_pb2.ReloadRequest(model_dir=str(quick_artifact)), timeout=120).model_version
    cases = [
        (lambda: stub.Predict(predictor_pb2.PredictRequest(prompts=[]), timeout=10), "prompts:"),
        (lambda: stub.Predict(predictor_pb2.PredictRequest(prompts=["ok", "  "]), timeout=10), "prompts[1]:"),
        (lambda: stub.Observe(predictor_pb2.ObserveRequest(prompt="x", output_tokens=-1), timeout=10), "output_tokens:"),
        (lambda: stub.Predict(predictor_pb2.PredictRequest(
            prompts=["a", "b"], histories=[predictor_pb2.ConversationHistory()]), timeout=10), "histories:"),
        (lambda: stub.Predict(predictor_pb2.PredictRequest(
            prompts=["a"], histories=[predictor_pb2.ConversationHistory(earlier_answer_chars=[3, -2])]), timeout=10),
         "histories[0].earlier_answer_chars:"),
        (lambda: stub.Reload(predictor_pb2.ReloadRequest(model_dir="/nowhere"), timeout=10), "model_dir:"),
    ]
    for call, field in cases:
        with pytest.raises(grpc.RpcError) as raised:
            call()
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.details().startswith(field)
    with pytest.raises(grpc.RpcError) as raised:
        stub.Reload(predictor_pb2.ReloadRequest(refit_head=True), timeout=30)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # too few observations to refit


def test_reloading_a_predictor_whose_weights_do_not_load_names_the_field_and_the_old_one_serves_on(stub, quick_artifact, tmp_path):
    cut = tmp_path / "cut"
    shutil.copytree(quick_artifact, cut)
    (cut / "head.safetensors").write_bytes(b"not safetensors")
    before = stub.Predict(predictor_pb2.PredictRequest(prompts=PROMPTS), timeout=60)
    with pytest.raises(grpc.RpcError) as raised:
        stub.Reload(predictor_pb2.ReloadRequest(model_dir=str(cut)), timeout=120)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith(f"model_dir: must hold a predictor that loads (the predictor in {cut} does not load")
    after = stub.Predict(predictor_pb2.PredictRequest(prompts=PROMPTS), timeout=60)
    assert after.model_version == before.model_version
    assert [forecast.mean for forecast in after.forecasts] == [forecast.mean for forecast in before.forecasts]


def test_with_no_model_dir_the_service_starts_with_the_shipped_predictor(start_service, tmp_path):
    """A fresh install: nothing in the cache, so the service loads the head the package ships."""
    service = start_service("predictor", env={"FORETHOUGHT_CACHE": str(tmp_path / "empty-cache")}, timeout_s=120)
    short, long = "What is 2+2?", "Write a long, detailed essay on the history of the Roman empire, with ten sections."
    histories = [predictor_pb2.ConversationHistory(earlier_answer_chars=chars) for chars in ([30], [2800, 3400])]
    with grpc.insecure_channel(service.address) as channel:
        reply = predictor_pb2_grpc.PredictorServiceStub(channel).Predict(
            predictor_pb2.PredictRequest(prompts=[short, long], histories=histories), timeout=60)
    short_forecast, long_forecast = reply.forecasts
    assert long_forecast.mean > short_forecast.mean and long_forecast.bucket > short_forecast.bucket
    assert reply.model_version == "1"
    assert "forecasting with the shipped predictor (MiniLM fine-tuned on CASTILLO, int8; no trained predictor in" in service.log()


def test_the_wheel_carries_the_shipped_predictor(tmp_path, repo):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(repo)], check=True)
    with zipfile.ZipFile(next(tmp_path.glob("forethought-*.whl"))) as wheel:
        shipped = sorted(name for name in wheel.namelist() if name.startswith("forethought/predict/shipped_head/"))
    assert [name.rsplit("/", 1)[1] for name in shipped] == [
        "backbone.safetensors", "calibration.json", "config.json", "head.safetensors", "words.safetensors"]


def test_forecasts_are_for_the_requests_model_and_an_unseen_model_learns_from_observe(start_service, tmp_path):
    """The shipped model-aware predictor: known models answer in their own tokens; an unseen one is
    calibrated by its Observe calls, and the calibration survives a restart (it lives in the observations)."""
    settings = ("--observations-path", str(tmp_path / "observations.jsonl"))
    env = {"FORETHOUGHT_CACHE": str(tmp_path / "empty-cache")}
    prompt = "Write a Python function that parses an ISO 8601 date string, with tests."
    service = start_service("predictor", *settings, env=env, timeout_s=120)
    with grpc.insecure_channel(service.address) as channel:
        stub = predictor_pb2_grpc.PredictorServiceStub(channel)

        def forecast(model):
            return stub.Predict(predictor_pb2.PredictRequest(prompts=[prompt], model=model), timeout=60).forecasts[0]

        gemma, llama = forecast("google--gemma-3-4b-it"), forecast("meta-llama--Llama-3.3-70B-Instruct")
        assert gemma.mean != llama.mean and list(gemma.bucket_edges) != list(llama.bucket_edges)
        before = forecast("newcomer").mean
        for index in range(30):
            stub.Observe(predictor_pb2.ObserveRequest(prompt=f"Summarize chapter {index} of the report.", output_tokens=3000,
                                                      model="newcomer"), timeout=30)
        after = forecast("newcomer").mean
        assert after > 2 * before
        assert forecast("").mean == forecast("SmolLM2-135M-Instruct").mean  # the default model, not the newcomer
    service.terminate()
    restarted = start_service("predictor", *settings, env=env, timeout_s=120)
    with grpc.insecure_channel(restarted.address) as channel:
        reply = predictor_pb2_grpc.PredictorServiceStub(channel).Predict(
            predictor_pb2.PredictRequest(prompts=[prompt], model="newcomer"), timeout=60)
    assert abs(reply.forecasts[0].mean - after) < 1e-3 * after


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the exposition, keyed by (name, labels)."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_the_forecast_latency_is_scraped_per_batch_and_per_prompt(start_service, quick_artifact):
    service = start_service("predictor", "--model-dir", str(quick_artifact), "--metrics-port", "0", timeout_s=120)
    found = re.search(r"metrics on (http://\S+/metrics)", service.log())
    assert found, f"the predictor logged no metrics address:\n{service.log()}"
    with grpc.insecure_channel(service.address) as channel:
        stub = predictor_pb2_grpc.PredictorServiceStub(channel)
        stub.Predict(predictor_pb2.PredictRequest(prompts=PROMPTS), timeout=60)
        stub.Predict(predictor_pb2.PredictRequest(prompts=[PROMPTS[0]]), timeout=60)
        with pytest.raises(grpc.RpcError):  # refused before it reaches the model: no forecast to time
            stub.Predict(predictor_pb2.PredictRequest(prompts=[" "]), timeout=60)
    samples = scrape(found.group(1))

    def histogram(scope: str, part: str) -> float:
        return samples[(f"forethought_predictor_forecast_seconds_{part}", frozenset({("scope", scope)}))]

    assert histogram("prompt", "count") == 3
    assert 1 <= histogram("batch", "count") <= 3  # the two prompts of one call may share a forward
    assert samples[("forethought_predictor_batch_prompts_sum", frozenset())] == 3
    assert 0 < histogram("batch", "sum") <= histogram("prompt", "sum")  # a prompt's time holds its batch's forward

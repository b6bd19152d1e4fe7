"""The scheduler's forecast client: a refused prompt is that request's miss; a predictor that fails is down.

The predictor here is a stand-in gRPC servicer: the real one no longer refuses any prompt the scheduler sends."""

from __future__ import annotations

import grpc
import pytest
from forethought.rpc.errors import InvalidArgument
from forethought.services.scheduler.forecasts import NO_FORECAST, ForecastClient, ForecastPrompt
from forethought.v1 import predictor_pb2, predictor_pb2_grpc


class RefusingPredictor(predictor_pb2_grpc.PredictorServiceServicer):
    """Refuses prompts that start with "bad", fails on "down", forecasts 42 tokens for the rest."""

    async def Predict(self, request, context):
        prompt = request.prompts[0]
        if prompt.startswith("bad"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(InvalidArgument("prompts[0]", "is refused")))
        if prompt.startswith("down"):
            await context.abort(grpc.StatusCode.INTERNAL, "the forward failed")
        return predictor_pb2.PredictResponse(forecasts=[predictor_pb2.LengthDistribution(mean=42.0)])


@pytest.fixture
async def client():
    server = grpc.aio.server()
    predictor_pb2_grpc.add_PredictorServiceServicer_to_server(RefusingPredictor(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    forecasts = ForecastClient(f"127.0.0.1:{port}", timeout_s=5, probe_interval_s=60)
    yield forecasts
    await forecasts.close()
    await server.stop(0)


async def test_a_refused_prompt_goes_without_a_forecast_and_the_next_request_gets_one(client):
    assert await client.forecast(ForecastPrompt("bad prompt"), "m") is NO_FORECAST
    assert not client.health.degraded
    assert (await client.forecast(ForecastPrompt("fine prompt"), "m")).mean_tokens == 42.0


async def test_a_failing_predictor_is_down_until_it_answers_again(client):
    assert await client.forecast(ForecastPrompt("down for a moment"), "m") is NO_FORECAST
    assert client.health.degraded
    assert (await client.forecast(ForecastPrompt("fine prompt"), "m")).mean_tokens == 42.0
    assert not client.health.degraded

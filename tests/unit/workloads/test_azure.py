import pytest
from forethought.domain import ServiceClass
from forethought.workloads.azure import (
    azure_arrivals,
    azure_trace_path,
    load_azure_trace,
)
from forethought.workloads.workload import RequestClass


def test_first_rows_of_the_conv_trace() -> None:
    requests = load_azure_trace(azure_trace_path("conv"), limit=3, request_class=RequestClass(ttft_slo_s=0.4))
    assert [r.request_id for r in requests] == [
        "AzureLLMInferenceTrace_conv-0", "AzureLLMInferenceTrace_conv-1", "AzureLLMInferenceTrace_conv-2"]
    assert [r.prompt_tokens for r in requests] == [374, 396, 879]
    assert [r.output_tokens for r in requests] == [44, 109, 55]
    # 18:15:46.6805900 is the first arrival; the next are 4.314579 s and 4.541877 s later.
    assert [r.arrival_s for r in requests] == pytest.approx([0.0, 4.314579, 4.541877], abs=1e-9)
    assert all(r.service_class is ServiceClass.RT and r.ttft_slo_s == 0.4 for r in requests)
    assert len(requests[2].prompt_token_ids()) == 879


def test_whole_code_trace_loads_in_arrival_order() -> None:
    requests = load_azure_trace(azure_trace_path("code"))
    assert len(requests) == 8819
    assert (requests[0].prompt_tokens, requests[0].output_tokens) == (4808, 10)
    assert (requests[-1].prompt_tokens, requests[-1].output_tokens) == (549, 173)
    assert all(a.arrival_s <= b.arrival_s for a, b in zip(requests, requests[1:]))


def test_unknown_trace_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        azure_trace_path("chat")


def test_data_dir_argument_overrides_the_default(tmp_path) -> None:
    assert azure_trace_path("conv", tmp_path) == (
        tmp_path / "azure-llm-inference-2023" / "AzureLLMInferenceTrace_conv.csv")


def test_arrivals_keep_the_trace_shape_at_the_mean_rate_asked() -> None:
    recorded = [r.arrival_s for r in load_azure_trace(azure_trace_path("code"), limit=500)]
    arrivals = azure_arrivals("code", 500, rate_per_s=20.0)
    assert arrivals[0] == 0.0
    assert 500 / arrivals[-1] == pytest.approx(20.0)
    scale = arrivals[-1] / recorded[-1]
    assert arrivals == pytest.approx([t * scale for t in recorded])  # every gap scaled alike: bursts stay bursts


def test_arrivals_refuse_more_requests_than_the_trace_holds(tmp_path) -> None:
    folder = tmp_path / "azure-llm-inference-2023"
    folder.mkdir()
    (folder / "AzureLLMInferenceTrace_code.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n")
    with pytest.raises(ValueError, match="holds 1 requests, fewer than the 2 asked"):
        azure_arrivals("code", 2, 1.0, tmp_path)

"""Conversions between the contract's messages and the library's dataclasses, in one place."""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import timestamp_pb2

from forethought.domain import (
    ClassLoad,
    EngineStats,
    FinishReason,
    GenerationRequest,
    InvalidField,
    PositionLogprobs,
    SamplingParams,
    ServiceClass,
    StructuredOutput,
    TokenLogprob,
    Usage,
    validate_structured_output,
)
from forethought.v1 import common_pb2, worker_pb2

_FINISH_TO_PROTO = {
    FinishReason.LENGTH: common_pb2.FINISH_REASON_LENGTH,
    FinishReason.STOP: common_pb2.FINISH_REASON_STOP,
    FinishReason.ABORT: common_pb2.FINISH_REASON_ABORT,
    FinishReason.ERROR: common_pb2.FINISH_REASON_ERROR,
}
_FINISH_FROM_PROTO = {value: key for key, value in _FINISH_TO_PROTO.items()}


LATEST_TIMESTAMP_S = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second a protobuf ``Timestamp`` holds."""


def timestamp_of(seconds: float, field: str) -> timestamp_pb2.Timestamp:
    """Unix seconds as a timestamp.

    Raises:
        InvalidField: ``seconds`` is not a number within 1970-01-01..9999-12-31.
    """
    if not 0 <= seconds <= LATEST_TIMESTAMP_S:  # NaN fails too
        raise InvalidField(field, f"must be unix seconds from 0 to {LATEST_TIMESTAMP_S} (9999-12-31), got {seconds}")
    whole = int(seconds)  # seconds and nanos apart: a float's nanoseconds past 2**53 lose the last digits
    nanos = min(999_999_999, round((seconds - whole) * 1e9))
    return timestamp_pb2.Timestamp(seconds=whole, nanos=nanos)


def seconds_of(stamp: timestamp_pb2.Timestamp, field: str) -> float:
    """A timestamp as unix seconds.

    Raises:
        InvalidField: it is outside 0001-01-01..9999-12-31 or its nanos outside 0..999,999,999.
    """
    try:
        return stamp.ToNanoseconds() / 1e9
    except ValueError as error:
        raise InvalidField(field, f"must be a valid timestamp: {error}") from None


def service_class_from_proto(value: int) -> ServiceClass:
    return ServiceClass.RT if value == common_pb2.SERVICE_CLASS_REAL_TIME else ServiceClass.BE


def service_class_to_proto(value: ServiceClass) -> int:
    return common_pb2.SERVICE_CLASS_REAL_TIME if value == ServiceClass.RT else common_pb2.SERVICE_CLASS_BEST_EFFORT


def sampling_from_proto(message: common_pb2.SamplingParams) -> SamplingParams:
    """Sampling parameters as sent (``validate_sampling`` checks them); unset temperature, top_p and repetition
    penalty mean 1.0."""
    return SamplingParams(
        temperature=message.temperature if message.HasField("temperature") else 1.0,
        top_p=message.top_p if message.HasField("top_p") else 1.0,
        top_k=message.top_k,
        seed=message.seed if message.HasField("seed") else None,
        stop=tuple(message.stop),
        stop_token_ids=tuple(message.stop_token_ids),
        ignore_eos=message.ignore_eos,
        presence_penalty=message.presence_penalty,
        frequency_penalty=message.frequency_penalty,
        repetition_penalty=message.repetition_penalty if message.HasField("repetition_penalty") else 1.0,
        logprobs=message.logprobs if message.HasField("logprobs") else None,
        prompt_logprobs=message.prompt_logprobs if message.HasField("prompt_logprobs") else None,
        structured_output=structured_output_from_proto(message.structured_output) if message.HasField("structured_output") else None,
    )


def structured_output_from_proto(message: common_pb2.StructuredOutput) -> StructuredOutput:
    return StructuredOutput(json_schema=message.json_schema, json_object=message.json_object, regex=message.regex,
                            choice=tuple(message.choice.options), grammar=message.grammar)


def structured_output_to_proto(form: StructuredOutput) -> common_pb2.StructuredOutput:
    """The form's one kind; InvalidField for a form that breaks its rules, which the message's oneof would
    otherwise hide (it keeps one kind of several)."""
    validate_structured_output(form, "sampling.structured_output")
    message = common_pb2.StructuredOutput()
    if form.json_schema:
        message.json_schema = form.json_schema
    if form.json_object:
        message.json_object = True
    if form.regex:
        message.regex = form.regex
    if form.choice:
        message.choice.options.extend(form.choice)
    if form.grammar:
        message.grammar = form.grammar
    return message


def generation_from_proto(message: worker_pb2.WorkerServiceGenerateRequest) -> GenerationRequest:
    """The engine request a worker call carries, as sent (``validate_generation`` checks it)."""
    return GenerationRequest(
        request_id=message.request_id,
        prompt_token_ids=tuple(message.prompt_token_ids),
        max_tokens=message.max_tokens,
        service_class=service_class_from_proto(message.service_class),
        priority=message.priority,
        ttft_slo_s=message.slo.ttft_s,
        tpot_slo_s=message.slo.tpot_s,
        sampling=sampling_from_proto(message.sampling),
        lora_name=message.lora_adapter,
        fit_max_tokens=message.fit_max_tokens,
    )


def generation_to_proto(request: GenerationRequest) -> worker_pb2.WorkerServiceGenerateRequest:
    """The worker call for an engine request; the worker serves it on its primary model."""
    return worker_pb2.WorkerServiceGenerateRequest(
        request_id=request.request_id, prompt_token_ids=request.prompt_token_ids, max_tokens=request.max_tokens,
        sampling=sampling_to_proto(request.sampling), service_class=service_class_to_proto(request.service_class),
        slo=common_pb2.ServiceLevelObjective(ttft_s=request.ttft_slo_s, tpot_s=request.tpot_slo_s),
        priority=request.priority, lora_adapter=request.lora_name, fit_max_tokens=request.fit_max_tokens,
    )


def sampling_to_proto(params: SamplingParams) -> common_pb2.SamplingParams:
    message = common_pb2.SamplingParams(
        temperature=params.temperature, top_p=params.top_p, top_k=params.top_k,
        stop=list(params.stop), stop_token_ids=list(params.stop_token_ids), ignore_eos=params.ignore_eos,
        presence_penalty=params.presence_penalty, frequency_penalty=params.frequency_penalty,
    )
    if params.seed is not None:
        message.seed = params.seed
    if params.repetition_penalty != 1.0:
        message.repetition_penalty = params.repetition_penalty
    if params.logprobs is not None:
        message.logprobs = params.logprobs
    if params.prompt_logprobs is not None:
        message.prompt_logprobs = params.prompt_logprobs
    if params.structured_output is not None:
        message.structured_output.CopyFrom(structured_output_to_proto(params.structured_output))
    return message


def logprobs_to_proto(positions: tuple[PositionLogprobs, ...]) -> list[common_pb2.PositionLogprobs]:
    return [common_pb2.PositionLogprobs(chosen=_token_logprob_to_proto(position.chosen),
                                        top=[_token_logprob_to_proto(each) for each in position.top])
            for position in positions]


def logprobs_from_proto(messages: Iterable[common_pb2.PositionLogprobs]) -> tuple[PositionLogprobs, ...]:
    return tuple(PositionLogprobs(_token_logprob_from_proto(message.chosen),
                                  tuple(_token_logprob_from_proto(each) for each in message.top))
                 for message in messages)


def _token_logprob_to_proto(value: TokenLogprob) -> common_pb2.TokenLogprob:
    return common_pb2.TokenLogprob(token_id=value.token_id, logprob=value.logprob, token=value.token)


def _token_logprob_from_proto(message: common_pb2.TokenLogprob) -> TokenLogprob:
    return TokenLogprob(message.token_id, message.logprob if message.HasField("logprob") else None, message.token)


def usage_to_proto(usage: Usage, queue_s: float = 0.0) -> common_pb2.Usage:
    return common_pb2.Usage(
        prompt_tokens=usage.prompt_tokens, cached_prompt_tokens=usage.cached_prompt_tokens,
        output_tokens=usage.output_tokens, ttft_s=usage.ttft_s, queue_s=queue_s,
    )


def usage_from_proto(message: common_pb2.Usage) -> Usage:
    return Usage(message.prompt_tokens, message.cached_prompt_tokens, message.output_tokens, message.ttft_s)


def finish_to_proto(reason: FinishReason | None) -> int:
    return _FINISH_TO_PROTO[reason] if reason is not None else common_pb2.FINISH_REASON_UNSPECIFIED


def finish_from_proto(value: int) -> FinishReason | None:
    return _FINISH_FROM_PROTO.get(value)


def load_to_proto(stats: EngineStats) -> common_pb2.WorkerLoad:
    return common_pb2.WorkerLoad(
        real_time=common_pb2.ClassLoad(running=stats.rt.running, waiting=stats.rt.waiting),
        best_effort=common_pb2.ClassLoad(running=stats.be.running, waiting=stats.be.waiting),
        kv_cache_usage=stats.kv_cache_usage, prefill_tokens_per_s=stats.prefill_tokens_per_s,
        decode_tokens_per_s=stats.decode_tokens_per_s, mean_queueing_delay_s=stats.mean_queueing_delay_s,
        prefix_hit_ratio=stats.prefix_hit_ratio, total_kv_blocks=stats.total_kv_blocks, block_size=stats.block_size,
    )


def load_from_proto(message: common_pb2.WorkerLoad) -> EngineStats:
    return EngineStats(
        rt=ClassLoad(message.real_time.running, message.real_time.waiting),
        be=ClassLoad(message.best_effort.running, message.best_effort.waiting),
        kv_cache_usage=message.kv_cache_usage, prefill_tokens_per_s=message.prefill_tokens_per_s,
        decode_tokens_per_s=message.decode_tokens_per_s, mean_queueing_delay_s=message.mean_queueing_delay_s,
        prefix_hit_ratio=message.prefix_hit_ratio, total_kv_blocks=message.total_kv_blocks, block_size=message.block_size,
    )

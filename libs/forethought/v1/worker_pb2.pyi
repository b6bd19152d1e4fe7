from forethought.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PrewarmKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREWARM_KIND_UNSPECIFIED: _ClassVar[PrewarmKind]
    PREWARM_KIND_KV_PREFIX: _ClassVar[PrewarmKind]
    PREWARM_KIND_LORA: _ClassVar[PrewarmKind]
    PREWARM_KIND_MODEL: _ClassVar[PrewarmKind]
    PREWARM_KIND_TOOL: _ClassVar[PrewarmKind]

class PrewarmStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREWARM_STATUS_UNSPECIFIED: _ClassVar[PrewarmStatus]
    PREWARM_STATUS_READY: _ClassVar[PrewarmStatus]
    PREWARM_STATUS_UNSUPPORTED: _ClassVar[PrewarmStatus]
    PREWARM_STATUS_FAILED: _ClassVar[PrewarmStatus]
PREWARM_KIND_UNSPECIFIED: PrewarmKind
PREWARM_KIND_KV_PREFIX: PrewarmKind
PREWARM_KIND_LORA: PrewarmKind
PREWARM_KIND_MODEL: PrewarmKind
PREWARM_KIND_TOOL: PrewarmKind
PREWARM_STATUS_UNSPECIFIED: PrewarmStatus
PREWARM_STATUS_READY: PrewarmStatus
PREWARM_STATUS_UNSUPPORTED: PrewarmStatus
PREWARM_STATUS_FAILED: PrewarmStatus

class WorkerServiceGenerateRequest(_message.Message):
    __slots__ = ("request_id", "prompt_token_ids", "max_tokens", "sampling", "service_class", "slo", "priority", "lora_adapter", "model", "fit_max_tokens")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    LORA_ADAPTER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    FIT_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    max_tokens: int
    sampling: _common_pb2.SamplingParams
    service_class: _common_pb2.ServiceClass
    slo: _common_pb2.ServiceLevelObjective
    priority: int
    lora_adapter: str
    model: str
    fit_max_tokens: bool
    def __init__(self, request_id: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., max_tokens: _Optional[int] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., service_class: _Optional[_Union[_common_pb2.ServiceClass, str]] = ..., slo: _Optional[_Union[_common_pb2.ServiceLevelObjective, _Mapping]] = ..., priority: _Optional[int] = ..., lora_adapter: _Optional[str] = ..., model: _Optional[str] = ..., fit_max_tokens: _Optional[bool] = ...) -> None: ...

class WorkerServiceGenerateResponse(_message.Message):
    __slots__ = ("request_id", "token_ids", "text", "finish_reason", "usage", "logprobs", "prompt_logprobs")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    text: str
    finish_reason: _common_pb2.FinishReason
    usage: _common_pb2.Usage
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.PositionLogprobs]
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.PositionLogprobs]
    def __init__(self, request_id: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., text: _Optional[str] = ..., finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.PositionLogprobs, _Mapping]]] = ..., prompt_logprobs: _Optional[_Iterable[_Union[_common_pb2.PositionLogprobs, _Mapping]]] = ...) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    def __init__(self, request_id: _Optional[str] = ...) -> None: ...

class AbortResponse(_message.Message):
    __slots__ = ("aborted",)
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    aborted: bool
    def __init__(self, aborted: _Optional[bool] = ...) -> None: ...

class PrewarmRequest(_message.Message):
    __slots__ = ("kind", "prefix_token_ids", "target", "model", "lora_path")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PREFIX_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LORA_PATH_FIELD_NUMBER: _ClassVar[int]
    kind: PrewarmKind
    prefix_token_ids: _containers.RepeatedScalarFieldContainer[int]
    target: str
    model: str
    lora_path: str
    def __init__(self, kind: _Optional[_Union[PrewarmKind, str]] = ..., prefix_token_ids: _Optional[_Iterable[int]] = ..., target: _Optional[str] = ..., model: _Optional[str] = ..., lora_path: _Optional[str] = ...) -> None: ...

class PrewarmResponse(_message.Message):
    __slots__ = ("status", "warmup_s", "detail")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_S_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    status: PrewarmStatus
    warmup_s: float
    detail: str
    def __init__(self, status: _Optional[_Union[PrewarmStatus, str]] = ..., warmup_s: _Optional[float] = ..., detail: _Optional[str] = ...) -> None: ...

class LoadModelRequest(_message.Message):
    __slots__ = ("model", "tensor_parallel_size")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    model: str
    tensor_parallel_size: int
    def __init__(self, model: _Optional[str] = ..., tensor_parallel_size: _Optional[int] = ...) -> None: ...

class LoadModelResponse(_message.Message):
    __slots__ = ("load_s", "tensor_parallel_size")
    LOAD_S_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    load_s: float
    tensor_parallel_size: int
    def __init__(self, load_s: _Optional[float] = ..., tensor_parallel_size: _Optional[int] = ...) -> None: ...

class UnloadModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class UnloadModelResponse(_message.Message):
    __slots__ = ("unloaded",)
    UNLOADED_FIELD_NUMBER: _ClassVar[int]
    unloaded: bool
    def __init__(self, unloaded: _Optional[bool] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("interval_s",)
    INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    interval_s: float
    def __init__(self, interval_s: _Optional[float] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("worker_id", "model", "load", "prewarm_hits", "prewarm_wasted", "prewarm_wasted_s")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    PREWARM_HITS_FIELD_NUMBER: _ClassVar[int]
    PREWARM_WASTED_FIELD_NUMBER: _ClassVar[int]
    PREWARM_WASTED_S_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    model: str
    load: _common_pb2.WorkerLoad
    prewarm_hits: int
    prewarm_wasted: int
    prewarm_wasted_s: float
    def __init__(self, worker_id: _Optional[str] = ..., model: _Optional[str] = ..., load: _Optional[_Union[_common_pb2.WorkerLoad, _Mapping]] = ..., prewarm_hits: _Optional[int] = ..., prewarm_wasted: _Optional[int] = ..., prewarm_wasted_s: _Optional[float] = ...) -> None: ...

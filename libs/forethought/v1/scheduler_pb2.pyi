import datetime

from forethought.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StepState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_STATE_UNSPECIFIED: _ClassVar[StepState]
    STEP_STATE_QUEUED: _ClassVar[StepState]
    STEP_STATE_RUNNING: _ClassVar[StepState]
    STEP_STATE_DONE: _ClassVar[StepState]
    STEP_STATE_FAILED: _ClassVar[StepState]

class WorkerHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKER_HEALTH_UNSPECIFIED: _ClassVar[WorkerHealth]
    WORKER_HEALTH_SERVING: _ClassVar[WorkerHealth]
    WORKER_HEALTH_DRAINING: _ClassVar[WorkerHealth]
    WORKER_HEALTH_UNHEALTHY: _ClassVar[WorkerHealth]
STEP_STATE_UNSPECIFIED: StepState
STEP_STATE_QUEUED: StepState
STEP_STATE_RUNNING: StepState
STEP_STATE_DONE: StepState
STEP_STATE_FAILED: StepState
WORKER_HEALTH_UNSPECIFIED: WorkerHealth
WORKER_HEALTH_SERVING: WorkerHealth
WORKER_HEALTH_DRAINING: WorkerHealth
WORKER_HEALTH_UNHEALTHY: WorkerHealth

class GenerateRequest(_message.Message):
    __slots__ = ("request_id", "model", "text", "token_ids", "chat", "max_tokens", "sampling", "service_class", "slo", "application_id", "step", "deadline", "return_text", "lora_adapter", "execution", "fit_max_tokens")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    RETURN_TEXT_FIELD_NUMBER: _ClassVar[int]
    LORA_ADAPTER_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    FIT_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model: str
    text: str
    token_ids: _common_pb2.TokenIds
    chat: ChatMessages
    max_tokens: int
    sampling: _common_pb2.SamplingParams
    service_class: _common_pb2.ServiceClass
    slo: _common_pb2.ServiceLevelObjective
    application_id: str
    step: str
    deadline: _timestamp_pb2.Timestamp
    return_text: bool
    lora_adapter: str
    execution: int
    fit_max_tokens: bool
    def __init__(self, request_id: _Optional[str] = ..., model: _Optional[str] = ..., text: _Optional[str] = ..., token_ids: _Optional[_Union[_common_pb2.TokenIds, _Mapping]] = ..., chat: _Optional[_Union[ChatMessages, _Mapping]] = ..., max_tokens: _Optional[int] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., service_class: _Optional[_Union[_common_pb2.ServiceClass, str]] = ..., slo: _Optional[_Union[_common_pb2.ServiceLevelObjective, _Mapping]] = ..., application_id: _Optional[str] = ..., step: _Optional[str] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., return_text: _Optional[bool] = ..., lora_adapter: _Optional[str] = ..., execution: _Optional[int] = ..., fit_max_tokens: _Optional[bool] = ...) -> None: ...

class ChatMessages(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("request_id", "token_ids", "text", "finish_reason", "usage", "worker_id", "predicted_output_tokens", "logprobs", "prompt_logprobs")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    text: str
    finish_reason: _common_pb2.FinishReason
    usage: _common_pb2.Usage
    worker_id: str
    predicted_output_tokens: float
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.PositionLogprobs]
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.PositionLogprobs]
    def __init__(self, request_id: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., text: _Optional[str] = ..., finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., worker_id: _Optional[str] = ..., predicted_output_tokens: _Optional[float] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.PositionLogprobs, _Mapping]]] = ..., prompt_logprobs: _Optional[_Iterable[_Union[_common_pb2.PositionLogprobs, _Mapping]]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    def __init__(self, request_id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class SubmitApplicationRequest(_message.Message):
    __slots__ = ("application", "run_id", "deadline", "service_class")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    deadline: _timestamp_pb2.Timestamp
    service_class: _common_pb2.ServiceClass
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., service_class: _Optional[_Union[_common_pb2.ServiceClass, str]] = ...) -> None: ...

class SubmitApplicationResponse(_message.Message):
    __slots__ = ("run_id", "estimated_completion_s", "gittins_rank")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_COMPLETION_S_FIELD_NUMBER: _ClassVar[int]
    GITTINS_RANK_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    estimated_completion_s: float
    gittins_rank: float
    def __init__(self, run_id: _Optional[str] = ..., estimated_completion_s: _Optional[float] = ..., gittins_rank: _Optional[float] = ...) -> None: ...

class ReportStepRequest(_message.Message):
    __slots__ = ("run_id", "step", "duration_s")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    step: str
    duration_s: float
    def __init__(self, run_id: _Optional[str] = ..., step: _Optional[str] = ..., duration_s: _Optional[float] = ...) -> None: ...

class ReportStepResponse(_message.Message):
    __slots__ = ("remaining_s", "gittins_rank")
    REMAINING_S_FIELD_NUMBER: _ClassVar[int]
    GITTINS_RANK_FIELD_NUMBER: _ClassVar[int]
    remaining_s: float
    gittins_rank: float
    def __init__(self, remaining_s: _Optional[float] = ..., gittins_rank: _Optional[float] = ...) -> None: ...

class FinishApplicationRequest(_message.Message):
    __slots__ = ("run_id", "failed")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    failed: bool
    def __init__(self, run_id: _Optional[str] = ..., failed: _Optional[bool] = ...) -> None: ...

class FinishApplicationResponse(_message.Message):
    __slots__ = ("act_s", "steps", "learnt")
    ACT_S_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    LEARNT_FIELD_NUMBER: _ClassVar[int]
    act_s: float
    steps: int
    learnt: bool
    def __init__(self, act_s: _Optional[float] = ..., steps: _Optional[int] = ..., learnt: _Optional[bool] = ...) -> None: ...

class WatchApplicationRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class WatchApplicationResponse(_message.Message):
    __slots__ = ("run_id", "step", "state", "remaining_s", "gittins_rank", "execution", "finished", "act_s", "at_s")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REMAINING_S_FIELD_NUMBER: _ClassVar[int]
    GITTINS_RANK_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    ACT_S_FIELD_NUMBER: _ClassVar[int]
    AT_S_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    step: str
    state: StepState
    remaining_s: float
    gittins_rank: float
    execution: int
    finished: bool
    act_s: float
    at_s: float
    def __init__(self, run_id: _Optional[str] = ..., step: _Optional[str] = ..., state: _Optional[_Union[StepState, str]] = ..., remaining_s: _Optional[float] = ..., gittins_rank: _Optional[float] = ..., execution: _Optional[int] = ..., finished: _Optional[bool] = ..., act_s: _Optional[float] = ..., at_s: _Optional[float] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "address", "model", "engine", "capacity", "health", "load", "heartbeat_age_s")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AGE_S_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    address: str
    model: str
    engine: str
    capacity: int
    health: WorkerHealth
    load: _common_pb2.WorkerLoad
    heartbeat_age_s: float
    def __init__(self, worker_id: _Optional[str] = ..., address: _Optional[str] = ..., model: _Optional[str] = ..., engine: _Optional[str] = ..., capacity: _Optional[int] = ..., health: _Optional[_Union[WorkerHealth, str]] = ..., load: _Optional[_Union[_common_pb2.WorkerLoad, _Mapping]] = ..., heartbeat_age_s: _Optional[float] = ...) -> None: ...

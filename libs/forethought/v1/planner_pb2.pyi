from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_PLANNED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_DONE: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_PLANNED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_DONE: JobState
JOB_STATE_FAILED: JobState

class JobStage(_message.Message):
    __slots__ = ("name", "model", "prompts", "max_tokens", "after")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    name: str
    model: str
    prompts: _containers.RepeatedScalarFieldContainer[str]
    max_tokens: int
    after: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., model: _Optional[str] = ..., prompts: _Optional[_Iterable[str]] = ..., max_tokens: _Optional[int] = ..., after: _Optional[_Iterable[str]] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("job_id", "stages", "gpus", "samples")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    stages: _containers.RepeatedCompositeFieldContainer[JobStage]
    gpus: int
    samples: int
    def __init__(self, job_id: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[JobStage, _Mapping]]] = ..., gpus: _Optional[int] = ..., samples: _Optional[int] = ...) -> None: ...

class ExecutionStage(_message.Message):
    __slots__ = ("placements", "estimated_s")
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_S_FIELD_NUMBER: _ClassVar[int]
    placements: _containers.RepeatedCompositeFieldContainer[ModelPlacement]
    estimated_s: float
    def __init__(self, placements: _Optional[_Iterable[_Union[ModelPlacement, _Mapping]]] = ..., estimated_s: _Optional[float] = ...) -> None: ...

class ModelPlacement(_message.Message):
    __slots__ = ("model", "gpus")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpus: int
    def __init__(self, model: _Optional[str] = ..., gpus: _Optional[int] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ("job_id", "stages", "estimated_makespan_s", "baseline_max_heuristic_s", "baseline_min_heuristic_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_MAKESPAN_S_FIELD_NUMBER: _ClassVar[int]
    BASELINE_MAX_HEURISTIC_S_FIELD_NUMBER: _ClassVar[int]
    BASELINE_MIN_HEURISTIC_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    stages: _containers.RepeatedCompositeFieldContainer[ExecutionStage]
    estimated_makespan_s: float
    baseline_max_heuristic_s: float
    baseline_min_heuristic_s: float
    def __init__(self, job_id: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[ExecutionStage, _Mapping]]] = ..., estimated_makespan_s: _Optional[float] = ..., baseline_max_heuristic_s: _Optional[float] = ..., baseline_min_heuristic_s: _Optional[float] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class RunResponse(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("job_id", "state", "finished_requests", "total_requests", "elapsed_s", "estimated_remaining_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_REMAINING_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: JobState
    finished_requests: int
    total_requests: int
    elapsed_s: float
    estimated_remaining_s: float
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., finished_requests: _Optional[int] = ..., total_requests: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., estimated_remaining_s: _Optional[float] = ...) -> None: ...

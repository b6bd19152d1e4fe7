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
    __slots__ = ("job_id", "stages", "gpus", "samples", "job", "seed", "no_preemption", "skip_baselines", "cost_profiles")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    NO_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    SKIP_BASELINES_FIELD_NUMBER: _ClassVar[int]
    COST_PROFILES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    stages: _containers.RepeatedCompositeFieldContainer[JobStage]
    gpus: int
    samples: int
    job: PlanJob
    seed: int
    no_preemption: bool
    skip_baselines: bool
    cost_profiles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[JobStage, _Mapping]]] = ..., gpus: _Optional[int] = ..., samples: _Optional[int] = ..., job: _Optional[_Union[PlanJob, _Mapping]] = ..., seed: _Optional[int] = ..., no_preemption: _Optional[bool] = ..., skip_baselines: _Optional[bool] = ..., cost_profiles: _Optional[_Iterable[str]] = ...) -> None: ...

class PlanJob(_message.Message):
    __slots__ = ("name", "models", "requests", "devices", "edges")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    name: str
    models: _containers.RepeatedCompositeFieldContainer[PlanModel]
    requests: _containers.RepeatedCompositeFieldContainer[PlanJobRequest]
    devices: PlanDevices
    edges: _containers.RepeatedCompositeFieldContainer[PlanEdge]
    def __init__(self, name: _Optional[str] = ..., models: _Optional[_Iterable[_Union[PlanModel, _Mapping]]] = ..., requests: _Optional[_Iterable[_Union[PlanJobRequest, _Mapping]]] = ..., devices: _Optional[_Union[PlanDevices, _Mapping]] = ..., edges: _Optional[_Iterable[_Union[PlanEdge, _Mapping]]] = ...) -> None: ...

class PlanModel(_message.Message):
    __slots__ = ("name", "shape", "max_seq_len", "max_output_tokens", "observed_output_lengths", "castillo_model")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_OUTPUT_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    CASTILLO_MODEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    shape: PlanModelShape
    max_seq_len: int
    max_output_tokens: int
    observed_output_lengths: _containers.RepeatedScalarFieldContainer[int]
    castillo_model: str
    def __init__(self, name: _Optional[str] = ..., shape: _Optional[_Union[PlanModelShape, _Mapping]] = ..., max_seq_len: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., observed_output_lengths: _Optional[_Iterable[int]] = ..., castillo_model: _Optional[str] = ...) -> None: ...

class PlanModelShape(_message.Message):
    __slots__ = ("name", "params", "layers", "kv_heads", "head_dim", "bytes_per_param", "hidden_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    KV_HEADS_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_PARAM_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_param: int
    hidden_size: int
    def __init__(self, name: _Optional[str] = ..., params: _Optional[float] = ..., layers: _Optional[int] = ..., kv_heads: _Optional[int] = ..., head_dim: _Optional[int] = ..., bytes_per_param: _Optional[int] = ..., hidden_size: _Optional[int] = ...) -> None: ...

class PlanJobRequest(_message.Message):
    __slots__ = ("request_id", "model", "prompt_tokens", "inputs", "output_tokens")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model: str
    prompt_tokens: int
    inputs: _containers.RepeatedScalarFieldContainer[str]
    output_tokens: int
    def __init__(self, request_id: _Optional[str] = ..., model: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., inputs: _Optional[_Iterable[str]] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class PlanDevices(_message.Message):
    __slots__ = ("hardware", "count", "tp_efficiency")
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TP_EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    hardware: str
    count: int
    tp_efficiency: float
    def __init__(self, hardware: _Optional[str] = ..., count: _Optional[int] = ..., tp_efficiency: _Optional[float] = ...) -> None: ...

class PlanEdge(_message.Message):
    __slots__ = ("source", "target")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class ExecutionStage(_message.Message):
    __slots__ = ("placements", "estimated_s", "start_s", "flops", "finished_models")
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_S_FIELD_NUMBER: _ClassVar[int]
    START_S_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MODELS_FIELD_NUMBER: _ClassVar[int]
    placements: _containers.RepeatedCompositeFieldContainer[ModelPlacement]
    estimated_s: float
    start_s: float
    flops: float
    finished_models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, placements: _Optional[_Iterable[_Union[ModelPlacement, _Mapping]]] = ..., estimated_s: _Optional[float] = ..., start_s: _Optional[float] = ..., flops: _Optional[float] = ..., finished_models: _Optional[_Iterable[str]] = ...) -> None: ...

class ModelPlacement(_message.Message):
    __slots__ = ("model", "gpus", "replicas")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpus: int
    replicas: int
    def __init__(self, model: _Optional[str] = ..., gpus: _Optional[int] = ..., replicas: _Optional[int] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ("job_id", "stages", "estimated_makespan_s", "baseline_max_heuristic_s", "baseline_min_heuristic_s", "search_s", "simulations", "requests")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_MAKESPAN_S_FIELD_NUMBER: _ClassVar[int]
    BASELINE_MAX_HEURISTIC_S_FIELD_NUMBER: _ClassVar[int]
    BASELINE_MIN_HEURISTIC_S_FIELD_NUMBER: _ClassVar[int]
    SEARCH_S_FIELD_NUMBER: _ClassVar[int]
    SIMULATIONS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    stages: _containers.RepeatedCompositeFieldContainer[ExecutionStage]
    estimated_makespan_s: float
    baseline_max_heuristic_s: float
    baseline_min_heuristic_s: float
    search_s: float
    simulations: int
    requests: int
    def __init__(self, job_id: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[ExecutionStage, _Mapping]]] = ..., estimated_makespan_s: _Optional[float] = ..., baseline_max_heuristic_s: _Optional[float] = ..., baseline_min_heuristic_s: _Optional[float] = ..., search_s: _Optional[float] = ..., simulations: _Optional[int] = ..., requests: _Optional[int] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("job_id", "max_tokens", "max_prompt_tokens", "replan")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REPLAN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    max_tokens: int
    max_prompt_tokens: int
    replan: bool
    def __init__(self, job_id: _Optional[str] = ..., max_tokens: _Optional[int] = ..., max_prompt_tokens: _Optional[int] = ..., replan: _Optional[bool] = ...) -> None: ...

class RunResponse(_message.Message):
    __slots__ = ("job_id", "state", "finished_requests")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: JobState
    finished_requests: int
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., finished_requests: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("job_id", "interval_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    interval_s: float
    def __init__(self, job_id: _Optional[str] = ..., interval_s: _Optional[float] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("job_id", "state", "finished_requests", "total_requests", "elapsed_s", "estimated_remaining_s", "stage", "stage_count", "running", "stage_times", "error", "job_name")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_REMAINING_S_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    STAGE_TIMES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: JobState
    finished_requests: int
    total_requests: int
    elapsed_s: float
    estimated_remaining_s: float
    stage: int
    stage_count: int
    running: _containers.RepeatedCompositeFieldContainer[ModelPlacement]
    stage_times: _containers.RepeatedCompositeFieldContainer[StageTime]
    error: str
    job_name: str
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., finished_requests: _Optional[int] = ..., total_requests: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., estimated_remaining_s: _Optional[float] = ..., stage: _Optional[int] = ..., stage_count: _Optional[int] = ..., running: _Optional[_Iterable[_Union[ModelPlacement, _Mapping]]] = ..., stage_times: _Optional[_Iterable[_Union[StageTime, _Mapping]]] = ..., error: _Optional[str] = ..., job_name: _Optional[str] = ...) -> None: ...

class StageTime(_message.Message):
    __slots__ = ("stage", "estimated_s", "actual_s")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_S_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_S_FIELD_NUMBER: _ClassVar[int]
    stage: int
    estimated_s: float
    actual_s: float
    def __init__(self, stage: _Optional[int] = ..., estimated_s: _Optional[float] = ..., actual_s: _Optional[float] = ...) -> None: ...

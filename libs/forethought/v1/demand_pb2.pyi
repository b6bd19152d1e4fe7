from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StepKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_KIND_UNSPECIFIED: _ClassVar[StepKind]
    STEP_KIND_LLM: _ClassVar[StepKind]
    STEP_KIND_TOOL: _ClassVar[StepKind]
STEP_KIND_UNSPECIFIED: StepKind
STEP_KIND_LLM: StepKind
STEP_KIND_TOOL: StepKind

class StepSpec(_message.Message):
    __slots__ = ("name", "kind", "backend", "after", "probability", "max_repeats")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    MAX_REPEATS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: StepKind
    backend: str
    after: _containers.RepeatedScalarFieldContainer[str]
    probability: float
    max_repeats: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[StepKind, str]] = ..., backend: _Optional[str] = ..., after: _Optional[_Iterable[str]] = ..., probability: _Optional[float] = ..., max_repeats: _Optional[int] = ...) -> None: ...

class RegisterApplicationRequest(_message.Message):
    __slots__ = ("application", "steps", "application_file", "keep_existing")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_FILE_FIELD_NUMBER: _ClassVar[int]
    KEEP_EXISTING_FIELD_NUMBER: _ClassVar[int]
    application: str
    steps: _containers.RepeatedCompositeFieldContainer[StepSpec]
    application_file: str
    keep_existing: bool
    def __init__(self, application: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[StepSpec, _Mapping]]] = ..., application_file: _Optional[str] = ..., keep_existing: _Optional[bool] = ...) -> None: ...

class RegisterApplicationResponse(_message.Message):
    __slots__ = ("steps", "application", "entry", "recorded", "kept")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    steps: int
    application: str
    entry: str
    recorded: int
    kept: bool
    def __init__(self, steps: _Optional[int] = ..., application: _Optional[str] = ..., entry: _Optional[str] = ..., recorded: _Optional[int] = ..., kept: _Optional[bool] = ...) -> None: ...

class RecordRequest(_message.Message):
    __slots__ = ("application", "run_id", "step", "service_s", "input_tokens", "output_tokens", "parallelism", "run_finished")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SERVICE_S_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    RUN_FINISHED_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    step: str
    service_s: float
    input_tokens: int
    output_tokens: int
    parallelism: int
    run_finished: bool
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[str] = ..., service_s: _Optional[float] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., parallelism: _Optional[int] = ..., run_finished: _Optional[bool] = ...) -> None: ...

class RecordResponse(_message.Message):
    __slots__ = ("run_steps", "learnt")
    RUN_STEPS_FIELD_NUMBER: _ClassVar[int]
    LEARNT_FIELD_NUMBER: _ClassVar[int]
    run_steps: int
    learnt: bool
    def __init__(self, run_steps: _Optional[int] = ..., learnt: _Optional[bool] = ...) -> None: ...

class EstimateRequest(_message.Message):
    __slots__ = ("application", "run_id", "done_steps", "deadline_in_s", "current_step", "attained_s", "input_tokens", "output_tokens")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DONE_STEPS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_IN_S_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    ATTAINED_S_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    done_steps: _containers.RepeatedScalarFieldContainer[str]
    deadline_in_s: float
    current_step: str
    attained_s: float
    input_tokens: int
    output_tokens: int
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., done_steps: _Optional[_Iterable[str]] = ..., deadline_in_s: _Optional[float] = ..., current_step: _Optional[str] = ..., attained_s: _Optional[float] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class EstimateResponse(_message.Message):
    __slots__ = ("mean_remaining_s", "remaining_quantiles_s", "gittins_rank", "slack_s", "current_step", "walks", "bucket_period_s")
    MEAN_REMAINING_S_FIELD_NUMBER: _ClassVar[int]
    REMAINING_QUANTILES_S_FIELD_NUMBER: _ClassVar[int]
    GITTINS_RANK_FIELD_NUMBER: _ClassVar[int]
    SLACK_S_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    WALKS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_PERIOD_S_FIELD_NUMBER: _ClassVar[int]
    mean_remaining_s: float
    remaining_quantiles_s: _containers.RepeatedScalarFieldContainer[float]
    gittins_rank: float
    slack_s: float
    current_step: str
    walks: int
    bucket_period_s: float
    def __init__(self, mean_remaining_s: _Optional[float] = ..., remaining_quantiles_s: _Optional[_Iterable[float]] = ..., gittins_rank: _Optional[float] = ..., slack_s: _Optional[float] = ..., current_step: _Optional[str] = ..., walks: _Optional[int] = ..., bucket_period_s: _Optional[float] = ...) -> None: ...

class WatchPrewarmRequest(_message.Message):
    __slots__ = ("effectiveness",)
    EFFECTIVENESS_FIELD_NUMBER: _ClassVar[int]
    effectiveness: float
    def __init__(self, effectiveness: _Optional[float] = ...) -> None: ...

class WatchPrewarmResponse(_message.Message):
    __slots__ = ("decision",)
    DECISION_FIELD_NUMBER: _ClassVar[int]
    decision: PrewarmDecision
    def __init__(self, decision: _Optional[_Union[PrewarmDecision, _Mapping]] = ...) -> None: ...

class PrewarmDecision(_message.Message):
    __slots__ = ("application", "run_id", "step", "backend", "start_in_s", "current_step", "model", "lora_adapter", "tool", "selection_probability", "effectiveness", "warmup_s", "prompt_prefix")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    START_IN_S_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LORA_ADAPTER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    SELECTION_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVENESS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_S_FIELD_NUMBER: _ClassVar[int]
    PROMPT_PREFIX_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    step: str
    backend: str
    start_in_s: float
    current_step: str
    model: str
    lora_adapter: str
    tool: str
    selection_probability: float
    effectiveness: float
    warmup_s: float
    prompt_prefix: str
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[str] = ..., backend: _Optional[str] = ..., start_in_s: _Optional[float] = ..., current_step: _Optional[str] = ..., model: _Optional[str] = ..., lora_adapter: _Optional[str] = ..., tool: _Optional[str] = ..., selection_probability: _Optional[float] = ..., effectiveness: _Optional[float] = ..., warmup_s: _Optional[float] = ..., prompt_prefix: _Optional[str] = ...) -> None: ...

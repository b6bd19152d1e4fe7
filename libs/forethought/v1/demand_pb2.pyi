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
    __slots__ = ("application", "steps")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    application: str
    steps: _containers.RepeatedCompositeFieldContainer[StepSpec]
    def __init__(self, application: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[StepSpec, _Mapping]]] = ...) -> None: ...

class RegisterApplicationResponse(_message.Message):
    __slots__ = ("steps",)
    STEPS_FIELD_NUMBER: _ClassVar[int]
    steps: int
    def __init__(self, steps: _Optional[int] = ...) -> None: ...

class RecordRequest(_message.Message):
    __slots__ = ("application", "run_id", "step", "service_s", "input_tokens", "output_tokens")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SERVICE_S_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    step: str
    service_s: float
    input_tokens: int
    output_tokens: int
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[str] = ..., service_s: _Optional[float] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class RecordResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EstimateRequest(_message.Message):
    __slots__ = ("application", "run_id", "done_steps", "deadline_in_s")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DONE_STEPS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_IN_S_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    done_steps: _containers.RepeatedScalarFieldContainer[str]
    deadline_in_s: float
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., done_steps: _Optional[_Iterable[str]] = ..., deadline_in_s: _Optional[float] = ...) -> None: ...

class EstimateResponse(_message.Message):
    __slots__ = ("mean_remaining_s", "remaining_quantiles_s", "gittins_rank", "slack_s")
    MEAN_REMAINING_S_FIELD_NUMBER: _ClassVar[int]
    REMAINING_QUANTILES_S_FIELD_NUMBER: _ClassVar[int]
    GITTINS_RANK_FIELD_NUMBER: _ClassVar[int]
    SLACK_S_FIELD_NUMBER: _ClassVar[int]
    mean_remaining_s: float
    remaining_quantiles_s: _containers.RepeatedScalarFieldContainer[float]
    gittins_rank: float
    slack_s: float
    def __init__(self, mean_remaining_s: _Optional[float] = ..., remaining_quantiles_s: _Optional[_Iterable[float]] = ..., gittins_rank: _Optional[float] = ..., slack_s: _Optional[float] = ...) -> None: ...

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
    __slots__ = ("application", "run_id", "step", "backend", "start_in_s")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    START_IN_S_FIELD_NUMBER: _ClassVar[int]
    application: str
    run_id: str
    step: str
    backend: str
    start_in_s: float
    def __init__(self, application: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[str] = ..., backend: _Optional[str] = ..., start_in_s: _Optional[float] = ...) -> None: ...

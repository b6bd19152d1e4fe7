from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PredictionSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREDICTION_SOURCE_UNSPECIFIED: _ClassVar[PredictionSource]
    PREDICTION_SOURCE_MODEL: _ClassVar[PredictionSource]
    PREDICTION_SOURCE_LENGTH_CACHE: _ClassVar[PredictionSource]
PREDICTION_SOURCE_UNSPECIFIED: PredictionSource
PREDICTION_SOURCE_MODEL: PredictionSource
PREDICTION_SOURCE_LENGTH_CACHE: PredictionSource

class PredictRequest(_message.Message):
    __slots__ = ("prompts", "model", "histories")
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    HISTORIES_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedScalarFieldContainer[str]
    model: str
    histories: _containers.RepeatedCompositeFieldContainer[ConversationHistory]
    def __init__(self, prompts: _Optional[_Iterable[str]] = ..., model: _Optional[str] = ..., histories: _Optional[_Iterable[_Union[ConversationHistory, _Mapping]]] = ...) -> None: ...

class ConversationHistory(_message.Message):
    __slots__ = ("earlier_answer_chars",)
    EARLIER_ANSWER_CHARS_FIELD_NUMBER: _ClassVar[int]
    earlier_answer_chars: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, earlier_answer_chars: _Optional[_Iterable[int]] = ...) -> None: ...

class LengthDistribution(_message.Message):
    __slots__ = ("mean", "quantiles", "bucket", "histogram", "bucket_edges", "source")
    MEAN_FIELD_NUMBER: _ClassVar[int]
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    BUCKET_EDGES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    mean: float
    quantiles: _containers.RepeatedCompositeFieldContainer[Quantile]
    bucket: int
    histogram: _containers.RepeatedScalarFieldContainer[float]
    bucket_edges: _containers.RepeatedScalarFieldContainer[float]
    source: PredictionSource
    def __init__(self, mean: _Optional[float] = ..., quantiles: _Optional[_Iterable[_Union[Quantile, _Mapping]]] = ..., bucket: _Optional[int] = ..., histogram: _Optional[_Iterable[float]] = ..., bucket_edges: _Optional[_Iterable[float]] = ..., source: _Optional[_Union[PredictionSource, str]] = ...) -> None: ...

class Quantile(_message.Message):
    __slots__ = ("percent", "tokens")
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    percent: int
    tokens: float
    def __init__(self, percent: _Optional[int] = ..., tokens: _Optional[float] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("forecasts", "model_version")
    FORECASTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    forecasts: _containers.RepeatedCompositeFieldContainer[LengthDistribution]
    model_version: str
    def __init__(self, forecasts: _Optional[_Iterable[_Union[LengthDistribution, _Mapping]]] = ..., model_version: _Optional[str] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("prompt", "output_tokens", "history", "model")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    output_tokens: int
    history: ConversationHistory
    model: str
    def __init__(self, prompt: _Optional[str] = ..., output_tokens: _Optional[int] = ..., history: _Optional[_Union[ConversationHistory, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("stored",)
    STORED_FIELD_NUMBER: _ClassVar[int]
    stored: int
    def __init__(self, stored: _Optional[int] = ...) -> None: ...

class ReloadRequest(_message.Message):
    __slots__ = ("model_dir", "refit_head")
    MODEL_DIR_FIELD_NUMBER: _ClassVar[int]
    REFIT_HEAD_FIELD_NUMBER: _ClassVar[int]
    model_dir: str
    refit_head: bool
    def __init__(self, model_dir: _Optional[str] = ..., refit_head: _Optional[bool] = ...) -> None: ...

class ReloadResponse(_message.Message):
    __slots__ = ("model_version",)
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    model_version: str
    def __init__(self, model_version: _Optional[str] = ...) -> None: ...

"""Tokenizer library: a registry of served models' tokenizers, chat templates, streaming detokenization."""

from forethought.tokenize.builtin import BUILTIN_SOURCES, converted_folder
from forethought.tokenize.incremental import IncrementalDetokenizer
from forethought.tokenize.model_tokenizer import ChatPrompt, ModelTokenizer
from forethought.tokenize.registry import (
    BUILTIN,
    TokenizerRegistry,
    UnknownModel,
    default_models,
)

__all__ = [
    "BUILTIN",
    "BUILTIN_SOURCES",
    "ChatPrompt",
    "IncrementalDetokenizer",
    "ModelTokenizer",
    "TokenizerRegistry",
    "UnknownModel",
    "converted_folder",
    "default_models",
]

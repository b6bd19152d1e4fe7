"""Served model weights: known names resolved to prepared Hugging Face folders for the engines."""

from forethought.models.smollm2 import SMOLLM2_NAME, prepare_smollm2, resolve_model

__all__ = ["SMOLLM2_NAME", "prepare_smollm2", "resolve_model"]

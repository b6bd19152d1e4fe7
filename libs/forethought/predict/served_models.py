"""What the predictor's head knows of the served model (SSJF's all-models variant feeds a one-hot of the
model to its head).

A model-aware head reads, beside the text state, a one-hot of the served model over the models it was
trained on plus one slot for "any model" (trained on every model's answers, so it is the model-agnostic
forecast an unseen model starts from), and the prompt's log length in characters, which the mean-pooled
text state does not carry.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SERVED_MODEL = "SmolLM2-135M-Instruct"
"""The model this repository's engines serve: the model of a request that names none."""

ANY_MODEL = "*"
"""A model name no head is trained on: asks for the model-agnostic forecast (the any-model slot)."""

_LOG_CHARS_SCALE = 8.0


def model_input_width(known: Sequence[str]) -> int:
    """Columns ``model_features`` adds to the head's input (none for a head that knows no model)."""
    return len(known) + 2 if known else 0


def model_features(known: Sequence[str], models: Sequence[str], prompts: Sequence[str]) -> np.ndarray:
    """One row per prompt: the one-hot of its model over ``known`` and the any-model slot (an unknown model
    takes the slot), then log1p(characters) / 8."""
    rows = np.zeros((len(prompts), model_input_width(known)), np.float32)
    if not known:
        return rows
    column = {model: index for index, model in enumerate(known)}
    for row, model, prompt in zip(rows, models, prompts):
        row[column.get(model, len(known))] = 1.0
        row[-1] = np.log1p(len(prompt)) / _LOG_CHARS_SCALE
    return rows

"""Streaming detokenization: emit only complete new text as token ids arrive (DESIGN.md step 5).

Byte-level BPE splits one character (emoji, CJK) across several tokens; decoding them one at a time
yields U+FFFD. The detokenizer decodes a short window twice (with and without the newest ids) and emits
the difference only when it does not end in a broken character, as vLLM's incremental detokenizer does.
"""

from __future__ import annotations

from collections.abc import Sequence

from forethought.tokenize.model_tokenizer import ModelTokenizer

_REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Feeds ids of one stream; ``feed`` returns the new complete text, ``flush`` whatever is left."""

    def __init__(self, tokenizer: ModelTokenizer, skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip_special_tokens = skip_special_tokens
        self._ids: list[int] = []
        self._prefix_offset = 0  # start of the decode window, kept so leading-space rules match
        self._read_offset = 0  # ids before this are already emitted as text

    def feed(self, ids: Sequence[int]) -> str:
        self._ids.extend(ids)
        emitted, pending = self._window_texts()
        if len(pending) > len(emitted) and not pending.endswith(_REPLACEMENT):
            self._advance()
            return pending[len(emitted) :]
        return ""

    def flush(self) -> str:
        """Emit the rest, even an incomplete character (the stream has ended)."""
        emitted, pending = self._window_texts()
        self._advance()
        return pending[len(emitted) :]

    def _window_texts(self) -> tuple[str, str]:
        window = self._ids[self._prefix_offset :]
        already = self._read_offset - self._prefix_offset
        emitted, pending = self._tokenizer.decode_batch([window[:already], window], self._skip_special_tokens)
        return emitted, pending

    def _advance(self) -> None:
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)

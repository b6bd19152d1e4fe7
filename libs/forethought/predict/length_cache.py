"""Observed output lengths of repeated prompts (SSJF section 6, "Use of Semantic Cache").

Prompts that differ only in case, surrounding or repeated whitespace map to one key; a hit answers with
the last observed length instead of running the proxy model.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict

_WHITESPACE = re.compile(r"\s+")


def prompt_key(prompt: str) -> str:
    """Hash of the prompt with case and whitespace runs normalized."""
    normalized = _WHITESPACE.sub(" ", prompt.strip().lower())
    return hashlib.blake2b(normalized.encode(), digest_size=16).hexdigest()


class LengthCache:
    """LRU map of normalized prompt -> last observed output length, at most ``capacity`` entries."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._lengths: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lengths)

    def get(self, prompt: str) -> int | None:
        key = prompt_key(prompt)
        if key not in self._lengths:
            return None
        self._lengths.move_to_end(key)
        return self._lengths[key]

    def put(self, prompt: str, output_tokens: int) -> None:
        key = prompt_key(prompt)
        self._lengths[key] = output_tokens
        self._lengths.move_to_end(key)
        while len(self._lengths) > self._capacity:
            self._lengths.popitem(last=False)

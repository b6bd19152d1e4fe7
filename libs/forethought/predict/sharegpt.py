"""ShareGPT conversations as output-length samples (SSJF paper section 3.1 and "Note on Data Processing").

Each assistant turn is one sample: its input is every earlier prompt and response of the conversation
plus the current prompt (the proxy model keeps the last 512 of its own tokens) and the lengths of the
earlier responses (``ConversationHistory``), its label is the length of the response in the served
model's tokens. As in the paper, responses outside (1, 512) tokens are
dropped (empty or truncated answers). Splits are by conversation, from a hash of its id, so the same
conversation always lands in the same split whatever the sample size.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from forethought.predict.history import ConversationHistory
from forethought.workloads.sharegpt import iter_sharegpt_records, sharegpt_path

MIN_OUTPUT_TOKENS_EXCLUSIVE = 1
MAX_OUTPUT_TOKENS_EXCLUSIVE = 512
# a MiniLM token covers at least one character, so 8x the 512-token window always keeps enough text
CONTEXT_CHARS = 4096
TURN_SEPARATOR = "\n"
SPLITS = ("train", "val", "test")
_PART_SUFFIX = re.compile(r"_\d+$")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class LengthSample:
    """One request: the context-augmented prompt, its conversation's earlier answers and the true output
    length in served-model tokens."""

    conversation_id: str
    round: int
    prompt: str
    history: ConversationHistory
    output_tokens: int


@dataclass(frozen=True)
class Turn:
    prompt: str
    response: str


def split_of(conversation_id: str, val_percent: int = 10, test_percent: int = 10) -> str:
    """``train``/``val``/``test`` for a conversation, stable across runs and sample sizes; all parts
    (``<id>_<n>``) of one chat share a split."""
    chat_id = _PART_SUFFIX.sub("", conversation_id)
    bucket = int(hashlib.sha1(chat_id.encode()).hexdigest()[:8], 16) % 100
    if bucket < test_percent:
        return "test"
    return "val" if bucket < test_percent + val_percent else "train"


def iter_conversations(path: str | Path) -> Iterator[tuple[str, list[Turn]]]:
    """Yield (id, human->gpt turns) from a ShareGPT JSON file; stops cleanly at a truncated end."""
    for record in iter_sharegpt_records(path):
        turns = paired_turns(record.get("conversations") or [])
        if turns:
            yield str(record.get("id", "")), turns


def paired_turns(messages: Sequence[dict[str, str]]) -> list[Turn]:
    """Pair each human message with the gpt message that directly follows it."""
    turns: list[Turn] = []
    for current, following in zip(messages, messages[1:]):
        if current.get("from") == "human" and following.get("from") == "gpt":
            turns.append(Turn(str(current.get("value", "")), str(following.get("value", ""))))
    return turns


def context_prompt(turns: Sequence[Turn], round_index: int) -> str:
    """Earlier prompts and responses, then the current prompt; the tail is what the proxy model sees."""
    parts = [text for turn in turns[:round_index] for text in (turn.prompt, turn.response)]
    parts.append(turns[round_index].prompt)
    return TURN_SEPARATOR.join(parts)[-CONTEXT_CHARS:]


def conversation_samples(
    conversation_id: str, turns: Sequence[Turn], count_tokens: Callable[[list[str]], list[int]]
) -> list[LengthSample]:
    """All kept samples of one conversation (filtered as in the paper)."""
    lengths = count_tokens([turn.response for turn in turns])
    samples = []
    for index, (turn, length) in enumerate(zip(turns, lengths)):
        if not turn.prompt.strip():
            continue
        if MIN_OUTPUT_TOKENS_EXCLUSIVE < length < MAX_OUTPUT_TOKENS_EXCLUSIVE:
            history = ConversationHistory.of_answers([earlier.response for earlier in turns[:index]])
            samples.append(LengthSample(conversation_id, index + 1, context_prompt(turns, index), history, length))
    return samples


def load_samples(
    count_tokens: Callable[[list[str]], list[int]],
    max_conversations: int,
    path: Path | None = None,
    progress: bool = False,
) -> dict[str, list[LengthSample]]:
    """Samples of the first ``max_conversations`` conversations, grouped by split."""
    by_split: dict[str, list[LengthSample]] = {split: [] for split in SPLITS}
    conversations = tqdm(iter_conversations(path or sharegpt_path()), desc="labelling ShareGPT", unit=" chats", disable=not progress)
    for seen, (conversation_id, turns) in enumerate(conversations):
        if seen >= max_conversations:
            break
        by_split[split_of(conversation_id)].extend(conversation_samples(conversation_id, turns, count_tokens))
    return without_training_prompts(by_split)


def normalized_prompt(prompt: str) -> str:
    return _WHITESPACE.sub(" ", prompt.strip().lower())


def without_training_prompts(by_split: dict[str, list[LengthSample]]) -> dict[str, list[LengthSample]]:
    """Drop validation and test samples whose prompt (case and whitespace aside) is also a training
    prompt: ShareGPT repeats popular prompts across conversations, and a repeat would score memory."""
    seen = {normalized_prompt(sample.prompt) for sample in by_split["train"]}
    return {
        split: samples if split == "train" else [s for s in samples if normalized_prompt(s.prompt) not in seen]
        for split, samples in by_split.items()
    }

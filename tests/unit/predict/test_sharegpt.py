from __future__ import annotations

import json

from forethought.predict.history import NO_HISTORY, ConversationHistory
from forethought.predict.sharegpt import (
    LengthSample,
    Turn,
    context_prompt,
    conversation_samples,
    iter_conversations,
    paired_turns,
    split_of,
    without_training_prompts,
)


def word_count(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def test_turns_pair_each_human_message_with_the_next_gpt_message() -> None:
    messages = [
        {"from": "gpt", "value": "greeting"},
        {"from": "human", "value": "q1"},
        {"from": "gpt", "value": "a1"},
        {"from": "human", "value": "q2"},
        {"from": "human", "value": "q3"},
        {"from": "gpt", "value": "a3"},
    ]
    assert paired_turns(messages) == [Turn("q1", "a1"), Turn("q3", "a3")]


def test_context_is_earlier_rounds_then_the_current_prompt() -> None:
    turns = [Turn("p1", "r1"), Turn("p2", "r2"), Turn("p3", "r3")]
    assert context_prompt(turns, 0) == "p1"
    assert context_prompt(turns, 2) == "p1\nr1\np2\nr2\np3"


def test_responses_outside_1_to_512_tokens_are_dropped() -> None:
    turns = [Turn("a", "one"), Turn("b", "two words"), Turn("c", "w " * 511), Turn("d", "w " * 512), Turn(" ", "x y")]
    samples = conversation_samples("c1", turns, word_count)
    assert [(s.round, s.output_tokens) for s in samples] == [(2, 2), (3, 511)]


def test_a_sample_carries_the_lengths_of_its_conversations_earlier_answers() -> None:
    turns = [Turn("p1", "r1"), Turn("p2", "two words"), Turn("p3", "x y z")]
    samples = conversation_samples("c1", turns, word_count)
    assert [s.history for s in samples] == [
        ConversationHistory((len("r1"),)), ConversationHistory((len("r1"), len("two words")))]
    first_rounds = conversation_samples("c2", [Turn("p", "a b")], word_count)
    assert [s.history for s in first_rounds] == [NO_HISTORY]


def test_split_is_stable_and_roughly_80_10_10() -> None:
    splits = [split_of(f"conv-{index}") for index in range(5000)]
    assert splits == [split_of(f"conv-{index}") for index in range(5000)]
    assert 0.77 < splits.count("train") / 5000 < 0.83
    assert 0.08 < splits.count("test") / 5000 < 0.12


def test_truncated_file_stops_cleanly_after_the_last_whole_record(tmp_path) -> None:
    records = [
        {"id": "x1", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
        {"id": "x2", "conversations": [{"from": "human", "value": "bye"}, {"from": "gpt", "value": "ciao"}]},
    ]
    text = json.dumps(records)
    truncated = text[: text.index("ciao")]
    (tmp_path / "sharegpt.json").write_text(truncated)
    conversations = list(iter_conversations(tmp_path / "sharegpt.json"))
    assert [conversation_id for conversation_id, _ in conversations] == ["x1"]


def test_parts_of_one_chat_share_a_split() -> None:
    for index in range(200):
        assert {split_of(f"chat{index}_{part}") for part in (0, 1, 17)} == {split_of(f"chat{index}")}


def test_evaluation_samples_repeating_a_training_prompt_are_dropped() -> None:
    def sample(conversation_id: str, prompt: str) -> LengthSample:
        return LengthSample(conversation_id, 1, prompt, NO_HISTORY, 10)

    by_split = {
        "train": [sample("a", "Write a poem")],
        "val": [sample("b", "write a  POEM "), sample("c", "Write a story")],
        "test": [sample("d", "Write a poem"), sample("e", "Fix my code")],
    }
    kept = without_training_prompts(by_split)
    assert [s.conversation_id for s in kept["train"]] == ["a"]
    assert [s.conversation_id for s in kept["val"]] == ["c"]
    assert [s.conversation_id for s in kept["test"]] == ["e"]

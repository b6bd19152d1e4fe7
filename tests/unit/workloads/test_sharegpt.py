import json

from forethought.domain import ServiceClass
from forethought.workloads.sharegpt import (
    approximate_token_count,
    first_turns,
    load_sharegpt_conversations,
)
from forethought.workloads.workload import RequestClass


def _message(role: str, words: int) -> dict[str, str]:
    return {"from": role, "value": " ".join(["w"] * words)}


def _write_truncated(path, records) -> None:
    text = json.dumps(records, indent=1)
    # The packaged file stops mid-record; cut the last record in half the same way.
    path.write_text(text[: text.rindex('"conversations"') + 20])


def test_turns_carry_earlier_messages_and_a_truncated_tail_is_dropped(tmp_path) -> None:
    path = tmp_path / "sharegpt.json"
    records = [
        {"id": "a", "conversations": [_message("human", 3), _message("gpt", 5),
                                      _message("human", 2), _message("gpt", 7)]},
        {"id": "mid", "conversations": [_message("gpt", 4), _message("human", 1), _message("gpt", 2)]},
        {"id": "empty", "conversations": []},
        {"id": "cut", "conversations": [_message("human", 1), _message("gpt", 1)]},
    ]
    _write_truncated(path, records)
    conversations = load_sharegpt_conversations(path, count_tokens=count_words, request_class=RequestClass(ttft_slo_s=0.4),
                                                think_time_s=2.0)
    assert [c.conversation_id for c in conversations] == ["a", "mid"]
    first, second = conversations[0].turns
    assert (first.request_id, first.prompt_tokens, first.output_tokens) == ("a-t0", 3, 5)
    assert (second.request_id, second.prompt_tokens, second.output_tokens) == ("a-t1", 10, 7)
    assert second.prompt_token_ids()[:3] == first.prompt_token_ids()
    assert first.service_class is ServiceClass.RT and first.ttft_slo_s == 0.4
    assert conversations[0].think_time_s == 2.0
    # The leading assistant message answers nothing and is not part of the context.
    assert [(t.prompt_tokens, t.output_tokens) for t in conversations[1].turns] == [(1, 2)]
    assert first_turns(conversations) == [first, conversations[1].turns[0]]


def test_context_cap_ends_a_conversation_before_the_turn_that_exceeds_it(tmp_path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"id": "a", "conversations": [
        _message("human", 3), _message("gpt", 5), _message("human", 2), _message("gpt", 7)]}]))
    [conversation] = load_sharegpt_conversations(path, count_tokens=count_words, max_context_tokens=16)
    assert [t.request_id for t in conversation.turns] == ["a-t0"]


def test_packaged_dataset_streams_its_first_conversations() -> None:
    conversations = load_sharegpt_conversations(limit=20)
    assert len(conversations) == 20
    assert conversations[0].conversation_id == "QWJhYvA_0"
    assert all(turn.output_tokens >= 1 for c in conversations for turn in c.turns)


def test_approximate_count_is_four_characters_a_token() -> None:
    assert [approximate_token_count(text) for text in ("", "abc", "abcd", "abcde")] == [0, 1, 1, 2]


def count_words(text: str) -> int:
    return len(text.split())

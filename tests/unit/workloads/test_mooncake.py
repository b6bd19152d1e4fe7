import json

import pytest
from forethought.workloads.mooncake import at_rate, load_mooncake_trace, mooncake_prompt


def test_equal_hash_ids_expand_to_a_shared_token_prefix(tmp_path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [
        {"timestamp": 0, "input_length": 1100, "output_length": 9, "hash_ids": [1, 2, 3]},
        {"timestamp": 1500, "input_length": 700, "output_length": 4, "hash_ids": [1, 4]},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    first, second = load_mooncake_trace(path)
    assert (first.request_id, first.arrival_s, first.output_tokens) == ("trace-0", 0.0, 9)
    assert (second.request_id, second.arrival_s, second.output_tokens) == ("trace-1", 1.5, 4)
    assert [s.length for s in first.prompt] == [512, 512, 76]
    assert [s.length for s in second.prompt] == [512, 188]
    first_ids, second_ids = first.prompt_token_ids(), second.prompt_token_ids()
    assert len(first_ids) == 1100 and len(second_ids) == 700
    assert first_ids[:512] == second_ids[:512]
    assert first_ids[512:700] != second_ids[512:700]


def test_limit_reads_only_the_first_lines(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": i, "input_length": 10, "output_length": 1,
                                        "hash_ids": [i]}) + "\n" for i in range(5)))
    assert [r.request_id for r in load_mooncake_trace(path, limit=2)] == ["t-0", "t-1"]


def test_too_few_hash_ids_for_the_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="needs more than 1 blocks"):
        mooncake_prompt(600, [1])


def test_at_rate_scales_every_gap_by_one_factor(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": ms, "input_length": 10, "output_length": 1, "hash_ids": [i]})
                            + "\n" for i, ms in enumerate([0, 1000, 1500, 8000])))
    requests = load_mooncake_trace(path)
    scaled = at_rate(requests, rate_per_s=2.0)  # 4 requests in 2 s instead of 8 s
    assert [r.arrival_s for r in scaled] == [0.0, 0.25, 0.375, 2.0]
    assert [r.request_id for r in scaled] == [r.request_id for r in requests]
    assert [r.arrival_s for r in at_rate(requests, rate_per_s=0.25)] == [0.0, 2.0, 3.0, 16.0]
    with pytest.raises(ValueError, match="rate_per_s"):
        at_rate(requests, 0.0)

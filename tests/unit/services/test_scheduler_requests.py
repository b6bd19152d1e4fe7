"""The front door's request rules: ``validate`` on the message, then ``generation_of`` on the prompt's ids,
each refusal naming the field the client sent."""

from __future__ import annotations

import pytest
from forethought.domain import InvalidField
from forethought.services.scheduler.requests import generation_of, validate
from forethought.v1 import common_pb2, scheduler_pb2


def token_request(ids: list[int]) -> scheduler_pb2.GenerateRequest:
    # Through the wire format, as the servicer receives it: the ids are a protobuf repeated field.
    sent = scheduler_pb2.GenerateRequest(model="m", token_ids=common_pb2.TokenIds(ids=ids), max_tokens=4)
    return scheduler_pb2.GenerateRequest.FromString(sent.SerializeToString())


def test_a_token_id_prompt_becomes_the_engine_request_unchanged():
    request = token_request([5, 0, 7])
    validate(request)
    generation = generation_of(request, "r1", list(request.token_ids.ids))
    assert (generation.request_id, generation.prompt_token_ids, generation.max_tokens) == ("r1", (5, 0, 7), 4)


@pytest.mark.parametrize(("ids", "rule"), [
    ([5, -1, 7], "token_ids.ids: must be >= 0"),
    ([], "token_ids.ids: must hold 1.."),
], ids=["negative-id", "empty"])
def test_bad_token_ids_are_refused_naming_the_field_sent(ids, rule):
    request = token_request(ids)
    validate(request)  # the message's own rules hold; the ids are checked once they are a list
    with pytest.raises(InvalidField, match=f"^{rule}"):
        generation_of(request, "r1", list(request.token_ids.ids))


def test_a_tokenized_prompt_is_checked_under_the_engine_field():
    request = scheduler_pb2.GenerateRequest(model="m", text="Hi", max_tokens=4)
    validate(request)
    with pytest.raises(InvalidField, match="^prompt_token_ids: must hold 1.."):
        generation_of(request, "r1", [])


def test_a_deadline_that_is_not_a_timestamp_is_refused_before_any_work():
    request = token_request([5, 7])
    request.deadline.seconds, request.deadline.nanos = 10, -1
    with pytest.raises(InvalidField, match=r"^deadline: must be a valid timestamp"):
        validate(request)

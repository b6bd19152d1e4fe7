"""The tenants document: schema rules with the entry and rule named, and finding a tenant by token."""

from __future__ import annotations

import pytest
from forethought.access import Quota, new_token, tenants_of, token_hash
from forethought.domain import InvalidField

TOKEN_A = "token-of-a"
TOKEN_B = "token-of-b"


def document(**overrides: object) -> dict[str, object]:
    entry = {"name": "team-a", "token_sha256": [token_hash(TOKEN_A)], "requests_per_s": 2, "tokens_per_min": 600,
             "max_streams": 3, **overrides}
    return {"tenants": [entry, {"name": "team-b", "token_sha256": token_hash(TOKEN_B)}]}


def test_a_token_finds_its_tenant_and_quota() -> None:
    book = tenants_of(document())
    tenant = book.tenant_of(TOKEN_A)
    assert tenant is not None and tenant.name == "team-a"
    assert tenant.quota == Quota(requests_per_s=2.0, burst=0.0, tokens_per_min=600, max_streams=3)
    assert tenant.quota.request_burst == 2.0
    other = book.tenant_of(TOKEN_B)
    assert other is not None and other.name == "team-b" and other.quota == Quota()


@pytest.mark.parametrize("token", [None, "", "not-a-token", token_hash(TOKEN_A)], ids=["none", "empty", "unknown", "the-hash"])
def test_a_missing_or_unknown_token_finds_nobody(token: str | None) -> None:
    assert tenants_of(document()).tenant_of(token) is None


def test_new_tokens_differ_and_hash_to_hex() -> None:
    first, second = new_token(), new_token()
    assert first != second and first.startswith("ft-")
    assert len(token_hash(first)) == 64 and token_hash(first) != token_hash(second)


@pytest.mark.parametrize(("bad", "field", "rule"), [
    ({"tenants": {}}, "tenants", "list `tenants`"),
    ([], "tenants", "list `tenants`"),
    (document(name="bad name"), "tenants[0].name", "letters, digits"),
    (document(token_sha256=[]), "tenants[0].token_sha256", "SHA-256"),
    (document(token_sha256=["ABC"]), "tenants[0].token_sha256", "SHA-256"),
    (document(requests_per_s=-1), "tenants[0].requests_per_s", ">= 0"),
    (document(requests_per_s=True), "tenants[0].requests_per_s", ">= 0"),
    (document(max_streams=1.5), "tenants[0].max_streams", "whole number"),
    (document(burst=0.5), "tenants[0].burst", ">= 1"),
    (document(quota=3), "tenants[0]", "unknown keys ['quota']"),
    ({"tenants": [document()["tenants"][0], document()["tenants"][0]]}, "tenants[1].name", "declared twice"),  # type: ignore[index]
    ({"tenants": [document()["tenants"][0], {"name": "c", "token_sha256": token_hash(TOKEN_A)}]},  # type: ignore[index]
     "tenants[1].token_sha256", "already belongs to 'team-a'"),
], ids=["not-a-list", "not-a-mapping", "name", "no-hash", "uppercase-hash", "negative", "bool", "fraction", "burst-below-one",
        "unknown-key",
        "twice", "shared-token"])
def test_a_broken_document_names_the_entry_and_rule(bad: object, field: str, rule: str) -> None:
    with pytest.raises(InvalidField) as raised:
        tenants_of(bad)
    assert raised.value.field == field
    assert rule in raised.value.rule

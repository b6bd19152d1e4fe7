"""Tenants and their tokens: the tenants document's schema, and finding a caller's tenant by token hash.

The document holds no token, only each token's SHA-256 (hex), so a leaked file grants nothing::

    tenants:
      - name: team-a
        token_sha256: [9f86d081884c7d65...]   # one or more; `python -m forethought.access` makes a pair
        requests_per_s: 5        # token bucket refill; 0 = unlimited
        burst: 10                # bucket size; default max(1, requests_per_s)
        tokens_per_min: 60000    # prompt + output tokens, charged when a request finishes; 0 = unlimited
        max_streams: 4           # Generate calls open at once; 0 = unlimited
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from forethought.domain import require

HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")
TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
TOKEN_PREFIX = "ft-"
QUOTA_FIELDS = ("requests_per_s", "burst", "tokens_per_min", "max_streams")


@dataclass(frozen=True)
class Quota:
    """A tenant's limits; 0 means unlimited."""

    requests_per_s: float = 0.0
    burst: float = 0.0  # 0: max(1, requests_per_s)
    tokens_per_min: int = 0
    max_streams: int = 0

    @property
    def request_burst(self) -> float:
        """The request bucket's size: ``burst``, else one second's worth of requests (at least one)."""
        return self.burst or max(1.0, self.requests_per_s)


@dataclass(frozen=True)
class Tenant:
    name: str
    quota: Quota


def token_hash(token: str) -> str:
    """The hex SHA-256 of a bearer token: what the tenants document stores."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh bearer token (256 random bits, URL-safe)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class TenantBook:
    """Every tenant, found by the hash of one of its tokens."""

    def __init__(self, tenants: Mapping[str, Tenant], by_hash: Mapping[str, str]) -> None:
        self.tenants = dict(tenants)
        self._by_hash = dict(by_hash)

    def tenant_of(self, token: str | None) -> Tenant | None:
        """The tenant ``token`` belongs to; None for a missing or unknown token."""
        if not token:
            return None
        # A lookup by digest leaks nothing useful through timing: a caller cannot choose the digest's bytes.
        name = self._by_hash.get(token_hash(token))
        if name is None:
            return None
        return self.tenants[name]


def tenants_of(document: object) -> TenantBook:
    """The tenants a parsed tenants document declares; InvalidField naming the entry and rule otherwise."""
    require(isinstance(document, Mapping) and isinstance(document.get("tenants"), list), "tenants",
            "the document must be a mapping with a list `tenants`")
    assert isinstance(document, Mapping)  # NOTE: for the type checker; require() above refused anything else
    tenants: dict[str, Tenant] = {}
    by_hash: dict[str, str] = {}
    for index, entry in enumerate(document["tenants"]):
        where = f"tenants[{index}]"
        require(isinstance(entry, Mapping), where, "must be a mapping")
        tenant, hashes = _tenant_of(entry, where)
        require(tenant.name not in tenants, f"{where}.name", f"{tenant.name!r} is declared twice")
        for digest in hashes:
            require(digest not in by_hash, f"{where}.token_sha256", f"{digest[:12]}... already belongs to {by_hash.get(digest)!r}")
            by_hash[digest] = tenant.name
        tenants[tenant.name] = tenant
    return TenantBook(tenants, by_hash)


def _tenant_of(entry: Mapping[str, object], where: str) -> tuple[Tenant, Sequence[str]]:
    unknown = sorted(set(entry) - {"name", "token_sha256", *QUOTA_FIELDS})
    require(not unknown, where, f"unknown keys {unknown}; allowed: name, token_sha256, {', '.join(QUOTA_FIELDS)}")
    name = entry.get("name")
    require(isinstance(name, str) and bool(TENANT_NAME.match(name)), f"{where}.name",
            "must be 1..64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    hashes = entry.get("token_sha256")
    hashes = [hashes] if isinstance(hashes, str) else hashes
    require(isinstance(hashes, list) and len(hashes) > 0 and all(isinstance(h, str) and HEX_SHA256.match(h) for h in hashes),
            f"{where}.token_sha256", "must be one or a list of lowercase hex SHA-256 digests (64 characters)")
    assert isinstance(name, str) and isinstance(hashes, list)
    limits = {key: _limit(entry.get(key, 0), f"{where}.{key}") for key in QUOTA_FIELDS}
    for key in ("tokens_per_min", "max_streams"):
        require(float(limits[key]).is_integer(), f"{where}.{key}", "must be a whole number")
    require(limits["burst"] == 0 or limits["burst"] >= 1, f"{where}.burst", "must be 0 (the default) or >= 1: a request takes one")
    quota = Quota(float(limits["requests_per_s"]), float(limits["burst"]), int(limits["tokens_per_min"]),
                  int(limits["max_streams"]))
    return Tenant(name, quota), hashes


def _limit(value: object, field: str) -> float:
    require(isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0,
            field, "must be a number >= 0 (0 = unlimited)")
    assert isinstance(value, int | float)
    return float(value)

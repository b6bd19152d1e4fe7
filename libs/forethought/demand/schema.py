"""Reading the plain dicts of an application file or a stored graph (Hermes section 4: PDGraphs are kept
as JSON files): each reader checks one field's type and names the field's path when it is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forethought.domain import InvalidField


def number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidField(field, "must be a number")
    return float(value)


def integer(value: object, field: str) -> int:
    whole = number(value, field)
    if whole != int(whole):
        raise InvalidField(field, "must be a whole number")
    return int(whole)


def text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidField(field, "must be a non-empty string")
    return value


def mapping(value: object, field: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidField(field, "must be a mapping with string keys")
    return value


def sequence(value: object, field: str) -> Sequence[object]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidField(field, "must be a list")
    return value


def no_unknown_keys(data: Mapping[str, object], known: set[str], field: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidField(f"{field}.{unknown[0]}", f"is not a known field (known: {', '.join(sorted(known))})")

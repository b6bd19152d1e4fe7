"""Argument types of the command-line entry points: argparse refuses a bad value in one line naming its
flag, with exit status 2, before any work starts (a missing input file used to end in a traceback once
the work reached it, a count of 0 in a division by zero once the results were summed)."""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def input_file(text: str) -> Path:
    """A file to read: it must exist and not be a folder."""
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'is a folder, not a file' if path.is_dir() else 'no such file'}")
    return path


def input_folder(text: str) -> Path:
    """A folder to read: it must exist and not be a file."""
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {'is a file, not a folder' if path.is_file() else 'no such folder'}")
    return path


def _writable(text: str, path: Path) -> None:
    """Refuses ``path`` unless the nearest folder on it that exists takes a new file (the missing ones are
    made when the file is written): a run of minutes to hours would end in a traceback when it came to write."""
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {existing} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=existing):  # a real write: root passes every permission check
            pass
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text}: cannot write in {existing} ({error.strerror})") from None


def output_folder(text: str) -> Path:
    """A folder to write into, made if missing."""
    path = Path(text).expanduser()
    _writable(text, path)
    return path


def output_file(text: str) -> Path:
    """A file to write, its missing folders made; not a folder."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    _writable(text, path.parent)
    return path


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, not {value}")
    return value


def positive_int(text: str) -> int:
    """A count of at least one."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """A count that may be 0 (where 0 has a meaning the flag's help gives)."""
    return _whole(text, 0)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("must be a number, not nan")
    return value


def positive_number(text: str) -> float:
    """A finite number above 0: a rate, a duration, a load."""
    value = _number(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
    return value


def non_negative_number(text: str) -> float:
    """A finite number, 0 or more: a wait, a weight."""
    value = _number(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number, 0 or more, not {text}")
    return value


def share(text: str) -> float:
    """A fraction of a whole, in [0, 1]."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], not {text}")
    return value


def positive_seconds(text: str) -> float:
    """A wait in seconds: a finite number above 0."""
    try:
        return positive_number(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}") from None


def listed(kind: Callable[[str], T]) -> Callable[[str], list[T]]:
    """Comma-separated values, each of ``kind`` (one of the types above), at least one."""

    def parse(text: str) -> list[T]:
        parts = [part.strip() for part in text.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"must be comma-separated values, not {text!r}")
        values = []
        for part in parts:
            try:
                values.append(kind(part))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{part}: {error}") from None
        return values

    return parse


def or_empty(kind: Callable[[str], list[T]]) -> Callable[[str], list[T]]:
    """``kind``'s comma-separated values, or none for an empty value (the flag's help says what none skips)."""

    def parse(text: str) -> list[T]:
        return kind(text) if text.strip() else []

    return parse


def names_of(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """Comma-separated names, each one of ``choices``, at least one."""

    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",")]
        unknown = [name for name in names if name not in choices]
        if unknown or not all(names):
            raise argparse.ArgumentTypeError(f"{', '.join(unknown) or repr(text)}: each must be one of {', '.join(choices)}")
        return names

    return parse

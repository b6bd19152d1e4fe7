"""Argument types of the command-line entry points: argparse refuses a bad value in one line naming its
flag, with exit status 2, before any work starts (a missing input file used to end in a traceback once
the work reached it)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def input_file(text: str) -> Path:
    """A file to read: it must exist and not be a folder."""
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'is a folder, not a file' if path.is_dir() else 'no such file'}")
    return path


def positive_seconds(text: str) -> float:
    """A wait in seconds: a finite number above 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return seconds

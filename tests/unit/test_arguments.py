"""The command line's argument types refuse a bad value in one line, before any work starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from forethought.arguments import input_file, positive_seconds


def test_an_input_file_is_a_file_that_exists(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\n")
    assert input_file(str(job)) == job
    with pytest.raises(argparse.ArgumentTypeError, match=r"^.*missing\.yaml: no such file$"):
        input_file(str(tmp_path / "missing.yaml"))
    with pytest.raises(argparse.ArgumentTypeError, match=r": is a folder, not a file$"):
        input_file(str(tmp_path))


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "-inf", "soon", ""])
def test_a_wait_must_be_a_finite_number_of_seconds_above_zero(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="seconds"):
        positive_seconds(text)


def test_a_wait_in_seconds_keeps_its_value() -> None:
    assert positive_seconds("0.25") == 0.25 and positive_seconds("600") == 600.0

"""The command line's argument types refuse a bad value in one line, before any work starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from forethought.arguments import input_file, input_folder, names_of, or_empty, output_file, output_folder, positive_seconds


def test_an_input_file_is_a_file_that_exists(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\n")
    assert input_file(str(job)) == job
    with pytest.raises(argparse.ArgumentTypeError, match=r"^.*missing\.yaml: no such file$"):
        input_file(str(tmp_path / "missing.yaml"))
    with pytest.raises(argparse.ArgumentTypeError, match=r": is a folder, not a file$"):
        input_file(str(tmp_path))


def test_an_input_folder_is_a_folder_that_exists(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert input_folder(str(tmp_path)) == tmp_path
    with pytest.raises(argparse.ArgumentTypeError, match=r"^.*missing: no such folder$"):
        input_folder(str(tmp_path / "missing"))
    with pytest.raises(argparse.ArgumentTypeError, match=r": is a file, not a folder$"):
        input_folder(str(tmp_path / "file"))


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "-inf", "soon", ""])
def test_a_wait_must_be_a_finite_number_of_seconds_above_zero(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="seconds"):
        positive_seconds(text)


def test_a_wait_in_seconds_keeps_its_value() -> None:
    assert positive_seconds("0.25") == 0.25 and positive_seconds("600") == 600.0


def test_an_output_folder_or_file_is_refused_where_nothing_can_be_written(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert output_folder(str(tmp_path / "new" / "deeper")) == tmp_path / "new" / "deeper"  # made when written
    assert output_file(str(tmp_path / "new" / "profile.json")) == tmp_path / "new" / "profile.json"
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a folder"):
        output_folder(str(tmp_path / "file" / "results"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder, not a file"):
        output_file(str(tmp_path))
    assert not (tmp_path / "new").exists()  # checking writes nothing that stays


def test_an_empty_list_means_none_and_names_come_from_their_set() -> None:
    assert or_empty(names_of(["e2", "kv_cost"]))("") == []
    assert or_empty(names_of(["e2", "kv_cost"]))("kv_cost,e2") == ["kv_cost", "e2"]
    with pytest.raises(argparse.ArgumentTypeError, match="^nearest: each must be one of e2, kv_cost$"):
        names_of(["e2", "kv_cost"])("e2,nearest")

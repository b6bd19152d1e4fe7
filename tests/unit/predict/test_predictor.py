from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from forethought.domain import InvalidField
from forethought.predict import (
    NO_HISTORY,
    QUANTILE_PERCENTS,
    ConversationHistory,
    Observation,
    ObservationStore,
    Predictor,
)

PROMPTS = [
    "Write a 2000 word essay on the history of the Roman empire.",
    "What is 2+2?",
    "Translate 'good morning' to French.",
]


def test_artifact_records_version_config_and_metrics(quick_artifact: Path) -> None:
    config = json.loads((quick_artifact / "config.json").read_text())
    assert config["version"] == 1
    assert config["formulation"] == "reg-l1"
    assert config["training"]["max_tokens"] == 96
    assert config["format"] == 4
    assert set(config["metrics"]["test"]) == {
        "proxy model (reg-l1)", "training mean", "linear on prompt length", "linear on previous answer length"}


def test_forecasts_are_distributions_with_monotone_quantiles(predictor: Predictor) -> None:
    forecasts = predictor.predict(PROMPTS)
    assert len(forecasts) == len(PROMPTS)
    for forecast in forecasts:
        values = [forecast.quantiles[percent] for percent in QUANTILE_PERCENTS]
        assert values == sorted(values) and values[0] >= 0
        assert sum(forecast.histogram) == pytest.approx(1.0)
        assert 0 <= forecast.bucket < 5 and forecast.source == "model"
        # the class forecast is the histogram's most probable class
        assert forecast.histogram[forecast.bucket] == max(forecast.histogram)


def test_observed_prompt_is_answered_from_the_cache(predictor: Predictor) -> None:
    predictor.observe("What is 2+2?", 7)
    [forecast] = predictor.predict(["what is  2+2?"])
    assert forecast.source == "cache"
    assert forecast.mean == 7.0 and set(forecast.quantiles.values()) == {7.0}
    assert predictor.forward_count == 0


def test_observe_then_refit_changes_predictions_and_version(predictor: Predictor, tmp_path: Path) -> None:
    unseen = "Tell me a long story number 1000 about dragons!"
    [before] = predictor.predict([unseen])
    for index in range(60):
        predictor.observe(f"Tell me a long story number {index} about dragons.", 480)
    new_dir = predictor.refit(tmp_path / "refit", epochs=40, learning_rate=5e-3)
    [after] = predictor.predict([unseen])
    assert predictor.version == 2
    assert json.loads((new_dir / "config.json").read_text())["version"] == 2
    assert after.source == "model"
    assert abs(np.log(after.mean / 480)) < abs(np.log(before.mean / 480)) / 2


def test_refit_learns_from_the_history_of_observed_requests(predictor: Predictor, tmp_path: Path) -> None:
    """Same prompt text, told apart only by how long the conversation's earlier answers were."""
    short, long = ConversationHistory((40, 60)), ConversationHistory((2400, 2000))
    for index in range(80):
        predictor.observe(f"Go on with part {index}.", *((12, short) if index % 2 else (400, long)))
    predictor.refit(tmp_path / "refit", epochs=300, learning_rate=1e-2)
    after_short, after_long = predictor.predict(["Go on with part 99."] * 2, [short, long])
    assert after_long.mean > 4 * after_short.mean


def test_observations_keep_their_history_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "obs.jsonl"
    ObservationStore(path).append(Observation("p", 3, ConversationHistory((10, 20))))
    path.write_text(path.read_text() + '{"prompt": "older line", "output_tokens": 4}\n')
    restored = ObservationStore(path).snapshot()
    assert [o.history for o in restored] == [ConversationHistory((10, 20)), NO_HISTORY]


def test_histories_must_pair_with_prompts(predictor: Predictor) -> None:
    with pytest.raises(InvalidField) as error:
        predictor.predict(PROMPTS, [NO_HISTORY])
    assert error.value.field == "histories"
    assert error.value.rule == "must be empty or hold one history per prompt (3), got 1"


def test_refit_needs_observations(predictor: Predictor) -> None:
    with pytest.raises(ValueError, match="at least 8 observations"):
        predictor.refit()


def test_reload_while_predicting_concurrently_never_fails(predictor: Predictor, quick_artifact: Path) -> None:
    errors: list[BaseException] = []
    results: list[int] = []
    stop = threading.Event()

    def keep_predicting() -> None:
        while not stop.is_set():
            try:
                results.append(len(predictor.predict(PROMPTS)))
            except BaseException as error:  # the assertion below reports it
                errors.append(error)

    threads = [threading.Thread(target=keep_predicting) for _ in range(2)]
    for thread in threads:
        thread.start()
    versions = [predictor.reload(quick_artifact) for _ in range(2)]
    stop.set()
    for thread in threads:
        thread.join()
    assert errors == [] and versions == [1, 1]
    assert results and set(results) == {len(PROMPTS)}


@pytest.mark.parametrize(
    ("prompts", "field", "rule"),
    [
        (["ok", ""], "prompts[1]", "must not be empty"),
        (["   \n"], "prompts[0]", "must not be empty"),
        ([None], "prompts[0]", "must be a string"),
    ],
    ids=["empty", "blank", "not-a-string"],
)
def test_invalid_prompt_names_the_field_and_rule(predictor: Predictor, prompts: list, field: str, rule: str) -> None:
    with pytest.raises(InvalidField) as error:
        predictor.predict(prompts)
    assert (error.value.field, error.value.rule) == (field, rule)


def test_a_prompt_past_the_limit_is_forecast_and_observed_as_its_two_ends(tmp_path: Path, quick_artifact: Path) -> None:
    predictor = Predictor.load(quick_artifact, observations_path=tmp_path / "observations.jsonl", max_prompt_chars=40)
    opening, middle, ending = "Summarise this report. ", "filler words " * 50, " Answer in one short line."
    long_prompt = opening + middle + ending
    ends = long_prompt[:20] + long_prompt[-20:]
    [forecast] = predictor.predict([long_prompt])
    [of_the_ends] = predictor.predict([ends])
    assert forecast.source == "model" and forecast.mean == pytest.approx(of_the_ends.mean)
    predictor.observe(long_prompt, 33)
    assert [observation.prompt for observation in predictor.store.snapshot()] == [ends]
    [again] = predictor.predict([opening + "other words " * 40 + ending])  # the same ends: the same prompt as read
    assert again.source == "cache" and again.mean == 33.0


def test_observe_rejects_a_negative_length(predictor: Predictor) -> None:
    with pytest.raises(InvalidField) as error:
        predictor.observe("prompt", -1)
    assert error.value.field == "actual_tokens"


def test_an_artifact_of_an_older_format_is_refused_with_the_fix(quick_artifact: Path, tmp_path: Path) -> None:
    from forethought.predict.artifact import artifact_problem

    older = tmp_path / "older"
    older.mkdir()
    config = json.loads((quick_artifact / "config.json").read_text())
    (older / "config.json").write_text(json.dumps(dict(config, format=1)))
    assert artifact_problem(quick_artifact) is None
    assert artifact_problem(older) == f"the predictor in {older} has artifact format 1, this version reads (2, 3, 4)"
    assert artifact_problem(tmp_path / "none") == f"no trained predictor in {tmp_path / 'none'}"
    with pytest.raises(ValueError, match="train-predictor"):
        Predictor.load(older)


def test_a_config_without_its_fields_is_a_problem_named_before_any_weights_load(quick_artifact: Path, tmp_path: Path) -> None:
    from forethought.predict.artifact import artifact_problem

    config = json.loads((quick_artifact / "config.json").read_text())
    for name, text in (("lacking", json.dumps({key: value for key, value in config.items() if key != "max_tokens"})),
                       ("garbled", json.dumps(dict(config, formulation="sideways"))), ("cut", "{\"format\": 4, ")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(text)
    assert artifact_problem(tmp_path / "lacking") == f"{tmp_path / 'lacking' / 'config.json'} lacks the field 'max_tokens'"
    assert "holds a value this version cannot read ('sideways' is not a valid Formulation)" in artifact_problem(tmp_path / "garbled")
    assert artifact_problem(tmp_path / "cut").startswith(f"{tmp_path / 'cut' / 'config.json'} is not JSON")


def test_weights_cut_short_are_an_unreadable_artifact_naming_the_folder(quick_artifact: Path, tmp_path: Path) -> None:
    from forethought.predict.artifact import HEAD_FILE, UnreadableArtifact

    cut = tmp_path / "cut"
    shutil.copytree(quick_artifact, cut)
    head = cut / HEAD_FILE
    head.write_bytes(head.read_bytes()[:100])
    with pytest.raises(UnreadableArtifact, match=f"the predictor in {re.escape(str(cut))} does not load \\(SafetensorError: "):
        Predictor.load(cut)


def test_a_folder_name_too_long_to_open_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    from forethought.predict.artifact import artifact_problem

    problem = artifact_problem(tmp_path / ("x" * 300))
    assert problem is not None and problem.startswith("cannot read") and "too long" in problem

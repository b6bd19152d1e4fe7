from __future__ import annotations

import numpy as np
import pytest
from forethought.predict.buckets import ResidualSpread
from forethought.predict.calibration import OnlineCalibration


def test_the_online_calibration_keeps_a_bounded_number_of_models() -> None:
    calibration = OnlineCalibration(prior=0.0, min_spread=2, max_models=2)
    for model in ("a", "b", "c"):
        calibration.add(model, 100, 2.0)
        calibration.add(model, 100, 2.0)
    assert (calibration.count("a"), calibration.count("b"), calibration.count("c")) == (0, 2, 2)
    shift, spread = calibration.adjust("c", ResidualSpread((0.0,)))
    assert shift == pytest.approx(np.log1p(100) - 2.0) and spread.residuals == (0.0, 0.0)
    assert calibration.adjust("a", ResidualSpread((0.5,))) == (0.0, ResidualSpread((0.5,)))


def test_few_residuals_move_the_forecast_part_of_the_way() -> None:
    calibration = OnlineCalibration(prior=10.0, min_spread=20)
    for _ in range(10):
        calibration.add("m", 99, np.log1p(9))  # the model answers 10x the estimate
    shift, spread = calibration.adjust("m", ResidualSpread((0.1,)))
    assert shift == pytest.approx(0.5 * np.log(10), rel=0.01)  # 10 / (10 + 10) of the median residual
    assert spread == ResidualSpread((0.1,))  # too few residuals for their own spread

"""Accuracy of length forecasts, as reported in SSJF section 4.3 (5-class accuracy and F1) plus the
regression view (MAE, Kendall tau) and calibration of the forecast quantiles."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import kendalltau

from forethought.predict.buckets import LengthBuckets, ResidualSpread


@dataclass(frozen=True)
class AccuracyReport:
    accuracy: float
    macro_f1: float
    mae_tokens: float
    kendall_tau: float
    share_below_p10: float
    share_below_p90: float
    samples: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def macro_f1(true_classes: np.ndarray, predicted_classes: np.ndarray, count: int) -> float:
    scores = []
    for label in range(count):
        true_positive = float(np.sum((predicted_classes == label) & (true_classes == label)))
        predicted, actual = float(np.sum(predicted_classes == label)), float(np.sum(true_classes == label))
        scores.append(0.0 if predicted + actual == 0 else 2 * true_positive / (predicted + actual))
    return float(np.mean(scores))


def accuracy_report(
    true_lengths: np.ndarray,
    log_estimates: np.ndarray,
    predicted_classes: np.ndarray,
    buckets: LengthBuckets,
    spread: ResidualSpread,
) -> AccuracyReport:
    """Scores of one predictor on held-out samples; quantiles come from ``spread``."""
    true_classes = buckets.index(true_lengths)
    quantiles = spread.quantiles(log_estimates)
    constant = bool(np.all(log_estimates == log_estimates[0]))
    tau = 0.0 if constant else float(kendalltau(true_lengths, log_estimates).statistic)
    return AccuracyReport(
        accuracy=float(np.mean(true_classes == predicted_classes)),
        macro_f1=macro_f1(true_classes, predicted_classes, buckets.count),
        mae_tokens=float(np.mean(np.abs(np.expm1(log_estimates) - true_lengths))),
        kendall_tau=tau,
        share_below_p10=float(np.mean(true_lengths <= quantiles[:, 0])),
        share_below_p90=float(np.mean(true_lengths <= quantiles[:, -1])),
        samples=len(true_lengths),
    )


def mean_report(reports: list[AccuracyReport]) -> AccuracyReport:
    """Field-wise mean of reports on the same samples (e.g. heads trained with different seeds)."""
    fields = {name: float(np.mean([getattr(report, name) for report in reports])) for name in AccuracyReport.__dataclass_fields__}
    return AccuracyReport(**{**fields, "samples": reports[0].samples})


def fit_log_linear(features: np.ndarray, lengths: np.ndarray) -> tuple[float, float]:
    """Least squares of log1p(length) on log1p(feature): the prompt-length baseline."""
    design = np.stack([np.ones_like(features, dtype=float), np.log1p(features)], axis=1)
    (intercept, slope), *_ = np.linalg.lstsq(design, np.log1p(lengths), rcond=None)
    return float(intercept), float(slope)


def format_table(rows: dict[str, AccuracyReport]) -> str:
    """Markdown table, one row per predictor."""
    lines = [
        "| predictor | 5-class acc | macro F1 | MAE (tokens) | Kendall tau | P(y<=p10) | P(y<=p90) | n |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, report in rows.items():
        lines.append(
            f"| {name} | {report.accuracy:.3f} | {report.macro_f1:.3f} | {report.mae_tokens:.1f} | "
            f"{report.kendall_tau:.3f} | {report.share_below_p10:.3f} | {report.share_below_p90:.3f} | {report.samples} |"
        )
    return "\n".join(lines)

"""Accuracy of length forecasts, as reported in SSJF section 4.3 (5-class accuracy and F1) plus the
regression view (MAE, Kendall tau) and calibration of the forecast quantiles.

On labels with several answers per prompt (CASTILLO), ``pair_report`` scores forecasts against the pair
mean and against every single answer, with SSJF's class edges (the served model's p25/p50/p75/p99 output
length: four classes of about a quarter and one of 1%) and with quintiles; the same report for the pair
means themselves is the ceiling, since no forecast knows which of a pair's answers will come. SSJF's own
Kendall tau ranks its predicted class, not a length, against the true length: ``tau_ssjf_class`` is that
figure, beside the tau of the point forecast itself.
"""

from __future__ import annotations

from collections.abc import Sequence
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


SSJF_EDGE_PERCENTS = (25, 50, 75, 99)
QUINTILE_PERCENTS = (20, 40, 60, 80)


@dataclass(frozen=True)
class PairReport:
    """Scores of point forecasts (and their p90) on pairs answered several times.

    ``tau_samples``, the accuracies, MAE and coverage count every answer, each scored against its pair's
    forecast; ``tau_pair_mean`` ranks the pair means. Coverage is NaN where no p90 was given.
    """

    tau_pair_mean: float
    tau_samples: float
    tau_ssjf_class: float  # the forecast's SSJF-edge class against each answer's length (SSJF's definition)
    ssjf_accuracy: float
    quintile_accuracy: float
    mae_tokens: float
    share_below_p90: float
    pairs: int
    samples: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _tau(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return 0.0
    return float(kendalltau(a, b).statistic)


def pair_report(points: np.ndarray, sizes: Sequence[Sequence[int]], p90s: np.ndarray | None = None,
                spread: ResidualSpread | None = None) -> PairReport:
    """Scores of ``points`` (tokens, one per pair) against the pairs' answer lengths ``sizes``; the class
    edges are the percentiles of all of ``sizes`` (the served model's output lengths). With the forecasts'
    ``spread`` the class forecast is each forecast's most probable class, else the class of its point."""
    points = np.asarray(points, float)
    counts = np.asarray([len(row) for row in sizes])
    samples = np.concatenate([np.asarray(row, float) for row in sizes])
    repeated = np.repeat(points, counts)
    classes = []
    for percents in (SSJF_EDGE_PERCENTS, QUINTILE_PERCENTS):
        buckets = LengthBuckets(tuple(float(edge) for edge in np.percentile(samples, percents)))
        predicted = (buckets.index(points) if spread is None
                     else spread.histograms(np.log1p(points), buckets).argmax(axis=1))
        classes.append((np.repeat(predicted, counts), buckets.index(samples)))
    accuracies = [float(np.mean(predicted == truth)) for predicted, truth in classes]
    coverage = float("nan") if p90s is None else float(np.mean(samples <= np.repeat(np.asarray(p90s, float), counts)))
    means = np.asarray([np.mean(row) for row in sizes])
    return PairReport(
        tau_pair_mean=_tau(points, means), tau_samples=_tau(repeated, samples),
        tau_ssjf_class=_tau(classes[0][0], samples), ssjf_accuracy=accuracies[0], quintile_accuracy=accuracies[1],
        mae_tokens=float(np.mean(np.abs(repeated - samples))), share_below_p90=coverage,
        pairs=len(points), samples=len(samples),
    )


def ceiling_report(sizes: Sequence[Sequence[int]]) -> PairReport:
    """What an oracle knowing each pair's true mean scores on the same answers."""
    return pair_report(np.asarray([np.mean(row) for row in sizes]), sizes)


def mean_pair_report(reports: Sequence[PairReport]) -> PairReport:
    """The unweighted mean over models (each model counts once, whatever its number of pairs)."""
    fields = {name: float(np.mean([getattr(report, name) for report in reports])) for name in PairReport.__dataclass_fields__}
    return PairReport(**{**fields, "pairs": sum(r.pairs for r in reports), "samples": sum(r.samples for r in reports)})


def format_pair_table(rows: dict[str, tuple[PairReport, PairReport]]) -> str:
    """Markdown table, one row per model: each score with the ceiling's beside it (forecast / ceiling)."""
    lines = [
        "| model | pairs | tau vs pair mean | tau vs samples | SSJF-class tau vs samples | SSJF-edge acc | quintile acc | "
        "MAE (tokens) | P(y<=p90) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (report, ceiling) in rows.items():
        lines.append(
            f"| {name} | {report.pairs} | {report.tau_pair_mean:.3f} / {ceiling.tau_pair_mean:.3f} | "
            f"{report.tau_samples:.3f} / {ceiling.tau_samples:.3f} | "
            f"{report.tau_ssjf_class:.3f} / {ceiling.tau_ssjf_class:.3f} | {report.ssjf_accuracy:.3f} / {ceiling.ssjf_accuracy:.3f} | "
            f"{report.quintile_accuracy:.3f} / {ceiling.quintile_accuracy:.3f} | {report.mae_tokens:.1f} / {ceiling.mae_tokens:.1f} | "
            f"{report.share_below_p90:.3f} |"
        )
    return "\n".join(lines)

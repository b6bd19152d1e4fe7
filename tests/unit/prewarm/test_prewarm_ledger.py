"""PrewarmLedger: TTL expiry counted as waste, uses before expiry counted as hits (Hermes 3.4)."""

from __future__ import annotations

import pytest
from forethought.prewarm import ExpiredEntry, PrewarmKind, PrewarmLedger, PrewarmMetrics


def test_idle_entry_expires_after_ttl_as_waste(clock) -> None:
    ledger = PrewarmLedger(ttl_s=30.0, clock=clock)
    ledger.warmed(PrewarmKind.TOOL, "python-sandbox")
    clock.advance(29.0)
    assert ledger.expire() == []
    clock.advance(6.0)

    assert ledger.expire() == [ExpiredEntry(PrewarmKind.TOOL, "python-sandbox", 35.0)]
    assert ledger.metrics() == PrewarmMetrics(warmed=1, wasted=1, wasted_idle_s=35.0)
    assert ledger.use(PrewarmKind.TOOL, "python-sandbox") is False


def test_use_before_expiry_is_a_hit_and_consumes_the_entry(clock) -> None:
    ledger = PrewarmLedger(ttl_s=30.0, clock=clock)
    ledger.warmed(PrewarmKind.MODEL, "m")
    clock.advance(10.0)

    assert ledger.use(PrewarmKind.MODEL, "m") is True
    assert ledger.use(PrewarmKind.MODEL, "m") is False
    clock.advance(100.0)
    assert ledger.expire() == []
    assert ledger.metrics() == PrewarmMetrics(warmed=1, hits=1)


def test_a_hit_counts_its_warm_up_as_benefit_per_kind(clock) -> None:
    ledger = PrewarmLedger(ttl_s=30.0, clock=clock)
    ledger.warmed(PrewarmKind.LORA, "a", warmup_s=0.05)
    ledger.warmed(PrewarmKind.TOOL, "python-sandbox", warmup_s=0.5)
    ledger.warmed(PrewarmKind.TOOL, "container", warmup_s=3.0)
    clock.advance(1.0)
    assert ledger.use(PrewarmKind.LORA, "a") and ledger.use(PrewarmKind.TOOL, "python-sandbox")
    clock.advance(30.0)
    ledger.expire()
    assert ledger.metrics(PrewarmKind.LORA) == PrewarmMetrics(warmed=1, hits=1, benefit_s=0.05)
    assert ledger.metrics(PrewarmKind.TOOL) == PrewarmMetrics(warmed=2, hits=1, benefit_s=0.5, wasted=1, wasted_idle_s=31.0)
    assert ledger.metrics() == PrewarmMetrics(warmed=3, hits=2, benefit_s=0.55, wasted=1, wasted_idle_s=31.0)


def test_rewarming_restarts_the_ttl(clock) -> None:
    ledger = PrewarmLedger(ttl_s=30.0, clock=clock)
    ledger.warmed(PrewarmKind.LORA, "a")
    clock.advance(20.0)
    ledger.warmed(PrewarmKind.LORA, "a")
    clock.advance(20.0)
    assert ledger.expire() == []
    assert ledger.is_waiting(PrewarmKind.LORA, "a")


@pytest.mark.parametrize(
    ("unsupported", "expected"),
    [(True, PrewarmMetrics(unsupported=1)), (False, PrewarmMetrics(failed=1))],
    ids=["unsupported", "failed"],
)
def test_declined_prewarms_are_counted_by_cause(clock, unsupported: bool, expected: PrewarmMetrics) -> None:
    ledger = PrewarmLedger(ttl_s=1.0, clock=clock)
    ledger.declined(PrewarmKind.TOOL, unsupported=unsupported)
    assert ledger.metrics() == expected == ledger.metrics(PrewarmKind.TOOL)
    assert ledger.metrics(PrewarmKind.MODEL) == PrewarmMetrics()


def test_ttl_must_be_positive(clock) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        PrewarmLedger(ttl_s=0.0, clock=clock)

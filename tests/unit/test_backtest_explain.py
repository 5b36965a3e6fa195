"""Where the cost goes: the sentence a dominant constraint gets, and coverage of the recorded bands."""

from __future__ import annotations

import numpy as np
import pytest

from presage_scaler.api.binding_constraints import FORECAST, Constraint
from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.backtest.explain import coverage, note
from presage_scaler.backtest.replay import PresageRecord

POLICY = PolicySpec(max_replicas=10)


@pytest.mark.parametrize("constraint", Constraint)
def test_every_constraint_has_a_sentence_when_it_dominates(constraint):
    sentence = note({constraint: 0.7, FORECAST: 0.3}, POLICY)
    assert sentence.startswith(f"{constraint} held 70 % of decisions: ")
    assert sentence.endswith(".")


def test_the_guard_sentence_names_the_setting():
    sentence = note({"ForecastUncertainty": 0.68, FORECAST: 0.32}, POLICY)
    assert "too noisy for maxRelativeSpread 0.25" in sentence


@pytest.mark.parametrize(
    "shares", [{FORECAST: 0.9, "ScaleDownWindow": 0.1}, {"ScaleDownWindow": 0.5, FORECAST: 0.5}, {}]
)
def test_no_sentence_when_no_constraint_holds_most_decisions(shares):
    assert note(shares, POLICY) == ""


def test_coverage_counts_decisions_after_the_warmup_whose_window_was_observed():
    signal = np.array([1.0, 5.0, 2.0, 2.0, 9.0, 1.0])
    record = PresageRecord(
        steps=np.array([1, 2, 3, 4, 5]),
        replicas=np.ones(5, dtype=np.int64),
        upper=np.array([0.0, 5.0, 1.0, 9.0, 9.0]),
        lower=np.array([0.0, 2.0, 1.0, 1.0, 1.0]),
        forecast_steps=np.array([1, 2, 3, 4, 5]),
        window_starts=np.array([1, 2, 3, 4, 5]),
        window=2,
        calibrated=np.array([True, True, False, True, True]),
        constraints=("", "", "", "", ""),
    )
    # Counted: steps 2, 3, 4 (from step 2 on; step 5's window runs past the end). Window maxima 2, 9, 9.
    covered = coverage(record, signal, report_from_step=2)
    assert covered.decisions == 3
    assert covered.target == pytest.approx(2 / 3)
    assert covered.scale_down == pytest.approx(1 / 3)
    assert covered.calibrated == pytest.approx(2 / 3)

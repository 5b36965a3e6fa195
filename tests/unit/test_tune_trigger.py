"""The seasonal trigger in ``presage tune``: every utilization replayed at once decides as the
backtest's policy does one decision at a time, is measured as the backtest measures it, and is tuned
on the in-sample part alone; tune's table, tune.json and report carry it."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.backtest.config import Overrides, backend_spec, make_backend, scaler_spec
from presage_scaler.backtest.runner import Plan, Setup, plan, run_trigger
from presage_scaler.backtest.trace import Trace
from presage_scaler.cli.main import main
from presage_scaler.tune.output import document, table, trigger_line
from presage_scaler.tune.report import render
from presage_scaler.tune.search import Figures, Slo
from presage_scaler.tune.trigger import UTILIZATIONS, trigger_counts
from presage_scaler.tune.tuner import (
    Outcome,
    TuneResult,
    TuneSetup,
    outcome,
    trigger_utilizations,
    tune,
    tuned_trigger,
)
from tests.unit.test_tune_parts import START, STEP, daily_trace

SLO = Slo(1.0)


def trigger_plan(trace: Trace, every: int, lead: int, low: int, high: int, per_replica: float) -> Plan:
    data = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}, "resolution": "5m"},
        "capacity": {"perReplica": str(per_replica)},
        "leadTime": {"static": f"{5 * lead}m"},
        "interval": f"{5 * every}m",
        "policy": {"minReplicas": low, "maxReplicas": high},
    }
    spec = scaler_spec(trace, data, Overrides())
    return plan(trace, Setup(spec=spec, backend=make_backend(backend_spec(None)), warmup=timedelta(days=7)))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    every=st.integers(1, 4),
    lead=st.integers(1, 3),
    low=st.integers(1, 3),
    high=st.integers(4, 120),
    per_replica=st.sampled_from([7.5, 20.0, 33.0]),
    utilizations=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=5),
)
def test_property_every_utilization_at_once_decides_as_the_policy_one_at_a_time(
    seed, every, lead, low, high, per_replica, utilizations
):
    """Over a week and a day, so that the second week's decisions read last week's peaks, and with
    bounds that bind."""
    trace = daily_trace(8, seed=seed)
    the_plan = trigger_plan(trace, every, lead, low, high, per_replica)
    counts = trigger_counts(the_plan, utilizations)
    steps = np.asarray(the_plan.schedule.decisions(len(trace)))
    assert np.isfinite(the_plan.week_ago[steps[-1]])
    for column, utilization in enumerate(utilizations):
        np.testing.assert_array_equal(counts[:, column], run_trigger(the_plan, utilization).desired[steps])
    kept = trigger_counts(the_plan, utilizations, kept_from=7)
    np.testing.assert_array_equal(kept, counts[7:])


def figures(under: float, hours: float) -> Figures:
    """Figures taken as they are (no spells counted, so no margin)."""
    return Figures(under_pct=under, unserved_pct=0.0, replica_hours=hours, cost_vs_oracle=hours / 100)


def test_the_trigger_tuned_is_the_cheapest_utilization_meeting_the_level_in_sample():
    grid = trigger_utilizations(0.75)
    assert grid == sorted(UTILIZATIONS, reverse=True) and grid[0] == 0.95 and grid[-1] == 0.3
    # In-sample, cost falls as the utilization rises, and the level is met up to 80 %. The held-out
    # figures (all alike and cheap) never enter the choice.
    found = [Outcome(figures(0.5 if u <= 0.8 else 2.0, 200 - 100 * u), figures(0.0, 1.0)) for u in grid]
    tuned = tuned_trigger(found, grid, 0.75, SLO)
    assert tuned.met and tuned.chosen.utilization == 0.8
    assert tuned.asked.utilization == 0.75 and tuned.asked.in_sample.replica_hours == 125.0
    assert [t.utilization for t in tuned.trials] == grid


def test_when_no_utilization_meets_the_level_the_least_under_provisioned_is_taken():
    grid = trigger_utilizations(0.75)
    found = [Outcome(figures(5.0 + u, 200 - 100 * u), figures(0.0, 1.0)) for u in grid]
    tuned = tuned_trigger(found, grid, 0.75, SLO)
    assert not tuned.met and tuned.chosen.utilization == 0.3


def test_a_utilization_asked_off_the_grid_is_replayed_and_reported_but_not_chosen_from():
    grid = trigger_utilizations(0.625)
    assert grid[-1] == 0.625 and len(grid) == len(UTILIZATIONS) + 1
    found = [Outcome(figures(0.0 if u == 0.625 else 5.0, 10.0 if u == 0.625 else 100.0), figures(0, 1)) for u in grid]
    tuned = tuned_trigger(found, grid, 0.625, SLO)
    assert tuned.asked.utilization == 0.625 and tuned.asked.in_sample.replica_hours == 10.0
    assert 0.625 not in [t.utilization for t in tuned.trials] and tuned.chosen.utilization != 0.625


# --- in a whole tuning run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace() -> Trace:
    """Sixteen days: tune holds out the last seven and chooses on the two before, which read the week
    before them."""
    return daily_trace(16, seed=5)


@pytest.fixture(scope="module")
def result(trace: Trace) -> TuneResult:
    setup = TuneSetup(
        spec=None,
        overrides=Overrides(per_replica=20.0, lead_time=timedelta(minutes=10)),
        backend=backend_spec(None),
        slo=SLO,
        warmup=timedelta(days=7),
    )
    return tune(trace, setup)


def test_each_utilization_has_the_backtests_figures_on_both_parts(result):
    """What tune measured at once is what the backtest's simulation of each utilization measures."""
    assert np.isfinite(result.plan.week_ago[result.split.report_from])  # in-sample, a week ago is there
    for trial in (result.trigger.trials[0], result.trigger.chosen, result.trigger.asked):
        simulated = outcome(result.plan, run_trigger(result.plan, trial.utilization), result.split, result.oracle)
        assert (trial.in_sample, trial.held_out) == (simulated.in_sample, simulated.held_out)


def test_the_trigger_is_tuned_on_the_in_sample_part_alone(result):
    trigger = result.trigger
    met = [t for t in trigger.trials if SLO.met(t.in_sample)]
    assert trigger.met and trigger.chosen in met
    assert trigger.chosen.in_sample.replica_hours == min(t.in_sample.replica_hours for t in met)
    assert trigger.asked.utilization == 0.75 and trigger.asked in trigger.trials


def test_tune_shows_the_trigger_as_set_and_tuned(result, trace):
    lines = table(result).splitlines()
    rows = {line[:24].rstrip(): line[24:].split() for line in lines if line.startswith("seasonal trigger")}
    tuned = result.trigger.chosen
    assert rows["seasonal trigger, tuned"][-1] == f"{tuned.held_out.cost_vs_oracle:.2f}x"
    assert rows["seasonal trigger"][0] == f"{result.trigger.asked.in_sample.under_pct:.2f}"
    line = trigger_line(result)
    assert line in lines
    assert line.startswith(f"seasonal trigger on last week's demand, tuned: {round(100 * tuned.utilization)}% target")
    assert "(as set: 75%), the cheapest of 30%–95% that met the service level in-sample" in line
    assert f"held out, {tuned.held_out.under_pct:.2f} % under-provisioned" in line
    written = document(result)
    assert written["seasonal_trigger"]["utilization"] == "75%"
    assert written["seasonal_trigger_tuned"]["utilization"] == f"{round(100 * tuned.utilization)}%"
    assert written["seasonal_trigger_tuned"]["meets_slo"] is True
    assert written["seasonal_trigger_tuned"]["held_out"] == tuned.held_out.as_dict()
    assert [c["utilization"] for c in written["seasonal_trigger_candidates"]][:2] == ["95%", "94%"]
    html = render(result)
    assert "seasonal trigger, tuned capacity" in html and "seasonal trigger, tuned</td>" in html
    assert len(result.held_out_capacity["seasonal trigger, tuned"]) == result.split.end - result.split.held_out_from


def test_the_flag_sets_the_trigger_tune_reports_beside_the_tuned_one(tmp_path, trace):
    path = tmp_path / "daily.csv"
    rows = (f"{(START + i * STEP).isoformat()},{value!r}" for i, value in enumerate(trace.values.tolist()))
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    flags = ["--per-replica", "20", "--lead-time", "10m", "--slo", "1%", "--jobs", "1", "--no-progress"]
    code = main(["tune", str(path), *flags, "--trigger-utilization", "62.5%", "--out", str(tmp_path / "out")])
    assert code in (0, 3)
    written = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert written["seasonal_trigger"]["utilization"] == "62.5%"
    assert "62.5%" not in [c["utilization"] for c in written["seasonal_trigger_candidates"]]

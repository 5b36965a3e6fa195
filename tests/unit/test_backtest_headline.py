"""The backtest's headline sentence and its advice line, from summary documents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from presage_scaler.backtest.history import HOLDOUT, MIN_IN_SAMPLE, MIN_PART, TRUSTED
from presage_scaler.backtest.output import CLEARLY_CHEAPER, advice, headline


def document(presage_hours: float, static_hours: float, after_warmup: timedelta = timedelta(days=21)) -> dict[str, Any]:
    def policy(under: float, hours: float, headroom: str | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"under_provisioned_pct": under, "replica_hours": hours, "cost_vs_oracle": hours / 100}
        if headroom is not None:
            entry["headroom"] = headroom
        return entry

    reported_from = datetime(2024, 1, 3, tzinfo=UTC)
    return {
        "parameters": {
            "reported_from": reported_from.isoformat(),
            "end": (reported_from + after_warmup).isoformat(),
        },
        "presage": policy(0.132, presage_hours),
        "static": policy(0.382, static_hours),
        "reactive": policy(18.667, 106, "10%"),
        "reactive_cost_matched": policy(1.753, presage_hours, "85.1562%"),
        "seasonal_trigger": {**policy(0.278, 184), "utilization": "75%"},
        "seasonal_trigger_cost_matched": {**policy(0.139, presage_hours), "utilization": "69.5652%"},
        "oracle": policy(0.0, 100),
    }


def test_headline_names_static_and_both_reactive_hpas():
    line = headline(document(177, 313))
    assert line.startswith("presage was under-provisioned 0.132 % of the time at 1.77x the oracle's replica-hours")
    assert "43 % cheaper than a static count (0.382 % under-provisioned)" in line
    assert "a reactive HPA was under-provisioned 18.667 % of the time" in line
    assert "1.753 % with the headroom that makes it cost the same" in line


def test_headline_has_one_clause_on_the_seasonal_trigger_as_set_and_at_presages_cost():
    line = headline(document(177, 313))
    assert line.endswith(
        "; a seasonal trigger on last week's demand at 75% utilization was under-provisioned 0.278 % at 1.84x, "
        "and 0.139 % at presage's cost."
    )


def test_headline_says_dearer_when_static_costs_less():
    assert "10 % dearer than a static count" in headline(document(110, 100))


@pytest.mark.parametrize(
    ("presage_hours", "advised"),
    [(100 * (1 - CLEARLY_CHEAPER), False), (100 * (1 - CLEARLY_CHEAPER) + 0.01, True), (97, True), (120, True)],
)
def test_advice_points_to_tune_unless_clearly_cheaper_than_static(presage_hours: float, advised: bool):
    line = advice(document(presage_hours, 100))
    assert bool(line) is advised
    if advised:
        assert "presage tune" in line and "--slo" in line


def test_on_a_trace_long_enough_to_advise_the_advice_is_to_tune():
    line = advice(document(120, 100, after_warmup=TRUSTED + HOLDOUT))
    assert line.endswith(
        "run `presage tune` with the same arguments and `--slo 1%` to find the cheapest policy that meets your "
        "service level, judged on days it did not choose on."
    )


@pytest.mark.parametrize(
    ("after_warmup", "days"),
    [(TRUSTED + HOLDOUT - timedelta(minutes=5), "1 more day"), (timedelta(days=12), "2 more days")],
)
def test_on_a_trace_too_short_to_advise_the_advice_says_what_tune_needs(after_warmup: timedelta, days: str):
    """The ELB example's case: tune runs on the trace, but its verdict can only be to keep the start."""
    line = advice(document(120, 100, after_warmup=after_warmup))
    assert f"it was chosen on {TRUSTED.days * 24}h after the warm-up and checked on the {HOLDOUT.days * 24}h" in line
    assert f"so it needs {days} of history" in line
    assert "Run it meanwhile with the same arguments and `--slo 1%` to see the candidates it finds" in line
    assert "keep the starting spec" in line


def test_on_a_trace_too_short_to_tune_the_advice_says_so():
    line = advice(document(120, 100, after_warmup=MIN_IN_SAMPLE + MIN_PART - timedelta(hours=1)))
    assert f"so it needs {(TRUSTED + HOLDOUT - MIN_IN_SAMPLE - MIN_PART).days + 1} more days of history" in line
    assert line.endswith(f"(and at least {(MIN_IN_SAMPLE + MIN_PART).days * 24}h after the warm-up to run at all).")
    assert "Run it meanwhile" not in line

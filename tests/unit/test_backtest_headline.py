"""The backtest's headline sentence and its advice line, from summary documents."""

from __future__ import annotations

from typing import Any

import pytest

from presage_scaler.backtest.output import CLEARLY_CHEAPER, advice, headline


def document(presage_hours: float, static_hours: float) -> dict[str, Any]:
    def policy(under: float, hours: float, headroom: str | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"under_provisioned_pct": under, "replica_hours": hours, "cost_vs_oracle": hours / 100}
        if headroom is not None:
            entry["headroom"] = headroom
        return entry

    return {
        "presage": policy(0.132, presage_hours),
        "static": policy(0.382, static_hours),
        "reactive": policy(18.667, 106, "10%"),
        "reactive_cost_matched": policy(1.753, presage_hours, "85.1562%"),
        "oracle": policy(0.0, 100),
    }


def test_headline_names_static_and_both_reactive_hpas():
    line = headline(document(177, 313))
    assert line.startswith("presage was under-provisioned 0.132 % of the time at 1.77x the oracle's replica-hours")
    assert "43 % cheaper than a static count (0.382 % under-provisioned)" in line
    assert "a reactive HPA was under-provisioned 18.667 % of the time" in line
    assert "1.753 % with the headroom that makes it cost the same" in line


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

"""``SpecAdjusted``: what a scaler is sized with other than its spec states or probably means (a
defaulted capacity, an absolute headroom), and the lead time and horizon an evaluation used against
what the spec asked for."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.controller.condition_updates import SPEC_ADJUSTED, spec_adjusted_condition
from presage_scaler.engine.adjustments import Adjustment, planned_adjustments, spec_adjustments
from presage_scaler.engine.leadtime import MAX_FORECAST_STEPS, HorizonError, resolve_horizon, resolve_lead_time

OBSERVED = {"source": "Observed", "observed": {"address": "http://p:9090", "query": "lead_seconds"}}


def spec(signal: dict[str, Any] | None = None, **top: Any) -> PredictiveScalerSpec:
    raw = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}, "resolution": "1m", **(signal or {})},
        "capacity": {"perReplica": 10},
        "policy": {"maxReplicas": 100},
        "interval": "1m",
        **top,
    }
    return parse(PredictiveScalerSpec, raw)


def adjusted(s: PredictiveScalerSpec, max_horizon: int | None = None, observed: float | None = None):
    return spec_adjustments(s, resolve_lead_time(s.lead_time, observed), max_horizon)


def used_steps(s: PredictiveScalerSpec, max_horizon: int | None, step: timedelta = timedelta(minutes=1)) -> int:
    """What the evaluation asks the backend for: the number every message must agree with."""
    lead = resolve_lead_time(s.lead_time).value
    return resolve_horizon(s.forecast, lead, s.interval, step, max_horizon)


@pytest.mark.parametrize(
    ("s", "max_horizon"),
    [
        (spec(), None),  # lead 2m, default horizon 8 steps, window 3
        (spec(), 64),
        (spec(forecast={"horizon": "1h"}), 64),
        (spec(leadTime={"static": "15m"}), None),  # leadTime.max is inclusive
    ],
)
def test_as_specified(s: PredictiveScalerSpec, max_horizon: int | None) -> None:
    assert adjusted(s, max_horizon) == ()
    condition = spec_adjusted_condition(adjusted(s, max_horizon))
    assert (condition.type, condition.status, condition.reason) == (SPEC_ADJUSTED, "False", Reason.AS_SPECIFIED)


@pytest.mark.parametrize(
    ("lead_time", "observed", "says"),
    [
        ({"static": "20m"}, None, "leadTime.static 20m is above [leadTime.min, leadTime.max] = [30s, 15m]"),
        ({"static": "10s"}, None, "leadTime.static 10s is below [leadTime.min, leadTime.max] = [30s, 15m]"),
        (OBSERVED, 3600.0, "the leadTime.observed query's value is above [leadTime.min, leadTime.max]"),
        (OBSERVED, 3.0, "the leadTime.observed query's value is below [leadTime.min, leadTime.max]"),
        ({**OBSERVED, "min": "5m", "max": "5m"}, 3.0, "value is outside [leadTime.min, leadTime.max] = [5m, 5m]"),
    ],
)
def test_a_clamped_lead_time(lead_time: dict[str, Any], observed: float | None, says: str) -> None:
    s = spec(leadTime=lead_time)
    [adjustment] = adjusted(s, observed=observed)
    used = resolve_lead_time(s.lead_time, observed).value
    assert adjustment.reason == Reason.LEAD_TIME_CLAMPED
    assert says in adjustment.message
    assert adjustment.message.endswith(
        f"the scaler is sized for the lead time clamped into it, {format_duration(used)}"
    )


def test_an_explicit_horizon_cut_by_the_backend() -> None:
    s = spec(forecast={"horizon": "2h"})  # 120 steps, window 3
    [adjustment] = adjusted(s, 64)
    assert used_steps(s, 64) == 64
    assert adjustment.reason == Reason.HORIZON_CUT
    assert adjustment.message == (
        "forecast.horizon 2h at resolution 1m is 120 steps; cut to 64 steps (1h4m), the backend's maxHorizon 64; "
        "the sizing window is still covered"
    )


def test_a_cut_short_of_the_sizing_window_says_so() -> None:
    s = spec(leadTime={"static": "10m"}, interval="10m")  # window 20 steps, default horizon 40
    [adjustment] = adjusted(s, 16)
    assert adjustment.reason == Reason.HORIZON_CUT
    assert "the default horizon (4 × the lead time 10m) at resolution 1m is 40 steps" in adjustment.message
    assert f"cut to {used_steps(s, 16)} steps (16m), the backend's maxHorizon 16" in adjustment.message
    assert "short of the sizing window" in adjustment.message


def test_the_default_horizon_cut_by_presages_own_limit() -> None:
    s = spec({"resolution": "1s", "history": "1h"}, leadTime={"static": "2h", "max": "2h"}, interval="1s")
    [adjustment] = adjusted(s)
    assert adjustment.reason == Reason.HORIZON_CUT
    assert "is 28800 steps" in adjustment.message  # 4 × 7200
    assert f"cut to {MAX_FORECAST_STEPS} steps (5h33m20s), presage's limit of {MAX_FORECAST_STEPS} steps" in (
        adjustment.message
    )
    assert used_steps(s, None, timedelta(seconds=1)) == MAX_FORECAST_STEPS


def test_an_explicit_horizon_raised_to_the_sizing_window() -> None:
    s = spec(forecast={"horizon": "2m"})  # the lead time, 2 steps; the window is 3
    [adjustment] = adjusted(s)
    assert used_steps(s, None) == 3
    assert adjustment.reason == Reason.HORIZON_RAISED
    assert adjustment.message == (
        "forecast.horizon 2m at resolution 1m is 2 steps, raised to the sizing window (lead time + interval 1m, "
        "3 steps), so that the horizon never changes what is sized"
    )


def test_the_default_horizon_raised_to_the_sizing_window() -> None:
    """The reference's default is 4x the lead time: 8 steps at lead 2m, where the sizing window at
    interval 10m is 12. The evaluation asks for 12, and says so."""
    s = spec(interval="10m")
    [adjustment] = adjusted(s)
    assert used_steps(s, None) == 12
    assert adjustment.reason == Reason.HORIZON_RAISED
    assert adjustment.message == (
        "the default horizon (4 × the lead time 2m) at resolution 1m is 8 steps, raised to the sizing window "
        "(lead time + interval 10m, 12 steps), so that the horizon never changes what is sized"
    )
    condition = spec_adjusted_condition(adjusted(s))
    assert (condition.status, condition.reason) == ("True", Reason.HORIZON_RAISED)


def test_raised_then_cut_is_a_cut() -> None:
    s = spec(forecast={"horizon": "2m"}, interval="10m")  # 2 steps asked, the 12-step window, 5 allowed
    [adjustment] = adjusted(s, 5)
    assert adjustment.reason == Reason.HORIZON_CUT
    assert "is 2 steps, raised to the sizing window (lead time + interval 10m, 12 steps); cut to 5 steps" in (
        adjustment.message
    )


def test_each_resolution_is_judged_once_and_the_clamp_comes_first() -> None:
    signal = {"prometheus": {"address": "http://p:9090", "query": "q"}, "capacity": {"perReplica": 10}}
    s = parse(
        PredictiveScalerSpec,
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "signals": [
                {"name": "coarse", "resolution": "5m", **signal},
                {"name": "fine", "resolution": "10s", **signal},
                {"name": "fine2", "resolution": "10s", **signal},
            ],
            "policy": {"maxReplicas": 100},
            "leadTime": {"static": "20m"},  # clamped to 15m: 90 steps of 10s, 3 of 5m
            "forecast": {"horizon": "1h"},  # 360 steps of 10s (cut to 100), 12 of 5m (fits)
        },
    )
    adjustments = spec_adjustments(s, resolve_lead_time(s.lead_time), 100)
    assert [a.reason for a in adjustments] == [Reason.LEAD_TIME_CLAMPED, Reason.HORIZON_CUT]
    assert "at resolution 10s is 360 steps; cut to 100 steps" in adjustments[1].message

    condition = spec_adjusted_condition(adjustments)
    assert (condition.status, condition.reason) == ("True", Reason.LEAD_TIME_CLAMPED)
    assert condition.message == f"{adjustments[0].message}; {adjustments[1].message}"


def test_the_condition_takes_the_first_reason() -> None:
    adjustments = (Adjustment(Reason.HORIZON_CUT, "cut"), Adjustment(Reason.HORIZON_RAISED, "raised"))
    condition = spec_adjusted_condition(adjustments)
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        SPEC_ADJUSTED,
        "True",
        Reason.HORIZON_CUT,
        "cut; raised",
    )


# --- what the spec alone says: capacity and headroom -----------------------------------------------


def without_capacity(**top: Any) -> PredictiveScalerSpec:
    raw = spec(**top).model_dump(by_alias=True, exclude_none=True, mode="json")
    raw.pop("capacity")
    return parse(PredictiveScalerSpec, raw)


def test_an_omitted_capacity_is_the_reference_default_and_said() -> None:
    s = without_capacity()
    [adjustment] = adjusted(s)
    assert adjustment.reason == Reason.CAPACITY_DEFAULTED
    assert "one replica per signal unit (capacity.perReplica 1)" in adjustment.message
    assert "set capacity.perReplica to what one replica serves" in adjustment.message
    # Written out, even at the same value, it is what the author meant: nothing to say.
    assert adjusted(spec(capacity={"perReplica": 1})) == ()
    assert adjusted(spec(capacity={"query": {"address": "http://p:9090", "query": "capacity"}})) == ()


@pytest.mark.parametrize(("headroom", "shown"), [(10, "10"), ("2.5", "2.5")])
def test_an_absolute_headroom_is_signal_units_and_said(headroom: int | str, shown: str) -> None:
    [adjustment] = adjusted(spec(policy={"maxReplicas": 100, "headroom": headroom}))
    assert adjustment.reason == Reason.ABSOLUTE_HEADROOM
    assert f"policy.headroom {shown} is a number, so it means {shown} signal units" in adjustment.message
    assert f'write "{shown}%" for a share of the forecast' in adjustment.message


@pytest.mark.parametrize("headroom", ["10%", "0%", 0, "0"])
def test_a_percentage_or_no_headroom_is_not_a_notice(headroom: int | str) -> None:
    assert adjusted(spec(policy={"maxReplicas": 100, "headroom": headroom})) == ()


def test_a_spec_that_sets_everything_explicitly_has_nothing_to_say() -> None:
    s = spec(
        capacity={"perReplica": 25},
        policy={"maxReplicas": 100, "headroom": "15%"},
        leadTime={"source": "Static", "static": "3m", "min": "30s", "max": "15m"},
        forecast={"horizon": "30m"},
        interval="1m",
    )
    assert adjusted(s, 1000) == () and planned_adjustments(s) == ()
    condition = spec_adjusted_condition(adjusted(s, 1000))
    assert (condition.status, condition.reason) == ("False", Reason.AS_SPECIFIED)


def test_all_at_once_most_consequential_first() -> None:
    s = without_capacity(policy={"maxReplicas": 100, "headroom": 10}, leadTime={"static": "2h"})
    adjustments = adjusted(s)
    assert [a.reason for a in adjustments] == [
        Reason.CAPACITY_DEFAULTED,
        Reason.ABSOLUTE_HEADROOM,
        Reason.LEAD_TIME_CLAMPED,
    ]
    condition = spec_adjusted_condition(adjustments)
    assert (condition.status, condition.reason) == ("True", Reason.CAPACITY_DEFAULTED)
    assert condition.message == "; ".join(a.message for a in adjustments)
    assert "leadTime.static 2h is above [leadTime.min, leadTime.max] = [30s, 15m]" in condition.message


def test_headroom_of_several_signals_is_in_each_signals_units() -> None:
    signal = {"prometheus": {"address": "http://p:9090", "query": "q"}, "capacity": {"perReplica": 10}}
    s = parse(
        PredictiveScalerSpec,
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "signals": [{"name": "rps", **signal}, {"name": "queue", **signal}],
            "policy": {"maxReplicas": 100, "headroom": 5},
        },
    )
    [adjustment] = adjusted(s)  # a multi-signal scaler has no top-level capacity to default
    assert adjustment.reason == Reason.ABSOLUTE_HEADROOM and "5 units of each signal" in adjustment.message


# --- before any evaluation (presage scaledobject) ---------------------------------------------------


def test_planned_adjustments_resolve_a_static_lead_time_as_an_evaluation_does() -> None:
    s = without_capacity(leadTime={"static": "2h"}, interval="10m")
    assert planned_adjustments(s) == adjusted(s)
    assert [a.reason for a in planned_adjustments(s)][:2] == [Reason.CAPACITY_DEFAULTED, Reason.LEAD_TIME_CLAMPED]


def test_planned_adjustments_leave_an_observed_lead_time_to_the_evaluation() -> None:
    s = without_capacity(leadTime={**OBSERVED, "min": "30m", "max": "1h"})
    # Whatever the query returns is clamped into [30m, 1h]: not known before it is read.
    assert [a.reason for a in planned_adjustments(s)] == [Reason.CAPACITY_DEFAULTED]


def test_planned_adjustments_raise_what_no_evaluation_survives() -> None:
    s = spec({"resolution": "1s", "history": "1h"}, leadTime={"static": "10h", "max": "10h"}, interval="1s")
    with pytest.raises(HorizonError, match="lead time 10h needs 36000 steps"):
        planned_adjustments(s)

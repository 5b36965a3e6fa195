"""The decision policy: a table test per constraint, and properties that must always hold."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.api.quantities import Amount
from presage_scaler.engine.policy import PolicyState, SignalInput, decide, whole_replicas

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("replicas", "whole"),
    [
        (3.0, 3),
        (3.0000000001, 3),
        (3.00001, 4),
        (2.5, 3),
        (0.0, 0),
        (1e-12, 0),
        (-4.2, 0),
        (33 / 11.000000000000002, 3),
    ],
)
def test_whole_replicas_round_up_within_the_float_tolerance(replicas, whole):
    assert whole_replicas(replicas) == whole


def policy(**overrides: Any) -> PolicySpec:
    return parse(PolicySpec, {"maxReplicas": 100, **overrides}, path="spec.policy")


def signal(
    upper: float, *, lower: float | None = None, observed: float = 0.0, capacity: float = 10.0, name: str = "default"
) -> SignalInput:
    return SignalInput(
        name=name,
        upper=upper,
        lower=upper if lower is None else lower,
        point=upper,
        observed=observed,
        capacity=capacity,
    )


def run(
    signals: list[SignalInput] | SignalInput,
    current: int,
    spec: PolicySpec | None = None,
    state: PolicyState | None = None,
    now: datetime = NOW,
):
    signals = signals if isinstance(signals, list) else [signals]
    return decide(signals, current, spec or policy(), state or PolicyState(), now)


# --- table tests: one row per constraint --------------------------------------------------------

NO_FLOOR = {"reactiveFloor": {"enabled": False}}
NO_HEADROOM = {"headroom": 0}


@pytest.mark.parametrize(
    ("name", "spec", "signals", "current", "state", "replicas", "constraint"),
    [
        # forecast 95 + 10% headroom = 104.5 units at 10/replica -> 11
        ("forecast binds", {}, signal(95), 11, None, 11, ""),
        ("headroom as units", {"headroom": 5}, signal(95), 10, None, 10, ""),
        ("headroom as percent", {"headroom": "50%"}, signal(60), 9, None, 9, ""),
        (
            "targetQuantile sizes down too",
            {**NO_FLOOR, "stabilization": {"scaleDownWindow": "0s", "maxScaleDownRate": "100%"}},
            signal(20),
            10,
            None,
            3,
            "",
        ),
        ("reactive floor (percent buffer)", NO_HEADROOM, signal(10, observed=95), 10, None, 11, "ReactiveFloor"),
        (
            "reactive floor (absolute buffer)",
            {**NO_HEADROOM, "reactiveFloor": {"bufferSize": 3}},
            signal(10, observed=95),
            13,
            None,
            13,
            "ReactiveFloor",
        ),
        ("min replicas", {**NO_FLOOR, "minReplicas": 4}, signal(0), 4, None, 4, "MinReplicas"),
        ("max replicas", {"maxReplicas": 7}, signal(500), 7, None, 7, "MaxReplicas"),
        ("max replicas binds below the floor", {"maxReplicas": 7}, signal(0, observed=500), 7, None, 7, "MaxReplicas"),
        (
            "uncertainty guard holds a scale-down",
            {**NO_FLOOR},
            signal(50, lower=10),
            20,
            None,
            20,
            "ForecastUncertainty",
        ),
        ("scale-down window holds", {**NO_FLOOR}, signal(50), 20, None, 20, "ScaleDownWindow"),
        (
            "window elapsed: scale down at the down rate",
            {**NO_FLOOR},
            signal(50),
            20,
            PolicyState(scale_down_candidate_since=NOW - timedelta(minutes=16)),
            16,
            "MaxScaleDownRate",
        ),
        (
            "window elapsed: within the down rate",
            {**NO_FLOOR, **NO_HEADROOM},
            signal(180),
            20,
            PolicyState(scale_down_candidate_since=NOW - timedelta(minutes=15)),
            18,
            "",
        ),
        ("max scale-up rate (percent)", {}, signal(1000), 10, None, 20, "MaxScaleUpRate"),
        (
            "max scale-up rate (replicas)",
            {"stabilization": {"maxScaleUpRate": 3}},
            signal(1000),
            10,
            None,
            13,
            "MaxScaleUpRate",
        ),
        (
            "max scale-up rate binds below the floor",
            {"stabilization": {"maxScaleUpRate": 2}},
            signal(0, observed=1000),
            10,
            None,
            12,
            "MaxScaleUpRate",
        ),
        (
            "max scale-down rate (replicas)",
            {**NO_FLOOR, "stabilization": {"scaleDownWindow": "0s", "maxScaleDownRate": 2}},
            signal(0),
            10,
            None,
            8,
            "MaxScaleDownRate",
        ),
        ("scale from zero is at least one step", {}, signal(100), 0, None, 1, "MaxScaleUpRate"),
        (
            "the floor on never recommends 0, even with minReplicas 0",
            {"minReplicas": 0, "stabilization": {"scaleDownWindow": "0s", "maxScaleDownRate": "100%"}},
            signal(0, observed=0),
            3,
            None,
            1,
            "ReactiveFloor",
        ),
        (
            "disabled floor unlocks scale to zero",
            {**NO_FLOOR, "minReplicas": 0, "stabilization": {"scaleDownWindow": "0s", "maxScaleDownRate": "100%"}},
            signal(0, observed=50),
            3,
            None,
            0,
            "",
        ),
    ],
)
def test_constraints(name, spec, signals, current, state, replicas, constraint):
    decision = run(signals, current, policy(**spec), state)
    assert (decision.replicas, decision.constraint) == (replicas, constraint), name


def test_largest_signal_binds_and_breakdown_is_complete():
    decision = run([signal(50, name="cpu"), signal(200, name="rps", capacity=20, observed=100)], 11)
    assert decision.binding_signal == "rps"
    assert decision.predictive == 11  # 200 * 1.1 / 20
    assert decision.reactive == 6  # 100 * 1.1 / 20
    assert [(s.name, s.replicas) for s in decision.signals] == [("cpu", 6), ("rps", 11)]


def test_first_signal_wins_a_tie():
    assert run([signal(50, name="a"), signal(50, name="b")], 6).binding_signal == "a"


def test_the_signal_whose_floor_sets_the_count_binds():
    """rps's forecast needs 11 replicas, cpu's forecast 2 but its observed demand 20 with its 10 %
    buffer: the count, 20, is cpu's floor, so cpu is the binding signal."""
    decision = run(
        [signal(200, name="rps", capacity=20, observed=100), signal(2, name="cpu", capacity=1.1, observed=20)], 11
    )
    assert (decision.replicas, decision.constraint) == (20, "ReactiveFloor")
    assert (decision.predictive, decision.reactive) == (11, 20)
    assert decision.binding_signal == "cpu"
    assert [(s.name, s.replicas, s.reactive_replicas) for s in decision.signals] == [("rps", 11, 6), ("cpu", 2, 20)]


def test_a_floor_below_the_forecast_leaves_the_forecasts_signal_binding():
    decision = run([signal(2, name="cpu", capacity=1.1, observed=5), signal(200, name="rps", capacity=20)], 11)
    assert (decision.replicas, decision.constraint, decision.binding_signal) == (11, "", "rps")


def test_window_candidate_time_is_set_kept_and_cleared():
    spec = policy(**NO_FLOOR)
    first = run(signal(50), 20, spec)
    assert first.state.scale_down_candidate_since == NOW
    later = run(signal(50), 20, spec, first.state, NOW + timedelta(minutes=5))
    assert later.state.scale_down_candidate_since == NOW and later.constraint == "ScaleDownWindow"
    recovered = run(signal(500), 20, spec, later.state, NOW + timedelta(minutes=6))
    assert recovered.state.scale_down_candidate_since is None


def test_restored_candidate_time_continues_the_window():
    """A scaler restarted with scaleDownCandidateSince from status does not start over."""
    restored = PolicyState(scale_down_candidate_since=NOW - timedelta(minutes=14, seconds=59))
    assert run(signal(50), 20, policy(**NO_FLOOR), restored).constraint == "ScaleDownWindow"
    done = run(signal(50), 20, policy(**NO_FLOOR), restored, NOW + timedelta(seconds=1))
    assert done.replicas < 20


def test_guard_never_gates_scale_up():
    decision = run(signal(500, lower=1), 10, policy(**NO_FLOOR))
    assert decision.replicas == 20 and decision.constraint == "MaxScaleUpRate"


def test_last_scale_time_moves_only_on_change():
    previous = NOW - timedelta(hours=1)
    same = run(signal(95), 11, state=PolicyState(last_scale_time=previous))
    assert same.state.last_scale_time == previous
    changed = run(signal(200), 11, state=PolicyState(last_scale_time=previous))
    assert changed.state.last_scale_time == NOW


def test_min_replicas_above_target_leaves_no_candidate():
    decision = run(signal(0), 3, policy(**NO_FLOOR, minReplicas=3))
    assert decision.replicas == 3 and decision.state.scale_down_candidate_since is None


# --- properties ---------------------------------------------------------------------------------

amounts = st.one_of(st.integers(0, 20), st.integers(0, 300).map(lambda v: f"{v}%"))
policies = st.builds(
    lambda lo, span, headroom, buffer, floor, guard, spread, window, up, down: policy(
        minReplicas=lo,
        maxReplicas=lo + span,
        headroom=headroom,
        reactiveFloor={"enabled": floor, "bufferSize": buffer},
        scaleDownUncertaintyGuard={"enabled": guard, "maxRelativeSpread": spread},
        stabilization={"scaleDownWindow": window, "maxScaleUpRate": up, "maxScaleDownRate": down},
    ),
    st.integers(0, 10),
    st.integers(1, 50),
    amounts,
    amounts,
    st.booleans(),
    st.booleans(),
    st.sampled_from(["0", "0.25", "1.5"]),
    st.sampled_from(["0s", "5m", "15m"]),
    amounts,
    amounts,
)
values = st.floats(0, 5000, allow_nan=False)
signal_inputs = st.builds(
    lambda upper, gap, observed, capacity: SignalInput("s", upper, max(upper - gap, 0), upper, observed, capacity),
    values,
    values,
    values,
    st.floats(0.5, 100),
)
states = st.builds(
    PolicyState,
    scale_down_candidate_since=st.one_of(st.none(), st.integers(0, 3600).map(lambda s: NOW - timedelta(seconds=s))),
)
currents = st.integers(0, 80)


@settings(max_examples=400, deadline=None)
@given(policies, signal_inputs, currents, states)
def test_always_within_min_and_max(spec, s, current, state):
    decision = run(s, current, spec, state)
    assert spec.min_replicas <= decision.replicas <= spec.max_replicas


# An oracle written from the API reference's words, not from presage_scaler.engine.policy's helpers.


def _whole(value: float) -> int:
    """Whole replicas covering ``value`` (3.0000000001 is still 3, as in the policy)."""
    return max(0, math.ceil(value - 1e-9))


def _amount(amount: Amount, of: float) -> float:
    return amount.value / 100 * of if amount.percent else amount.value


def expected_predictive(s: SignalInput, spec: PolicySpec) -> int:
    return _whole((max(s.upper, 0) + _amount(spec.headroom, max(s.upper, 0))) / s.capacity)


def expected_floor(s: SignalInput, spec: PolicySpec) -> int:
    """Latest demand plus bufferSize (percent of demand, or replicas), and never 0 while enabled."""
    buffer = spec.reactive_floor.buffer_size
    if buffer.percent:
        needed = _whole(s.observed * (1 + buffer.value / 100) / s.capacity)
    else:
        needed = _whole(s.observed / s.capacity) + _whole(buffer.value)
    return max(needed, 1)


def expected_up_limit(current: int, spec: PolicySpec) -> int:
    """The most one decision may reach: maxScaleUpRate more, at least one replica when positive."""
    rate = spec.stabilization.max_scale_up_rate
    return current if rate.value <= 0 else current + max(1, _whole(_amount(rate, current)))


@settings(max_examples=400, deadline=None)
@given(policies, signal_inputs, currents, states)
def test_floor_on_never_below_floor_and_hard_limits(spec, s, current, state):
    spec = spec.model_copy(update={"reactive_floor": spec.reactive_floor.model_copy(update={"enabled": True})})
    decision = run(s, current, spec, state)
    floor = expected_floor(s, spec)
    assert decision.reactive == floor and decision.predictive == expected_predictive(s, spec)
    assert decision.replicas >= min(floor, spec.max_replicas, expected_up_limit(current, spec))


@settings(max_examples=400, deadline=None)
@given(policies, signal_inputs, currents, states)
def test_scale_up_is_never_delayed_by_window_or_guard(spec, s, current, state):
    decision = run(s, current, spec, state)
    target = expected_predictive(s, spec)
    if spec.reactive_floor.enabled:
        target = max(target, expected_floor(s, spec))
    if target > current:
        # Neither the scale-down window nor the guard applies: only maxScaleUpRate and the bounds.
        reached = min(target, expected_up_limit(current, spec))
        assert decision.replicas == min(max(reached, spec.min_replicas), spec.max_replicas)
        assert decision.constraint not in ("ScaleDownWindow", "ForecastUncertainty")


@settings(max_examples=400, deadline=None)
@given(policies, signal_inputs, st.floats(0, 5000), currents, states)
def test_higher_forecast_never_gives_fewer_replicas(spec, s, extra, current, state):
    higher = SignalInput(s.name, s.upper + extra, s.lower, s.point + extra, s.observed, s.capacity)
    assert run(higher, current, spec, state).replicas >= run(s, current, spec, state).replicas

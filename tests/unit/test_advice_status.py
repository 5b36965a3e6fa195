"""``status.advice`` from a tuning run, and which scalers a run of ``presage advise`` takes: the patch
sets exactly the changed fields, every field validates against the API, and shards split scalers
with none taken twice or missed."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceStatus
from presage_scaler.tune.advice_body import KNOB_FIELDS, advice_status, changes, failed_status, merge_diff
from presage_scaler.tune.in_cluster_advisor import Deadline, DeadlineExceeded, advice_spec, due, in_shard, summary_line
from presage_scaler.tune.knobs import ForecasterKnobs
from presage_scaler.tune.tuner import TuneResult, tune
from presage_scaler.tune.verdict import Verdict, advise
from tests.unit.test_tune import _held_up, _week, setup_for
from tests.unit.test_tune_parts import daily_trace

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
SPEC = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "rate(x[1m])"}},
    "capacity": {"perReplica": 20},
    "policy": {"maxReplicas": 200},
    "advice": {"serviceLevel": "1%"},
}


@pytest.fixture(scope="module")
def result() -> TuneResult:
    return tune(daily_trace(9, seed=3), setup_for(spec=SPEC))


def _advised(result: TuneResult) -> TuneResult:
    """``result`` held up on a week, with a chosen spec other than the start, a new season included."""
    held_up = _week(_held_up(result))
    knobs = held_up.default.knobs
    other = replace(
        knobs,
        target_quantile=0.95,
        forecaster=ForecasterKnobs(timedelta(hours=12), knobs.forecaster.cycles, knobs.forecaster.history),
    )
    chosen = replace(held_up.chosen, knobs=other)
    chosen = replace(
        chosen, held_out=replace(chosen.held_out, replica_hours=0.8 * held_up.default.held_out.replica_hours)
    )
    return replace(held_up, chosen=chosen)


def test_merge_diff_turns_one_document_into_the_other():
    before = {"a": {"b": 1, "c": 2}, "d": [1], "e": "x"}
    after = {"a": {"b": 1, "c": 3}, "d": [1, 2], "f": True}
    patch = merge_diff(before, after)
    assert patch == {"a": {"c": 3}, "d": [1, 2], "e": None, "f": True}
    assert merge_patch(before, patch) == after  # as the API server applies it
    assert merge_diff(after, after) is None


def test_advised_status_patches_exactly_the_changed_fields_and_validates(result):
    advised = _advised(result)
    advice = advise(advised)
    assert advice.verdict == Verdict.ADVISED
    body = advice_status(advised, advice, SPEC, "1%", 4, NOW)
    # Every field but the controller's record of its own apply, which presage advise never writes.
    assert set(body) == {info.alias or name for name, info in AdviceStatus.model_fields.items()} - {"applied"}
    AdviceStatus.model_validate(body)
    assert body["verdict"] == "Advised" and body["observedGeneration"] == 4 and body["error"] is None
    assert [c["field"] for c in body["changes"]] == [
        "policy.targetQuantile",
        "forecastBackend.season",
    ]
    cycles = result.default.knobs.forecaster.cycles
    assert body["forecastBackend"] == {"name": f"seasonal-naive-12h-x{cycles}", "season": "12h", "cycles": cycles}
    patch = json.loads(body["patch"])
    assert patch == {
        "spec": {"policy": {"targetQuantile": "0.95"}, "forecast": {"backendRef": f"seasonal-naive-12h-x{cycles}"}}
    }
    # The spec the patch makes is valid and is the chosen knobs on the user's own spec.
    patched = parse(PredictiveScalerSpec, merge_patch(SPEC, patch["spec"]), path="spec")
    assert patched.policy.target_quantile == 0.95 and patched.scale_target_ref.name == "web"
    assert float(body["saving"]) == pytest.approx(20.0)
    assert "20.0 % fewer replica-hours" in summary_line(advice, body) and advice.message in summary_line(advice, body)


def test_only_an_advised_change_carries_changes_and_a_patch(result):
    advice = advise(result)  # two days chosen on: not enough history
    body = advice_status(result, advice, SPEC, "1%", 1, NOW)
    assert body["verdict"] == "NotEnoughHistory"
    assert body["changes"] is None and body["patch"] is None and body["advised"] is None
    assert float(body["saving"]) == 0.0 and body["current"]["heldOut"]["underProvisioned"]
    assert summary_line(advice, body) == advice.message


def test_a_failed_attempt_keeps_the_advice_made_before_it():
    patch = failed_status("Prometheus at http://p:9090 is unreachable", NOW)
    assert patch == {"error": "Prometheus at http://p:9090 is unreachable", "lastAttemptTime": "2026-12-06T12:00:00Z"}


def test_every_knob_has_the_field_a_user_changes(result):
    assert set(KNOB_FIELDS) == set(result.default.knobs.as_dict())
    assert changes(result.default.knobs, result.default.knobs) == []


# --- which scalers a run takes -------------------------------------------------------------------


def _scaler(generation: int = 3, **advice: object) -> dict:
    return {"metadata": {"namespace": "shop", "name": "web", "generation": generation}, "status": {"advice": advice}}


def test_a_scaler_is_due_when_never_advised_changed_failed_or_every_has_passed():
    every = timedelta(hours=24)
    made = (NOW - timedelta(hours=1)).isoformat()
    assert due({"metadata": {"generation": 1}}, every, NOW)
    assert not due(_scaler(observedGeneration=3, time=made), every, NOW)
    assert due(_scaler(generation=4, observedGeneration=3, time=made), every, NOW)
    assert due(_scaler(observedGeneration=3, time=made, error="unreachable"), every, NOW)
    assert due(_scaler(observedGeneration=3, time=(NOW - every).isoformat()), every, NOW)
    assert due(_scaler(observedGeneration=3, time="not a time"), every, NOW)


@pytest.mark.parametrize(
    "stored",
    [
        "9999-12-31T23:59:59Z",  # the CRD admits it; adding `every` to it overflows
        "9999-12-31T23:59:59.999999+00:00",
        "0001-01-01T00:00:00-23:59",  # before the year 1 in UTC
        "2026-12-06T13:00:00+00:00",  # an hour later than now
        "2026-12-05T12:00:00",  # no offset: which hour it names is unknown
        "10000-01-01T00:00:00Z",
        "",
        12,
        None,
        ["2026-12-05T12:00:00Z"],
    ],
)
def test_a_stored_time_that_cannot_be_trusted_makes_the_scaler_due(stored):
    for now in (NOW, datetime(9999, 12, 31, 23, 59, tzinfo=UTC), datetime(1, 1, 1, 0, 1, tzinfo=UTC)):
        assert due(_scaler(observedGeneration=3, time=stored), timedelta(hours=24), now), (stored, now)


def test_the_due_check_at_the_ends_of_the_calendar():
    every = timedelta(hours=24)
    last = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert not due(_scaler(observedGeneration=3, time=(last - timedelta(hours=1)).isoformat()), every, last)
    assert due(_scaler(observedGeneration=3, time=(last - every).isoformat()), every, last)
    first = datetime(1, 1, 1, tzinfo=UTC)
    assert not due(_scaler(observedGeneration=3, time=first.isoformat()), every, first + timedelta(hours=1))
    assert not due(_scaler(observedGeneration=3, time="9999-12-31T23:59:59Z"), timedelta.max, last)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)
STORED_TIMES = st.datetimes(timezones=st.just(UTC)).map(datetime.isoformat) | st.text(max_size=40) | JSON


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.fixed_dictionaries({}, optional={"generation": JSON}) | JSON,
            "status": st.fixed_dictionaries(
                {},
                optional={
                    "advice": st.fixed_dictionaries(
                        {}, optional={"time": STORED_TIMES, "error": JSON, "observedGeneration": JSON}
                    )
                    | JSON
                },
            )
            | JSON,
        },
    ),
    st.datetimes(timezones=st.just(UTC)),
    st.timedeltas(min_value=timedelta(hours=1)),
)
def test_the_due_check_answers_for_any_stored_object(obj, now, every):
    assert due(obj, every, now) in (True, False)


def test_advice_spec_defaults_and_refusals():
    spec = advice_spec({"spec": {"advice": {"serviceLevel": "0.5%"}}})
    assert spec is not None and (spec.every, spec.lookback) == (timedelta(hours=24), timedelta(days=28))
    assert advice_spec({"spec": {"signal": {}}}) == advice_spec({"spec": {"signal": {}, "advice": {}}})  # Shadow
    assert advice_spec({"spec": {"signal": {}, "mode": "Enforce"}}) is None
    assert advice_spec({"spec": {"signals": []}}) is None  # skipped, not advised
    for level in ("0%", "100%", "1", "-1%", "abc"):
        with pytest.raises(SpecError, match="serviceLevel"):
            advice_spec({"spec": {"advice": {"serviceLevel": level}}})
    with pytest.raises(SpecError, match="every must be at least 1h"):
        advice_spec({"spec": {"advice": {"serviceLevel": "1%", "every": "5m"}}})
    with pytest.raises(SpecError, match="single-signal"):
        parse(PredictiveScalerSpec, {**{k: v for k, v in SPEC.items() if k not in ("signal", "capacity")},
              "signals": [{"name": "a", "prometheus": SPEC["signal"]["prometheus"], "capacity": {"perReplica": 1}}]},
              path="spec")  # fmt: skip


@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20)), max_size=50),
       st.integers(min_value=1, max_value=8))  # fmt: skip
def test_shards_take_every_scaler_exactly_once(names, shards):
    for namespace, name in names:
        obj = {"metadata": {"namespace": namespace, "name": name}}
        assert sum(in_shard(obj, shard, shards) for shard in range(shards)) == 1


def test_a_deadline_stops_a_tuning_at_its_next_progress_report():
    """The real tuning, with a clock that moves a second at each reading: it reports progress while it
    forecasts and replays, and the report after the deadline ends it with the deadline's reason."""
    readings = iter(range(10**6))
    deadline = Deadline.starting(timedelta(seconds=3), lambda: float(next(readings)))
    with pytest.raises(DeadlineExceeded) as exceeded:
        tune(daily_trace(9, seed=3), setup_for(spec=SPEC), deadline.progress)
    assert str(exceeded.value).startswith("tuning took longer than the advice deadline of 3s (presage advise")
    assert "spec.advice.lookback" in str(exceeded.value)
    assert next(readings) == 4  # stopped at the report that read 3 s past the start, not after the run

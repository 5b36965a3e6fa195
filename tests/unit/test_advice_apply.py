"""``spec.advice.apply: WhenProven``'s decisions: what is applied, what a rollback restores, which
moments the watch counts, and when it rolls back (the controller's I/O is tested on the real API server
in tests/integration/test_advice_apply.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from presage_scaler.api.advice_patch import merge_patch, patch_digest
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import AdviceSpec, PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceApplied, AdviceStatus
from presage_scaler.controller.advice_apply import (
    ADVISED_FIELDS,
    Apply,
    Refusal,
    apply_plan,
    counted,
    failed_live,
    restore_patch,
    rollback_reason,
    spec_changes,
)
from presage_scaler.controller.status_cadence import replacing
from presage_scaler.engine.shadow import Prediction, Score
from presage_scaler.tune.advice_body import KNOB_FIELDS

APPLIED_AT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SPEC: dict[str, Any] = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}},
    "policy": {"maxReplicas": 10, "targetQuantile": "0.9", "stabilization": {"scaleDownWindow": "5m"}},
    "advice": {"apply": "WhenProven", "every": "1h"},
    "interval": "1m",
}
CHANGES = {
    "policy": {"targetQuantile": "0.8", "headroom": "5%", "stabilization": {"scaleDownWindow": "5m"}},
    "signal": {"history": "168h"},
    "forecast": {"backendRef": "seasonal-naive-24h-x2"},
}
PATCH = json.dumps({"spec": CHANGES})


def advice(verdict: str = "Proven", patch: str | None = PATCH, generation: int = 3, **more: Any) -> AdviceStatus:
    return AdviceStatus.model_validate({"verdict": verdict, "patch": patch, "observedGeneration": generation, **more})


def applied(**more: Any) -> AdviceApplied:
    return AdviceApplied.model_validate(
        {"generation": 4, "patch": PATCH, "restore": "{}", "time": APPLIED_AT, "samples": 0, "misses": 0} | more
    )


def score(at: datetime, covered: bool = True) -> Score:
    return Score(Prediction(at=at, replicas=5, reactive=5, lead=timedelta(minutes=2)), 5 if covered else 6)


def test_restore_puts_back_exactly_the_fields_changed_and_removes_those_that_were_absent() -> None:
    restore = restore_patch(SPEC, CHANGES)
    assert restore == {
        "policy": {"targetQuantile": "0.9", "headroom": None},  # scaleDownWindow was already 5m
        "signal": {"history": None},
        "forecast": None,
    }
    # Applied, then restored: the spec as it was.
    assert merge_patch(merge_patch(SPEC, CHANGES), restore) == SPEC


def test_restore_of_a_field_the_patch_removes_is_its_value() -> None:
    assert restore_patch(SPEC, {"policy": {"targetQuantile": None}}) == {"policy": {"targetQuantile": "0.9"}}
    assert restore_patch(SPEC, {"policy": {"scaleDownUncertaintyGuard": {"enabled": False}}}) == {
        "policy": {"scaleDownUncertaintyGuard": None}
    }


def test_every_field_advice_changes_may_be_applied() -> None:
    """The fields tuning changes (tune/advice_body.py) are the ones applied: a field added there and not
    here would have every advice that changes it refused."""
    for path in KNOB_FIELDS.values():
        if path.startswith("forecastBackend."):
            continue  # the backend's own settings: the spec changes forecast.backendRef instead
        assert tuple(path.split(".")) in ADVISED_FIELDS, path
    assert ("forecast", "backendRef") in ADVISED_FIELDS


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"spec": {"mode": "Enforce"}}), "changes spec.mode"),
        (json.dumps({"spec": {"policy": {"maxReplicas": 1000}}}), "changes spec.policy.maxReplicas"),
        (json.dumps({"spec": {"signal": {"prometheus": {"address": "http://evil"}}}}), "spec.signal.prometheus"),
        (json.dumps({"spec": CHANGES, "metadata": {"labels": {"a": "b"}}}), "of the spec alone"),
        (json.dumps({"spec": {}}), "of the spec alone"),
        (json.dumps(["spec"]), "of the spec alone"),
    ],
)
def test_a_patch_reaching_beyond_the_advised_fields_is_refused(patch: str, why: str) -> None:
    refused = spec_changes(patch)
    assert isinstance(refused, Refusal) and why in refused.message
    assert apply_plan(advice(patch=patch), 3, SPEC) == refused


def test_a_proven_advice_for_the_spec_as_it_is_is_applied_with_its_backend() -> None:
    backend = {"name": "seasonal-naive-24h-x2", "season": "24h", "cycles": 2}
    plan = apply_plan(advice(forecastBackend=backend), 3, SPEC)
    assert isinstance(plan, Apply)
    assert (plan.patch, plan.changes) == (PATCH, CHANGES)
    assert plan.backend is not None and (plan.backend.name, plan.backend.cycles) == ("seasonal-naive-24h-x2", 2)


@pytest.mark.parametrize(
    "status",
    [
        None,
        advice("Advised"),  # not proven yet
        advice("FailedLive"),
        advice("Keep", patch=None),
        advice(generation=2),  # made for an older spec: stale
        advice(applied=applied().to_wire()),  # this patch was applied here before
        advice(applied=applied(rolledBack="missed", rolledBackTime=APPLIED_AT).to_wire()),  # and rolled back
    ],
)
def test_nothing_is_applied_unless_proven_fresh_and_never_applied(status: AdviceStatus | None) -> None:
    assert apply_plan(status, 3, SPEC) is None


def test_a_spec_that_already_holds_the_advice_is_left_alone() -> None:
    assert apply_plan(advice(), 3, merge_patch(SPEC, CHANGES)) is None
    other = applied(patch=json.dumps({"spec": {"policy": {"headroom": "1"}}}))
    assert isinstance(apply_plan(advice(applied=other.to_wire()), 3, SPEC), Apply)  # another patch's record


def parsed(**advice_spec: Any) -> PredictiveScalerSpec:
    return parse(PredictiveScalerSpec, {**SPEC, "advice": {**SPEC["advice"], **advice_spec}})


def test_the_watch_counts_the_decisions_made_after_the_apply() -> None:
    status = advice(applied=applied(samples=10, misses=1).to_wire())
    now = APPLIED_AT + timedelta(minutes=30)
    scores = [
        score(APPLIED_AT - timedelta(minutes=1), covered=False),  # decided by the spec before
        score(APPLIED_AT, covered=False),  # in the apply's own second
        score(APPLIED_AT + timedelta(minutes=1)),
        score(APPLIED_AT + timedelta(minutes=2), covered=False),
    ]
    assert counted(status, scores, parsed(), 4, now) == {"applied": {"samples": 12, "misses": 2}}
    assert counted(status, [], parsed(), 4, now) is None  # nothing to add: the counts stay as written
    assert counted(status, scores[:2], parsed(), 4, now) is None


def test_a_failed_evaluation_writes_the_counts_a_held_status_carries() -> None:
    """Counts held with the shadow ledger they come from are written with it by a failure, never lost while
    the ledger's scored moments are kept."""
    written = {"advice": advice(applied=applied(samples=10, misses=0).to_wire()).to_wire()}
    held = merge_patch(written, {"advice": {"applied": {"samples": 12, "misses": 1}}})
    assert replacing(held)["advice"] == {"applied": held["advice"]["applied"]}
    assert merge_patch(written, replacing(held)) == held


@pytest.mark.parametrize(
    ("status", "spec", "generation", "after"),
    [
        (advice(), parsed(), 4, timedelta(minutes=30)),  # nothing applied
        (advice(applied=applied().to_wire()), parsed(), 5, timedelta(minutes=30)),  # the spec changed since
        (advice(applied=applied().to_wire()), parsed(), 4, timedelta(minutes=61)),  # the window ended
        (advice(applied=applied(rolledBack="x", rolledBackTime=APPLIED_AT).to_wire()), parsed(), 4, timedelta(0)),
        (advice(applied=applied().to_wire()), parsed(apply="Never"), 4, timedelta(minutes=30)),  # no longer asked
        (advice(applied=applied().to_wire()), parsed(enabled=False), 4, timedelta(minutes=30)),
    ],
)
def test_nothing_is_counted_outside_a_watch(
    status: AdviceStatus, spec: PredictiveScalerSpec, generation: int, after: timedelta
) -> None:
    scores = [score(APPLIED_AT + timedelta(seconds=1), covered=False)]
    assert counted(status, scores, spec, generation, APPLIED_AT + after) is None


HOURLY = AdviceSpec.model_validate({"every": "1h", "serviceLevel": "2%"})
MINUTE = timedelta(minutes=1)


def test_misses_beyond_what_the_window_allows_roll_back_at_once() -> None:
    """60 decisions in an hour at 2%: at most one miss; the second is beyond reach."""
    now = APPLIED_AT + timedelta(minutes=10)
    assert rollback_reason(applied(samples=8, misses=1), HOURLY, MINUTE, now, now - MINUTE) is None
    why = rollback_reason(applied(samples=9, misses=2), HOURLY, MINUTE, now, now - MINUTE)
    assert why == (
        "under-provisioned at 2 of the 9 moments scored since the apply, more than the 2% service level allows "
        "in its first 1h (at most 1 of 60 decisions)"
    )


def test_the_window_is_judged_at_its_end_once() -> None:
    end = APPLIED_AT + timedelta(hours=1)
    record = applied(samples=40, misses=1)  # 2.5% of what was scored, within reach of the whole window
    assert rollback_reason(record, HOURLY, MINUTE, end - MINUTE, end - 2 * MINUTE) is None
    why = rollback_reason(record, HOURLY, MINUTE, end + timedelta(seconds=30), end - timedelta(seconds=30))
    assert (
        why
        == "under-provisioned 2.5% of the first 1h after the apply (1 of 40 moments scored), over the 2% service level"
    )
    # Not judged again at the evaluation after (nor when the controller comes back hours later).
    assert rollback_reason(record, HOURLY, MINUTE, end + MINUTE, end + timedelta(seconds=30)) is None
    assert rollback_reason(applied(samples=40, misses=0), HOURLY, MINUTE, end + MINUTE, end - MINUTE) is None


def test_a_rolled_back_apply_is_never_rolled_back_again() -> None:
    record = applied(samples=9, misses=5, rolledBack="missed", rolledBackTime=APPLIED_AT)
    assert rollback_reason(record, HOURLY, MINUTE, APPLIED_AT + MINUTE, APPLIED_AT) is None


def live(patch: str) -> dict[str, Any]:
    return {
        "patchDigest": patch_digest(patch),
        "since": APPLIED_AT - timedelta(days=7),
        "verdict": "Proven",
        "samples": 10080,
        "replicas": 5,
        "underProvisioned": 0.5,
        "currentUnderProvisioned": 0.4,
        "replicaHours": 800,
        "currentReplicaHours": 900,
    }


def test_a_rollback_fails_the_advice_and_its_live_record_so_that_nothing_says_proven_again() -> None:
    why = "under-provisioned"
    marked = failed_live(advice(live=live(PATCH)), applied(), why)
    assert marked == {
        "verdict": "FailedLive",
        "message": "FailedLive: applied, then rolled back: under-provisioned",
        "live": {"verdict": "FailedLive"},
    }
    other = json.dumps({"spec": {"policy": {"headroom": "1"}}})
    assert failed_live(advice(live=live(other)), applied(), why) == {k: marked[k] for k in ("verdict", "message")}
    assert failed_live(advice(patch=other), applied(), why) == {}  # a newer advice: not the one that failed
    assert failed_live(advice("FailedLive"), applied(), why) == {}  # said already

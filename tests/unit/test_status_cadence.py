"""When an evaluation's status is written at once and when it is held for the next evaluation."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.controller.predictive_scaler_objects import ScalerEntry
from presage_scaler.controller.status_cadence import (
    HELD_AT_MOST,
    LeaseVouch,
    WrittenStatus,
    replacing,
    visible_key,
    write_due,
)

WRITTEN_AT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
KEDA_BOUND = 3 * MINUTE  # the default staleness bound at a 1m interval
HELD = WRITTEN_AT + timedelta(seconds=30)  # when the previous evaluation held its status, where one did


def status(at: datetime = WRITTEN_AT, **changes: object) -> dict:
    base: dict = {
        "observedGeneration": 3,
        "currentReplicas": 4,
        "recommendedReplicas": 5,
        "lastForecast": {"generatedAt": at.isoformat(), "point": "41.5", "backend": "default", "leadTimeSeconds": 120},
        "breakdown": {"bindingSignal": "requests", "constraint": "", "predictive": 5},
        "signalStatuses": [{"name": "requests", "observed": "40", "forecast": "41.5", "replicas": 5}],
        "conditions": [
            {"type": "Degraded", "status": "False", "reason": "EvaluationSucceeded", "message": "ok"},
            {"type": "Ready", "status": "True", "reason": "Recommended", "message": f"forecast 41.5 at {at}"},
        ],
    }
    base.update(changes)
    return base


def test_a_newer_forecast_alone_is_held_one_evaluation_then_written():
    written = WrittenStatus.of(status())
    one_later = status(WRITTEN_AT + MINUTE, shadow={"predictions": [{"replicas": 5}]})
    one_later["lastForecast"]["point"] = "44"
    one_later["conditions"][1]["message"] = "forecast 44 at a later time"
    assert not write_due(written, one_later, MINUTE, KEDA_BOUND, WRITTEN_AT + MINUTE, confirmed=None)
    # Late by a few seconds still holds where the next evaluation, as late again, is still served.
    late = WRITTEN_AT + MINUTE + timedelta(seconds=20)
    assert not write_due(written, one_later, MINUTE, timedelta(seconds=200), late, confirmed=None)
    # The second evaluation after the write writes, whenever it runs.
    assert write_due(written, one_later, MINUTE, KEDA_BOUND, WRITTEN_AT + MINUTE, confirmed=HELD)
    assert write_due(written, one_later, MINUTE, KEDA_BOUND, WRITTEN_AT + 2 * MINUTE, confirmed=None)


def test_a_controller_that_cannot_keep_up_holds_by_the_spacing_it_observes():
    """1,000 scalers at a 1s interval, each evaluated every 20 s: the written status is 20 s old at
    every evaluation, the next one is expected 20 s (30 with the spare) later."""
    second = timedelta(seconds=1)
    written = WrittenStatus.of(status())
    at = WRITTEN_AT + 20 * second
    assert not write_due(written, status(at), second, timedelta(minutes=2), at, confirmed=None)
    assert write_due(written, status(at), second, 49 * second, at, confirmed=None)
    assert not write_due(written, status(at), second, 50 * second, at, confirmed=None)
    # A status 20 s behind is served until the next write: held once, written by the next evaluation.
    assert write_due(written, status(at), second, timedelta(minutes=2), at, confirmed=HELD)


@pytest.mark.parametrize(
    "change",
    [
        {"recommendedReplicas": 6},
        {"currentReplicas": 5},
        {"observedGeneration": 4},
        {"scaleDownCandidateSince": WRITTEN_AT.isoformat()},
        {"breakdown": {"bindingSignal": "requests", "constraint": "ForecastUncertainty", "predictive": 4}},
        {"breakdown": {"bindingSignal": "cpu", "constraint": "", "predictive": 5}},
    ],
    ids=lambda change: next(iter(change)),
)
def test_a_visible_change_is_written_at_once(change):
    written = WrittenStatus.of(status())
    later = WRITTEN_AT + MINUTE
    assert write_due(written, status(later, **change), MINUTE, KEDA_BOUND, later, confirmed=None)


def test_a_signal_count_that_moves_under_a_constraint_is_held():
    """Demand crossing a replica's capacity moves the signal's count while a rate limit holds the
    recommendation: nothing acts on the count, and the metrics show it live."""
    limited = {"bindingSignal": "requests", "constraint": "MaxScaleUpRate", "predictive": 5}
    written = WrittenStatus.of(status(breakdown=limited))
    later = WRITTEN_AT + MINUTE
    signals = [{"name": "requests", "observed": "44", "forecast": "46", "replicas": 6}]
    moved = status(later, breakdown=limited, signalStatuses=signals)
    assert not write_due(written, moved, MINUTE, KEDA_BOUND, later, confirmed=None)


def test_a_moving_last_scale_time_alone_is_held():
    """In Shadow, or while a scale-up is rate-limited, every evaluation moves lastScaleTime."""
    written = WrittenStatus.of(status(lastScaleTime=WRITTEN_AT.isoformat()))
    later = WRITTEN_AT + MINUTE
    moved = status(later, lastScaleTime=later.isoformat())
    assert not write_due(written, moved, MINUTE, KEDA_BOUND, later, confirmed=None)


def test_condition_changes_are_written_at_once_but_not_a_successful_ready_restating_its_figures():
    written = WrittenStatus.of(status())
    later = WRITTEN_AT + MINUTE
    flipped = status(later)
    flipped["conditions"][0] = {"type": "Degraded", "status": "True", "reason": "QueryFailed", "message": "refused"}
    assert write_due(written, flipped, MINUTE, KEDA_BOUND, later, confirmed=None)
    reworded = status(later)
    reworded["conditions"][0]["message"] = "another message"
    assert write_due(written, reworded, MINUTE, KEDA_BOUND, later, confirmed=None)
    added = status(later)
    added["conditions"].append({"type": "Consumed", "status": "True", "reason": "ConsumedByScaledObject"})
    assert write_due(written, added, MINUTE, KEDA_BOUND, later, confirmed=None)
    restated = status(later)
    restated["conditions"][1]["message"] = "recommended 5 replicas: forecast 43.9"
    assert not write_due(written, restated, MINUTE, KEDA_BOUND, later, confirmed=None)


def test_nothing_is_held_that_would_be_served_past_its_bound():
    written = WrittenStatus.of(status())
    later = WRITTEN_AT + MINUTE
    # Written a minute ago, next written a minute from now: 2 minutes old at most. An Agones fleet
    # refusing at 2m, or a staleness bound of 2 intervals, leaves no half interval to spare.
    assert write_due(written, status(later), MINUTE, 2 * MINUTE, later, confirmed=None)
    assert write_due(written, status(later), MINUTE, timedelta(seconds=149), later, confirmed=None)
    assert not write_due(written, status(later), MINUTE, timedelta(seconds=150), later, confirmed=None)


def test_a_written_status_without_a_forecast_time_is_always_rewritten():
    bare = status()
    del bare["lastForecast"]
    later = WRITTEN_AT + MINUTE
    assert write_due(WrittenStatus.of(bare), status(later), MINUTE, KEDA_BOUND, later, confirmed=None)
    unreadable = status()
    unreadable["lastForecast"]["generatedAt"] = "yesterday"
    assert WrittenStatus.of(unreadable).generated_at is None
    naive = status()
    naive["lastForecast"]["generatedAt"] = "2026-12-01T10:00:00"
    assert WrittenStatus.of(naive).generated_at == WRITTEN_AT  # read as UTC, as the store reads it


def test_merge_patch_merges_objects_removes_nulls_and_replaces_the_rest():
    target = {"a": 1, "b": {"x": 1, "y": 2}, "c": [1, 2], "d": "gone"}
    before = copy.deepcopy(target)
    patched = merge_patch(target, {"b": {"y": None, "z": 3}, "c": [3], "d": None, "e": {"f": 1}})
    assert patched == {"a": 1, "b": {"x": 1, "z": 3}, "c": [3], "e": {"f": 1}}
    assert target == before


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(sorted(status())), JSON_VALUES, max_size=8))
def test_any_status_a_tenant_writes_by_hand_has_a_key_and_a_written_form(hand_written):
    WrittenStatus.of(hand_written)
    assert isinstance(visible_key(hand_written), str)


def _scaler(version: str, written: dict) -> dict:
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": version, "generation": 3},
        "spec": {"interval": "1m"},
        "status": written,
    }


def test_an_entry_reads_its_held_status_until_another_status_is_written():
    entry = ScalerEntry(obj=_scaler("7", status()), generation=3)
    held = status(WRITTEN_AT + MINUTE)
    held["lastForecast"]["point"] = "44"
    entry.hold(held, WRITTEN_AT + MINUTE)
    assert entry.holding and entry.status_json() == held
    assert entry.written == WrittenStatus.of(status())  # what KEDA is served is still the written one
    # A spec edit (the status unchanged on the server) keeps the held status.
    edited = _scaler("8", status())
    edited["spec"] = {"interval": "2m"}
    entry.keep(edited)
    assert entry.spec_json() == {"interval": "2m"} and entry.status_json() == held
    # Another replica's write replaces it: the held one was computed on a status no longer there.
    elsewhere = status(WRITTEN_AT + 2 * MINUTE, recommendedReplicas=9)
    entry.keep(_scaler("9", elsewhere))
    assert not entry.holding and entry.status_json() == elsewhere
    assert entry.written == WrittenStatus.of(elsewhere)


def test_a_write_replaces_the_held_status():
    entry = ScalerEntry(obj=_scaler("7", status()), generation=3)
    entry.hold(status(WRITTEN_AT + MINUTE), WRITTEN_AT + MINUTE)
    after = status(WRITTEN_AT + 2 * MINUTE)
    entry.accept(_scaler("8", after))
    assert not entry.holding and entry.status_json() == after
    assert entry.written.generated_at == WRITTEN_AT + 2 * MINUTE


# -- held by what the Lease vouches for (serving.freshness)

LAG = timedelta(seconds=12)
SECOND = timedelta(seconds=1)


def steady(published_at: datetime) -> LeaseVouch:
    """A record published then: every scaler of the Lease confirmed within 0.4 × 180 s = 72 s."""
    return LeaseVouch(lateness=0.4, lag=LAG, published_at=published_at)


def test_a_lease_that_vouches_lets_statuses_be_held_many_evaluations_in_a_row():
    written = WrittenStatus.of(status())
    for n in range(2, 10):
        now = WRITTEN_AT + n * MINUTE
        previous = WRITTEN_AT + (n - 1) * MINUTE  # the previous evaluation held too
        assert not write_due(written, status(now), MINUTE, KEDA_BOUND, now, previous, steady(now - 2 * SECOND))
        assert write_due(written, status(now), MINUTE, KEDA_BOUND, now, previous)  # no Lease: written


def test_a_status_vouched_for_is_still_written_every_ten_minutes_and_on_any_visible_change():
    written = WrittenStatus.of(status())
    now, previous = WRITTEN_AT + HELD_AT_MOST, WRITTEN_AT + HELD_AT_MOST - MINUTE
    assert write_due(written, status(now), MINUTE, KEDA_BOUND, now, previous, steady(now))
    earlier = now - MINUTE
    assert not write_due(written, status(earlier), MINUTE, KEDA_BOUND, earlier, previous - MINUTE, steady(earlier))
    changed = status(earlier, recommendedReplicas=6)
    assert write_due(written, changed, MINUTE, KEDA_BOUND, earlier, previous - MINUTE, steady(earlier))


def test_a_late_lease_or_a_late_scaler_makes_the_status_written():
    """Held only while the latest confirmation of every scaler of the Lease, and this scaler's own
    spacing, with a quarter again and the record's lag, stay within the bound."""
    written = WrittenStatus.of(status())
    now = WRITTEN_AT + 3 * MINUTE
    # 0.74 × 180 s = 133.2 s; × 1.25 + 12 s = 178.5 s: held. 0.75: 180.75 s, written.
    assert not write_due(written, status(now), MINUTE, KEDA_BOUND, now, now - MINUTE, LeaseVouch(0.74, LAG, now))
    assert write_due(written, status(now), MINUTE, KEDA_BOUND, now, now - MINUTE, LeaseVouch(0.75, LAG, now))
    # This scaler itself last confirmed 134 s ago (its evaluations are that far apart), and the last
    # record (a minute old) vouches for no more: held; 135 s: written.
    record = steady(now - MINUTE)
    late = now + 74 * SECOND
    assert not write_due(written, status(late), MINUTE, KEDA_BOUND, late, now - MINUTE, record)
    assert write_due(written, status(late), MINUTE, KEDA_BOUND, late + SECOND, now - MINUTE, record)


def test_a_new_owner_holds_by_what_the_record_vouched_for():
    """After a takeover, the written status is as old as the previous owner's last write (8 minutes,
    say), but the record says it was confirmed since: the first evaluation holds."""
    written = WrittenStatus.of(status())
    now = WRITTEN_AT + 8 * MINUTE
    inherited = LeaseVouch(lateness=0.45, lag=LAG, published_at=now)  # confirmed 81 s ago
    assert not write_due(written, status(now), MINUTE, KEDA_BOUND, now, None, inherited)
    assert write_due(written, status(now), MINUTE, KEDA_BOUND, now, None, steady(now - 5 * MINUTE))


def test_a_degraded_written_status_is_not_held_by_the_lease():
    """Degraded statuses are vouched for by nothing but themselves, so holding one would let its
    recommendation go stale unseen; one without a recommendation likewise."""
    broken = status()
    broken["conditions"][0] = {"type": "Degraded", "status": "True", "reason": "QueryFailed", "message": "x"}
    now = WRITTEN_AT + 2 * MINUTE
    assert not WrittenStatus.of(broken).vouchable
    assert write_due(WrittenStatus.of(broken), broken, MINUTE, KEDA_BOUND, now, now - MINUTE, steady(now))
    bare = status()
    del bare["recommendedReplicas"]
    assert not WrittenStatus.of(bare).vouchable
    assert WrittenStatus.of(status()).vouchable


def test_replacing_turns_the_written_status_into_the_held_one():
    """A failure after held evaluations writes the held status with it: the merge patch must give
    exactly the held status, cleared fields included."""
    written = status(scaleDownCandidateSince=WRITTEN_AT.isoformat(), calibration={"requests": {"forecasts": []}})
    success = {
        "lastForecast": {"generatedAt": (WRITTEN_AT + MINUTE).isoformat(), "point": "44"},
        "scaleDownCandidateSince": None,
        "calibration": None,
        "shadow": {"predictions": [{"replicas": 5}]},
    }
    held = merge_patch(written, success)
    assert "scaleDownCandidateSince" not in held and held["lastForecast"]["backend"] == "default"
    assert merge_patch(written, replacing(held)) == held


def test_replacing_leaves_the_advice_to_presage_advise():
    """presage advise may have written newer advice since the controller read the status: writing a
    held status neither clears it nor puts back the controller's older copy."""
    held = status(advice={"verdict": "Keep", "time": WRITTEN_AT.isoformat()})
    newer = {"verdict": "Advised", "time": (WRITTEN_AT + MINUTE).isoformat()}
    patch = replacing(held)
    assert "advice" not in patch
    assert merge_patch(status(advice=newer), patch)["advice"] == newer


def test_an_entry_knows_when_its_written_outcome_was_last_confirmed():
    entry = ScalerEntry(obj=_scaler("7", status()), generation=3)
    assert entry.vouched is None and entry.confirmed() == WRITTEN_AT
    entry.hold(status(WRITTEN_AT + MINUTE), WRITTEN_AT + MINUTE)
    entry.hold(status(WRITTEN_AT + 2 * MINUTE), WRITTEN_AT + 2 * MINUTE)
    assert entry.confirmed() == WRITTEN_AT + 2 * MINUTE
    assert entry.written.generated_at == WRITTEN_AT
    # Once another status is written, that one's forecast time is what was confirmed.
    entry.accept(_scaler("8", status(WRITTEN_AT + 3 * MINUTE)))
    assert entry.vouched is None and entry.confirmed() == WRITTEN_AT + 3 * MINUTE

"""The live record of an advice (``status.advice.live``): scored on replayed series whose answer is
worked out by hand, bounded, restored from status after a restart with the same answer, defined for
any status, and judged by the shared rules once."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from presage_scaler.api.advice_patch import merge_patch, patch_digest
from presage_scaler.api.predictive_scaler_status import (
    ADVICE_LIVE_MAX_PENDING,
    AdviceLive,
    PredictiveScalerStatus,
)
from presage_scaler.controller.status_cadence import replacing, visible_key
from presage_scaler.engine.advice_live import AdviceLedger, PairedDecision
from tests.unit.test_shadow import DEMAND, LEAD, MIN, T0, evaluation_time, signal

DIGEST = patch_digest('{"spec":{"policy":{"targetQuantile":"0.8"}}}')

# test_shadow's demand: required replicas [1, 1, 2, 4, 4, 3, 2, 2, 1, 1] from 12:00. Evaluation k runs at
# 12:0k:30 and decides for 12:0k:30 + 2m, scored at the next sample: minute k + 3, where [4, 4, 3, 2, 2, 1]
# replicas were required.
ADVISED = [4, 4, 3, 2, 2, 1]  # never short: 16 replica-minutes
CURRENT = [4, 4, 2, 2, 2, 3]  # short at minute 5 (2 < 3): 17 replica-minutes


def replay(ledger: AdviceLedger, steps: range) -> dict[int, int]:
    """Run evaluations ``steps`` (settle, then record the pair); how many pairs each one scored."""
    scored = {}
    for j in steps:
        data = [signal(DEMAND[: j + 1])]
        scored[j] = ledger.settle(data, evaluation_time(j), MIN)
        if j < len(ADVISED):
            ledger.record(PairedDecision(evaluation_time(j), ADVISED[j], CURRENT[j], LEAD), data)
    return scored


def restored(ledger: AdviceLedger, now: datetime) -> AdviceLedger:
    """``ledger`` written to status as JSON and read back, as a restarted controller reads it."""
    wire = json.loads(json.dumps(PredictiveScalerStatus.model_validate({"advice": {"live": ledger.status_patch()}})
                                 .to_wire()))  # fmt: skip
    live = PredictiveScalerStatus.model_validate(wire).advice
    assert live is not None
    return AdviceLedger.from_status(live.live, ledger.digest, now, 99)


def test_replayed_series_known_answer() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    scored = replay(ledger, range(len(DEMAND)))
    assert scored == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1, 9: 0}
    assert (ledger.samples, ledger.misses, ledger.current_misses, ledger.pending) == (6, 0, 1, [])
    assert (ledger.replica_seconds, ledger.current_replica_seconds) == (16 * 60, 17 * 60)
    wire = ledger.to_status().to_wire()
    assert wire == {
        "currentReplicaHours": "0.2833",
        "currentUnderProvisioned": "16.6667",
        "patchDigest": DIGEST,
        "replicaHours": "0.2667",
        "replicas": 3,
        "samples": 6,
        "saving": "5.9%",
        "since": "2025-03-01T12:00:00Z",
        "underProvisioned": "0",
        "verdict": "Proving",
    }


@pytest.mark.parametrize("cut", range(1, len(DEMAND)))
def test_a_restart_at_any_evaluation_gives_the_same_record(cut: int) -> None:
    uninterrupted = AdviceLedger.start(DIGEST, T0, 3)
    replay(uninterrupted, range(len(DEMAND)))
    first = AdviceLedger.start(DIGEST, T0, 3)
    replay(first, range(cut))
    second = restored(first, evaluation_time(cut))
    replay(second, range(cut, len(DEMAND)))
    assert second.to_status() == uninterrupted.to_status()


def test_misses_come_back_exact_from_the_percentage_up_to_a_million_moments() -> None:
    for samples, misses in ((3, 1), (60_480, 1), (60_480, 605), (999_983, 7), (999_983, 500_001)):
        ledger = AdviceLedger(DIGEST, T0, 3, samples=samples, misses=misses, current_misses=samples - misses)
        back = restored(ledger, T0)
        assert (back.samples, back.misses, back.current_misses) == (samples, misses, samples - misses)


def test_a_decision_scored_on_the_same_samples_as_the_newest_pending_is_not_recorded() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    data = [signal([10.0])]
    assert ledger.record(PairedDecision(T0 + timedelta(seconds=10), 3, 3, LEAD), data)
    # 20 s later, due in the same minute: scored on the same sample.
    assert not ledger.record(PairedDecision(T0 + timedelta(seconds=30), 1, 3, LEAD), data)
    assert ledger.record(PairedDecision(T0 + timedelta(seconds=70), 1, 3, LEAD), data)
    # Another lead time is scored elsewhere, though due in the same step.
    assert ledger.record(PairedDecision(T0 + timedelta(seconds=75), 1, 3, LEAD + timedelta(seconds=1)), data)
    assert len(ledger.pending) == 3


def test_pending_is_bounded() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    for i in range(ADVICE_LIVE_MAX_PENDING):
        assert ledger.record(PairedDecision(T0 + i * MIN, 3, 3, LEAD), [signal([1.0])])
    assert not ledger.record(PairedDecision(T0 + 100 * MIN, 3, 3, LEAD), [signal([1.0])])
    assert len(ledger.pending) == ADVICE_LIVE_MAX_PENDING == len(ledger.to_status().pending or ())


def test_decisions_the_history_no_longer_holds_are_dropped_unscored() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    ledger.record(PairedDecision(T0, 3, 3, LEAD), [signal([1.0])])  # due 12:02
    assert ledger.settle([signal([1.0] * 5)], T0 + 14 * MIN, MIN) == 0  # the history starts at 12:10
    assert (ledger.pending, ledger.samples) == ([], 0)


def test_another_patch_or_none_starts_over_from_the_current_count() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    replay(ledger, range(len(DEMAND)))
    live = ledger.to_status()
    later = T0 + timedelta(hours=1)
    for fresh in (
        AdviceLedger.from_status(None, DIGEST, later, 7),
        AdviceLedger.from_status(live, patch_digest("{}"), later, 7),
        AdviceLedger.from_status(live, DIGEST, T0 - MIN, 7),  # a record said to start later than now
    ):
        assert (fresh.samples, fresh.replicas, fresh.pending, fresh.verdict) == (0, 7, [], "Proving")
    assert AdviceLedger.from_status(live, DIGEST, later, 7).samples == 6


def test_proven_once_prove_for_has_passed_within_the_level_and_then_kept_as_judged() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    replay(ledger, range(len(DEMAND)))
    judge = functools.partial(ledger.judge, prove_for=timedelta(hours=1), interval=MIN, level=0.01)
    assert judge(T0 + 59 * MIN) is None and ledger.verdict == "Proving"
    assert judge(T0 + 60 * MIN) == "Proven"
    assert ledger.proven_time == T0 + 60 * MIN and ledger.pending == []
    assert judge(T0 + 61 * MIN) is None  # once
    ledger.misses = ledger.samples  # nothing changes a judged record's verdict
    assert judge(T0 + 120 * MIN) is None and ledger.verdict == "Proven"
    assert restored(ledger, T0 + 2 * MIN * 60).verdict == "Proven"


def test_a_miss_beyond_reach_fails_at_once() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    ledger.samples, ledger.misses = 5, 1
    # 1 miss of the 60 moments an hour holds at one a minute is over 1 %: nothing can bring it back.
    verdict = ledger.judge(T0 + 5 * MIN, prove_for=timedelta(hours=1), interval=MIN, level=0.01)
    assert verdict == "FailedLive" and ledger.proven_time is None


def test_saving_is_a_share_of_the_current_spec_and_may_be_negative() -> None:
    ledger = AdviceLedger.start(DIGEST, T0, 3)
    assert ledger.saving is None
    ledger.replica_seconds, ledger.current_replica_seconds = 10_000, 8_000
    assert ledger.saving == "-25.0%"
    ledger.replica_seconds = 8_001
    assert ledger.saving == "0.0%"


TIMES = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))
FIGURES = st.floats(allow_nan=True, allow_infinity=True)
COUNTS = st.integers(min_value=0, max_value=2**31 - 1)


LIVE_RECORDS = st.fixed_dictionaries(
    {
        "currentReplicaHours": FIGURES,
        "currentUnderProvisioned": FIGURES,
        "patchDigest": st.sampled_from([DIGEST, "0" * 16]),
        "replicaHours": FIGURES,
        "replicas": COUNTS,
        "samples": st.integers(min_value=0, max_value=2**63 - 1),
        "since": TIMES,
        "underProvisioned": FIGURES,
        "verdict": st.sampled_from(["Proving", "Proven", "FailedLive"]),
    },
    optional={
        "lastScaleTime": TIMES,
        "pending": st.lists(
            st.fixed_dictionaries(
                {
                    "advised": COUNTS,
                    "current": COUNTS,
                    "leadTimeSeconds": st.integers(min_value=0, max_value=2**40),
                    "time": TIMES,
                }
            ),
            max_size=ADVICE_LIVE_MAX_PENDING,
        ),
        "provenTime": TIMES,
        "saving": st.text(max_size=16),
        "scaleDownCandidateSince": TIMES,
    },
).map(AdviceLive.model_validate)


@given(LIVE_RECORDS, TIMES, COUNTS)
def test_any_stored_record_restores_to_a_bounded_valid_one(live: AdviceLive, now: datetime, replicas: int) -> None:
    ledger = AdviceLedger.from_status(live, DIGEST, now, replicas)
    assert 0 <= ledger.misses <= ledger.samples and 0 <= ledger.current_misses <= ledger.samples
    assert ledger.replica_seconds >= 0 and ledger.current_replica_seconds >= 0
    assert len(ledger.pending) <= ADVICE_LIVE_MAX_PENDING and all(p.at <= now for p in ledger.pending)
    AdviceLive.model_validate(ledger.status_patch())  # writes what the API accepts
    ledger.judge(now, prove_for=timedelta(days=7), interval=MIN, level=0.01)


def test_a_held_status_carries_the_record_and_a_verdict_is_written_at_once() -> None:
    """What a held status holds of the advice is written with it when a failure writes it (the live record,
    not presage advise's fields), and a verdict the record earns is a visible change."""
    live = AdviceLedger.start(DIGEST, T0, 3).status_patch()
    written = {"advice": {"verdict": "Advised", "patch": "{}", "time": "2025-03-01T00:00:00Z"}}
    held = merge_patch(written, {"advice": {"live": live}})
    assert replacing(held)["advice"] == {"live": live}
    newer = {"verdict": "Advised", "patch": '{"spec":{}}', "message": "newer"}
    assert merge_patch({"advice": newer}, replacing(held))["advice"] == {**newer, "live": live}
    assert "advice" not in replacing(written)
    proven = merge_patch(held, {"advice": {"verdict": "Proven"}})
    assert visible_key(proven) != visible_key(held)
    assert visible_key(merge_patch(held, {"advice": {"live": {"samples": 9}}})) == visible_key(held)

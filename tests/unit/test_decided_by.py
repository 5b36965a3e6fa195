"""status.decidedBy: hourly counts of what set each decision over the last day, bounded, restored from
status, and the Ready message's clause when the uncertainty guard set most of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.api.binding_constraints import FORECAST, Constraint
from presage_scaler.api.predictive_scaler_status import DECIDED_BY_HOURS, DecidedBy, PredictiveScalerStatus
from presage_scaler.engine.decided_by import GUARD_NOTE_HOURS, MAX_COUNT, NAMES, DecidedByLedger

NOW = datetime(2026, 11, 3, 9, 40, tzinfo=UTC)
HOUR = timedelta(hours=1)
GUARD = Constraint.FORECAST_UNCERTAINTY


def restored(ledger: DecidedByLedger) -> DecidedByLedger:
    """The ledger as the next evaluation reads it back from the status written (JSON, validated)."""
    written = PredictiveScalerStatus.model_validate({"decidedBy": ledger.status_patch()})
    return DecidedByLedger.from_status(written.decided_by)


def decide(ledger: DecidedByLedger, constraints: list[str], at: datetime) -> DecidedByLedger:
    """Each constraint observed once, every minute from ``at``, each through a status round trip."""
    for k, constraint in enumerate(constraints):
        ledger = restored(ledger)
        ledger.observe(constraint, at + k * timedelta(minutes=1))
    return ledger


def test_counts_each_decision_under_its_constraint_and_the_forecast_under_its_name():
    ledger = decide(DecidedByLedger(), ["", GUARD, GUARD, "MinReplicas"], NOW)
    assert ledger.counts() == {GUARD: 2, FORECAST: 1, "MinReplicas": 1}
    status = ledger.to_status()
    assert [(h.start, h.counts) for h in status.hours or ()] == [
        (datetime(2026, 11, 3, 9, tzinfo=UTC), {FORECAST: 1, "MinReplicas": 1, GUARD: 2})
    ]
    assert [(s.constraint, s.share) for s in status.shares or ()] == [
        (GUARD, 50.0),
        (FORECAST, 25.0),
        ("MinReplicas", 25.0),
    ]


def test_hours_roll_and_at_most_a_day_and_one_hour_is_kept():
    ledger = DecidedByLedger()
    for hour in range(30):
        ledger.observe(GUARD if hour < 5 else "", NOW + hour * HOUR)
    status = restored(ledger).to_status()
    starts = [h.start for h in status.hours or ()]
    assert len(starts) == DECIDED_BY_HOURS + 1
    assert starts[-1] == datetime(2026, 11, 3, 9, tzinfo=UTC) + 29 * HOUR
    assert starts[0] == starts[-1] - DECIDED_BY_HOURS * HOUR  # every decision of the last 24 hours is in
    assert starts == sorted(starts)
    assert ledger.counts() == {FORECAST: 25}  # the guard's hours have rolled out


def test_a_day_without_decisions_leaves_only_the_new_hour():
    ledger = decide(DecidedByLedger(), [GUARD] * 3, NOW)
    ledger.observe("", NOW + 25 * HOUR)
    assert ledger.counts() == {FORECAST: 1}


def test_hours_after_a_clock_that_went_back_are_dropped():
    ledger = decide(DecidedByLedger(), [GUARD] * 3, NOW + 2 * HOUR)
    ledger.observe("", NOW)
    assert ledger.counts() == {FORECAST: 1}


def test_shares_are_largest_first_ties_in_the_vocabularys_order():
    ledger = decide(DecidedByLedger(), ["MaxReplicas", "", "ScaleDownWindow", "ScaleDownWindow"], NOW)
    assert list(ledger.shares()) == ["ScaleDownWindow", FORECAST, "MaxReplicas"]
    assert sum(ledger.shares().values()) == pytest.approx(1.0)
    assert DecidedByLedger().shares() == {} and DecidedByLedger().to_status() == DecidedBy()


def test_a_restart_continues_from_status():
    """A new process (or leader) reads the counts back and adds to them: nothing lost, nothing twice."""
    before = decide(DecidedByLedger(), [GUARD, "", GUARD], NOW)
    after = DecidedByLedger.from_status(DecidedBy.model_validate(before.status_patch()))
    assert after.counts() == before.counts()
    after.observe(GUARD, NOW + 10 * timedelta(minutes=1))
    assert after.counts() == {GUARD: 3, FORECAST: 1}


def test_a_held_status_is_counted_once_whether_written_or_held():
    """The controller holds a status instead of writing it (status_cadence.write_due): the next
    evaluation starts from the held status, the merge patch over the written one. Held or written, or
    a write retried over a newer base, each decision is counted once."""
    written: dict[str, Any] = {}
    held = written
    for k in range(6):
        ledger = DecidedByLedger.from_status(PredictiveScalerStatus.model_validate(held).decided_by)
        ledger.observe(GUARD if k % 2 else "", NOW + k * timedelta(minutes=1))
        patch = {"decidedBy": ledger.status_patch()}
        held = merge_patch(held, patch)
        if k % 3 == 2:  # every third evaluation writes; the others hold
            written = merge_patch(written, patch)
            written = merge_patch(written, patch)  # a conflict's retry sends the same fields again
    total = sum(sum(h["counts"].values()) for h in held["decidedBy"]["hours"])
    assert total == 6 and written == held


def guard_day(hours: int, guard_per_hour: int, other_per_hour: int) -> DecidedByLedger:
    ledger = DecidedByLedger()
    for hour in range(hours):
        at = NOW - (hours - 1 - hour) * HOUR
        ledger = decide(ledger, [GUARD] * guard_per_hour + ["ScaleDownWindow"] * other_per_hour, at)
    return ledger


def test_the_guard_note_needs_more_than_half_of_the_decisions_in_half_a_day():
    assert GUARD_NOTE_HOURS == 12
    note = guard_day(12, 5, 1).guard_note()
    assert (
        note == "ForecastUncertainty held 83% of the last day's decisions: status.advice says what a tuned spec saves"
    )
    assert guard_day(11, 5, 1).guard_note() == ""  # not yet half a day counted
    assert guard_day(24, 1, 1).guard_note() == ""  # exactly half is not most
    assert guard_day(24, 2, 1).guard_note().startswith("ForecastUncertainty held 67% ")


def test_counts_never_pass_int32():
    status = DecidedBy.model_validate(
        {"hours": [{"start": "2026-11-03T09:00:00Z", "counts": {"ForecastUncertainty": MAX_COUNT}}]}
    )
    ledger = DecidedByLedger.from_status(status)
    ledger.observe(GUARD, NOW)
    assert ledger.counts() == {GUARD: MAX_COUNT}
    restored(ledger)  # still a valid status


def test_what_presage_never_writes_is_dropped_on_reading():
    status = DecidedBy.model_validate(
        {
            "hours": [
                {"start": "2026-11-03T08:30:00+02:00", "counts": {"Nonsense": 5, "MinReplicas": -3, "": 2}},
                {"start": "2026-11-03T06:10:00", "counts": {"ForecastUncertainty": 2}},  # no zone: UTC
                {"start": "2026-11-03T06:50:00Z", "counts": {"ForecastUncertainty": 1}},  # the same hour
            ],
            "shares": [{"constraint": "Nonsense", "share": "100"}],  # recomputed, never read
        }
    )
    ledger = DecidedByLedger.from_status(status)
    assert ledger.counts() == {GUARD: 3}
    assert [h.start for h in ledger.to_status().hours or ()] == [datetime(2026, 11, 3, 6, tzinfo=UTC)]


# --- whatever a status holds, reading it never fails and what is written stays bounded ---------------

TEXT = st.text(max_size=30)
TIMES = st.one_of(
    st.datetimes(timezones=st.sampled_from([UTC, None])).map(lambda t: t.isoformat()),
    st.datetimes(min_value=datetime(2026, 11, 1), max_value=datetime(2026, 11, 5)).map(lambda t: t.isoformat() + "Z"),
    TEXT,
    st.integers(),
)
COUNTS = st.dictionaries(st.one_of(st.sampled_from(NAMES), TEXT), st.integers(), max_size=10)
RAW = st.fixed_dictionaries(
    {},
    optional={
        "hours": st.lists(st.fixed_dictionaries({"start": TIMES, "counts": COUNTS}), max_size=DECIDED_BY_HOURS + 3),
        "shares": st.lists(
            st.fixed_dictionaries({"constraint": TEXT, "share": st.one_of(st.floats().map(str), TEXT)}), max_size=3
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(raw=RAW, now=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)))
def test_any_status_reads_without_failing_and_writes_a_bounded_valid_one(raw: dict[str, Any], now: datetime):
    try:
        status = PredictiveScalerStatus.model_validate({"decidedBy": raw})
    except ValidationError:
        return  # an unreadable status: the controller reads it as none (predictive_scaler_objects)
    now = now.replace(tzinfo=UTC)
    ledger = DecidedByLedger.from_status(status.decided_by)
    ledger.observe(GUARD, now)
    written = DecidedBy.model_validate(ledger.status_patch())
    hours = written.hours or []
    assert 1 <= len(hours) <= DECIDED_BY_HOURS + 1
    assert all(timedelta(0) <= now - h.start < (DECIDED_BY_HOURS + 1) * HOUR for h in hours)
    assert all(0 < c <= MAX_COUNT and name in NAMES for h in hours for name, c in h.counts.items())
    assert sum(ledger.shares().values()) == pytest.approx(1.0)
    written_shares = [(s.constraint, s.share) for s in written.shares or ()]
    assert [name for name, _ in written_shares] == list(ledger.shares())
    assert all(abs(share - 100 * ledger.shares()[name]) <= 0.00005 for name, share in written_shares)  # 4 decimals
    ledger.guard_note()

"""The rules that prove, fail and roll back advice (presage_scaler.engine.advice_proof)."""

from datetime import UTC, datetime, timedelta

from presage_scaler.engine.advice_proof import (
    live_judgement,
    moments_in,
    parse_service_level,
    rollback_due,
    watch_over,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
WEEK = timedelta(days=7)


def judge(misses: int, samples: int, scored: timedelta) -> str:
    return live_judgement(misses, samples, T0, T0 + scored, prove_for=WEEK, interval=MINUTE, level=0.01)


def test_service_level_is_a_share_of_the_time():
    assert parse_service_level("1%") == 0.01
    assert parse_service_level("0.5%") == 0.005


def test_proven_only_after_prove_for_within_the_level():
    assert judge(0, 1000, timedelta(days=6, hours=23)) == "Proving"
    assert judge(100, 10080, WEEK) == "Proven"  # 0.99 %
    assert judge(0, 0, WEEK) == "Proving"  # nothing scored proves nothing


def test_a_share_over_the_level_fails_only_once_a_day_is_scored():
    assert judge(30, 600, timedelta(hours=10)) == "Proving"  # 5 %, but not a day yet
    assert judge(30, 1440, timedelta(days=1)) == "FailedLive"
    assert judge(102, 10080, WEEK) == "FailedLive"


def test_misses_no_later_moment_can_make_up_fail_at_once():
    # A week of minutes holds 10,080 moments: 1 % of them is 100.8.
    assert moments_in(WEEK, MINUTE) == 10080
    assert judge(100, 200, timedelta(hours=4)) == "Proving"
    assert judge(101, 200, timedelta(hours=4)) == "FailedLive"


def test_rollback_when_the_window_cannot_meet_the_level_or_ends_above_it():
    day = timedelta(days=1)

    def due(misses: int, samples: int, after: timedelta) -> bool:
        return rollback_due(misses, samples, T0, T0 + after, every=day, interval=MINUTE, level=0.01)

    assert not due(14, 600, timedelta(hours=10))  # 1,440 moments: 14.4 allowed
    assert due(15, 600, timedelta(hours=10))
    assert not due(14, 1440, day)
    assert due(14, 1300, day)  # a window with gaps: 1.08 % of what was scored
    assert not watch_over(T0, T0 + day, day)
    assert watch_over(T0, T0 + day + MINUTE, day)

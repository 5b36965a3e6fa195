"""What set each of the last day's decisions: the live counterpart of ``presage backtest``'s "decided
by" line, kept in ``.status.decidedBy``.

Each successful evaluation counts one decision under its ``breakdown.constraint``, or
:data:`~presage_scaler.api.binding_constraints.FORECAST` when the forecast alone set the count, in
the hour (UTC, from the top of the hour) it was made. Kept: the hour of the newest decision and the
:data:`~presage_scaler.api.predictive_scaler_status.DECIDED_BY_HOURS` before it, so the hours always
hold every decision of the last 24 hours (and at most one hour more); the shares are over the hours
kept.

State is bounded and survives restarts: :meth:`DecidedByLedger.from_status` reads whatever a status
holds (an hour out of range, a name presage does not write, a negative or oversized count is dropped
or clamped, never a failure), and every count stays within int32. Pure: no I/O, time comes in as
arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from presage_scaler.api.binding_constraints import FORECAST, Constraint
from presage_scaler.api.predictive_scaler_status import DECIDED_BY_HOURS, DecidedBy, DecidedHour, DecidedShare
from presage_scaler.engine.status_record import StatusRecord
from presage_scaler.series.timegrid import align_down

HOUR = timedelta(hours=1)
NAMES: tuple[str, ...] = (FORECAST, *Constraint)
"""What a decision can be counted under, in the order a tie between shares is listed."""
MAX_COUNT = 2**31 - 1
"""A count never passes int32, the status field's type, however long a hand-written one ran."""

GUARD_NOTE_SHARE = 0.5
"""The uncertainty guard is called out when it set more than this share of the decisions counted..."""
GUARD_NOTE_HOURS = 12
"""...in at least this many hours: half a day, before which "most of the last day" is not yet known."""


def _hour_of(moment: datetime) -> datetime | None:
    """The start of ``moment``'s hour, in UTC (a time that names no zone is UTC); None for one too close
    to the calendar's ends to have one."""
    try:
        return align_down(moment if moment.tzinfo else moment.replace(tzinfo=UTC), HOUR)
    except OverflowError:
        return None


class DecidedByLedger(StatusRecord):
    """Hourly decision counts for one PredictiveScaler.

    Restore it with :meth:`from_status` from the status the evaluation started from, call
    :meth:`observe` once with the evaluation's decision, and write :meth:`status_patch` to
    ``.status.decidedBy``. A status held instead of written is the next evaluation's starting point,
    so each decision is counted exactly once either way.
    """

    def __init__(self, hours: Iterable[tuple[datetime, Mapping[str, int]]] = ()) -> None:
        kept: dict[datetime, dict[str, int]] = {}
        for start, counts in hours:
            if (aligned := _hour_of(start)) is None:
                continue
            hour = kept.setdefault(aligned, {})
            for name, count in counts.items():
                if name in NAMES and count > 0:
                    hour[name] = min(hour.get(name, 0) + count, MAX_COUNT)
        newest = sorted(start for start, counts in kept.items() if counts)[-(DECIDED_BY_HOURS + 1) :]
        self._hours = {start: kept[start] for start in newest}

    @classmethod
    def from_status(cls, status: DecidedBy | None) -> DecidedByLedger:
        """The ledger as the status left it (empty for None); ``shares`` are recomputed, not read."""
        return cls((hour.start, hour.counts) for hour in (status.hours if status and status.hours else ()))

    def observe(self, constraint: str, now: datetime) -> None:
        """Count one decision made at ``now``, set by ``constraint`` (``""``: the forecast). Hours older
        than the kept day are dropped, and so are hours after ``now``'s (a clock that went back)."""
        name = constraint or FORECAST
        current = align_down(now, HOUR)
        day = DECIDED_BY_HOURS * HOUR
        self._hours = {start: counts for start, counts in self._hours.items() if timedelta(0) <= current - start <= day}
        hour = self._hours.setdefault(current, {})
        hour[name] = min(hour.get(name, 0) + 1, MAX_COUNT)

    def counts(self) -> dict[str, int]:
        """Decisions per name over the kept hours, the most first (ties in :data:`NAMES` order)."""
        totals = {name: sum(hour.get(name, 0) for hour in self._hours.values()) for name in NAMES}
        ranked = sorted((name for name in NAMES if totals[name]), key=lambda name: -totals[name])
        return {name: totals[name] for name in ranked}

    def shares(self) -> dict[str, float]:
        """:meth:`counts` as fractions of the decisions counted, the largest first."""
        counts = self.counts()
        total = sum(counts.values())
        return {name: count / total for name, count in counts.items()}

    def guard_note(self) -> str:
        """A clause for the Ready message when the uncertainty guard set more than half of the last day's
        decisions, counted in at least :data:`GUARD_NOTE_HOURS` hours; "" otherwise."""
        share = self.shares().get(Constraint.FORECAST_UNCERTAINTY, 0.0)
        if share <= GUARD_NOTE_SHARE or len(self._hours) < GUARD_NOTE_HOURS:
            return ""
        return (
            f"{Constraint.FORECAST_UNCERTAINTY} held {100 * share:.0f}% of the last day's decisions: status.advice "
            "says what a tuned spec saves"
        )

    def to_status(self) -> DecidedBy:
        """``.status.decidedBy``: the kept hours, oldest first, and the shares over them."""
        return DecidedBy(
            hours=[
                DecidedHour(start=start, counts={name: counts[name] for name in NAMES if name in counts})
                for start, counts in sorted(self._hours.items())
            ]
            or None,
            shares=[DecidedShare(constraint=name, share=100 * share) for name, share in self.shares().items()] or None,
        )

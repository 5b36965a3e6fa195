"""The live record of an advice (``status.advice.live``): the advised spec's decisions beside the current
spec's, scored on the demand that comes, and the verdict they earn. Pure: no I/O, time comes in as
arguments.

At each evaluation while an advice is scored, the controller decides with the advised spec from the same
signal data, from the count and policy state the advised spec itself holds (:attr:`AdviceLedger.replicas`,
:attr:`AdviceLedger.state`: the current count when scoring starts), and hands both decisions to
:meth:`AdviceLedger.observe`, which

1. **settles** every pending pair whose moment has been observed, as :mod:`~presage_scaler.engine.shadow`
   scores a recommendation: a pair decided at *t* for the lead time *lead* is scored at the first sample at
   or after *t + lead* on each signal's grid, where the replicas the demand **required** are the largest,
   over signals, of ⌈observed / per-replica capacity⌉. A spec **missed** there when its count was below
   that. Each scored decision counts its count for one ``interval`` (in whole seconds) in the
   replica-hours, the advised spec's and the current spec's alike, so the two are compared over exactly
   the same moments;
2. **records** the new pair, unless it would be scored on the same samples as the newest pending one (an
   interval shorter than the resolution: the same demand would count twice) or
   :data:`~presage_scaler.api.predictive_scaler_status.ADVICE_LIVE_MAX_PENDING` pairs are pending (then it
   is not recorded until older ones are scored). Both thin the sample without favouring either spec. A
   pair whose moment has left the queried history is dropped unscored.

:meth:`AdviceLedger.judge` then applies :func:`~presage_scaler.engine.advice_proof.live_judgement`. Once
the verdict is Proven or FailedLive the record is kept as it was judged: nothing more is scored (the
controller stops deciding with the advised spec), and the verdict never changes again.

Everything lives in ``status.advice.live``, so a restarted controller goes on where the last one stopped:
the misses are restored from the under-provisioned percentages, which keep four decimals, so they come
back exact while fewer than a million moments are scored; the replica-hours, kept to four decimals of an
hour, come back as the whole replica-seconds they were summed in, exactly. A record for another patch (another
:attr:`AdviceLedger.digest`), or none, starts over: empty, since now, from the current count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from presage_scaler.api.predictive_scaler_status import (
    ADVICE_LIVE_MAX_PENDING,
    AdviceLive,
    LivePrediction,
    LiveVerdict,
)
from presage_scaler.engine.advice_proof import live_judgement
from presage_scaler.engine.evaluator import Recommendation, SignalData
from presage_scaler.engine.policy import PolicyState
from presage_scaler.engine.shadow import first_sample_at_or_after, required_replicas, unobservable
from presage_scaler.engine.status_record import StatusRecord

PROVING: LiveVerdict = "Proving"
SECONDS_PER_HOUR = 3600
LEAST_SAVING = -9999.9
"""The lowest saving written: an advised spec that used a hundred times the replica-hours or more (a
record no honest run makes) still fits ``saving``'s 16 characters."""


@dataclass(frozen=True)
class PairedDecision:
    """What the advised and the current spec decided at ``at``, for the moment ``at + lead``."""

    at: datetime
    advised: int
    current: int
    lead: timedelta

    @property
    def due(self) -> datetime:
        return self.at + self.lead


def _whole(value: float) -> int:
    """A count restored from status: a non-negative whole number, 0 for anything unreadable."""
    return int(value) if math.isfinite(value) and value > 0 else 0


def _seconds(hours: float) -> int:
    """Replica-seconds restored from replica-hours in status (rounded to four decimals of an hour, well
    within half a second): a non-negative whole number, 0 for anything unreadable."""
    seconds = hours * SECONDS_PER_HOUR
    return round(seconds) if math.isfinite(seconds) and seconds > 0 else 0


def _misses(percent: float, samples: int) -> int:
    """The misses an under-provisioned percentage of ``samples`` stands for, within [0, samples] (a
    percentage outside [0, 100] reads as the nearest end of it, NaN as 0)."""
    if math.isnan(percent):
        return 0
    return min(max(round(min(max(percent, 0.0), 100.0) * samples / 100.0), 0), samples)


def _scored_alike(earlier: PairedDecision, later: PairedDecision, data: Sequence[SignalData]) -> bool:
    """Whether two pairs are scored on the same sample of every signal."""
    return earlier.lead == later.lead and all(
        first_sample_at_or_after(earlier.due, s.history.step) == first_sample_at_or_after(later.due, s.history.step)
        for s in data
    )


@dataclass
class AdviceLedger(StatusRecord):
    """The live record of one advice (module docstring). Restore it with :meth:`from_status`, decide
    with the advised spec from :attr:`replicas` and :attr:`state`, :meth:`observe` both decisions,
    :meth:`judge`, and write :meth:`status_patch` to ``status.advice.live``."""

    digest: str
    since: datetime
    replicas: int
    """The count the advised spec holds: what it decides from at the next evaluation."""
    state: PolicyState = field(default_factory=PolicyState)
    """The advised spec's own policy state (its scale-down window, its last scale)."""
    samples: int = 0
    misses: int = 0
    current_misses: int = 0
    replica_seconds: int = 0
    current_replica_seconds: int = 0
    pending: list[PairedDecision] = field(default_factory=list)
    verdict: LiveVerdict = PROVING
    proven_time: datetime | None = None

    @classmethod
    def start(cls, digest: str, now: datetime, replicas: int) -> AdviceLedger:
        """An empty record of the patch ``digest``, scored from ``now``, from the count ``replicas``."""
        return cls(digest=digest, since=now.replace(microsecond=0), replicas=max(replicas, 0))

    @classmethod
    def from_status(cls, live: AdviceLive | None, digest: str, now: datetime, replicas: int) -> AdviceLedger:
        """The record ``status.advice.live`` holds for the patch ``digest``; a new one (:meth:`start`, from
        the current count ``replicas``) when it holds none or another patch's. Defined for any value a
        status can hold: counts out of range or not finite read as none, a pair decided after ``now`` is
        dropped, and a record said to start after ``now`` starts over."""
        if live is None or live.patch_digest != digest or live.since > now:
            return cls.start(digest, now, replicas)
        samples = max(live.samples, 0)
        pending = sorted(
            (
                PairedDecision(p.time, max(p.advised, 0), max(p.current, 0), timedelta(seconds=p.lead_time_seconds))
                for p in live.pending or ()
                if p.time <= now
            ),
            key=lambda p: p.at,
        )
        return cls(
            digest=digest,
            since=live.since,
            replicas=max(live.replicas, 0),
            state=PolicyState(live.scale_down_candidate_since, live.last_scale_time),
            samples=samples,
            misses=_misses(live.under_provisioned, samples),
            current_misses=_misses(live.current_under_provisioned, samples),
            replica_seconds=_seconds(live.replica_hours),
            current_replica_seconds=_seconds(live.current_replica_hours),
            pending=pending[:ADVICE_LIVE_MAX_PENDING],
            verdict=live.verdict,
            proven_time=live.proven_time,
        )

    @property
    def judged(self) -> bool:
        """Whether the verdict is Proven or FailedLive: the record is then kept as it was judged."""
        return self.verdict != PROVING

    def settle(self, data: Sequence[SignalData], now: datetime, interval: timedelta) -> int:
        """Score every pending pair whose moment ``data`` (queried at ``now``) has observed, each counting
        its counts for ``interval``; drop those that can no longer be observed. How many were scored."""
        seconds = round(interval.total_seconds())
        still_pending = []
        scored = 0
        for pair in self.pending:
            required = required_replicas(data, pair.due, now)
            if required is None:
                if not unobservable(data, pair.due, now):
                    still_pending.append(pair)
                continue
            scored += 1
            self.misses += pair.advised < required
            self.current_misses += pair.current < required
            self.replica_seconds += pair.advised * seconds
            self.current_replica_seconds += pair.current * seconds
        self.samples += scored
        self.pending = still_pending
        return scored

    def record(self, pair: PairedDecision, data: Sequence[SignalData]) -> bool:
        """Queue ``pair`` for scoring; False (not recorded) when the queue is full or the newest pending
        pair is scored on the same samples."""
        if len(self.pending) >= ADVICE_LIVE_MAX_PENDING:
            return False
        if self.pending and _scored_alike(self.pending[-1], pair, data):
            return False
        self.pending.append(pair)
        return True

    def observe(self, advised: Recommendation, current: Recommendation, interval: timedelta) -> int:
        """Score what the current evaluation's data settles, record the pair of decisions (made from the
        same data at the same moment), and keep the advised spec's count and policy state for the next
        evaluation. How many pairs were scored. Nothing changes once judged."""
        if self.judged:
            return 0
        scored = self.settle(current.data, current.generated_at, interval)
        pair = PairedDecision(
            # Whole seconds, as status keeps them, so a restored pair is scored on the same sample.
            at=current.generated_at.replace(microsecond=0),
            advised=advised.replicas,
            current=current.replicas,
            lead=timedelta(seconds=round(current.lead_time.value.total_seconds())),
        )
        self.record(pair, current.data)
        self.replicas = advised.replicas
        self.state = advised.state
        return scored

    def judge(self, now: datetime, *, prove_for: timedelta, interval: timedelta, level: float) -> LiveVerdict | None:
        """Judge the record at ``now`` (:func:`~presage_scaler.engine.advice_proof.live_judgement`); the
        new verdict when it changed (once, to Proven or FailedLive), None otherwise."""
        if self.judged:
            return None
        verdict = live_judgement(
            self.misses, self.samples, self.since, now, prove_for=prove_for, interval=interval, level=level
        )
        if verdict == PROVING:
            return None
        self.verdict = verdict
        self.proven_time = now.replace(microsecond=0) if verdict == "Proven" else None
        self.pending = []  # judged: nothing more is scored
        return verdict

    @property
    def replica_hours(self) -> float:
        """The advised spec's replica-hours over the scored moments."""
        return self.replica_seconds / SECONDS_PER_HOUR

    @property
    def current_replica_hours(self) -> float:
        """The current spec's replica-hours over the same moments."""
        return self.current_replica_seconds / SECONDS_PER_HOUR

    @property
    def under_provisioned(self) -> float:
        """The advised spec's share of scored moments short, in percent (0 before any)."""
        return 100.0 * self.misses / self.samples if self.samples else 0.0

    @property
    def current_under_provisioned(self) -> float:
        """The current spec's share of the same moments short, in percent."""
        return 100.0 * self.current_misses / self.samples if self.samples else 0.0

    @property
    def saving(self) -> str | None:
        """The share of the current spec's replica-hours the advised spec did not use, such as ``"4.2%"``
        (negative when it used more, and at least :data:`LEAST_SAVING`); None until something with a cost
        was scored."""
        if self.current_replica_seconds <= 0:
            return None
        saved = max(100.0 * (1.0 - self.replica_seconds / self.current_replica_seconds), LEAST_SAVING)
        text = f"{saved:.1f}%"
        return "0.0%" if text == "-0.0%" else text

    def to_status(self) -> AdviceLive:
        """``status.advice.live``: the figures, and the state :meth:`from_status` restores from."""
        return AdviceLive(
            current_replica_hours=self.current_replica_hours,
            current_under_provisioned=self.current_under_provisioned,
            last_scale_time=self.state.last_scale_time,
            patch_digest=self.digest,
            pending=[
                LivePrediction(
                    advised=p.advised,
                    current=p.current,
                    lead_time_seconds=round(p.lead.total_seconds()),
                    time=p.at,
                )
                for p in self.pending
            ]
            or None,
            proven_time=self.proven_time,
            replica_hours=self.replica_hours,
            replicas=self.replicas,
            samples=self.samples,
            saving=self.saving,
            scale_down_candidate_since=self.state.scale_down_candidate_since,
            since=self.since,
            under_provisioned=self.under_provisioned,
            verdict=self.verdict,
        )

"""Shadow scoring: was a recommendation right, once the moment it was made for has been observed?

A recommendation made at time *t* provisions for *t + lead*: capacity requested at *t* is ready
then. So it is scored against the demand observed at the first sample at or after *t + lead* (on
each signal's own grid). The replicas that demand **required** are the largest, over signals, of
⌈observed demand / per-replica capacity⌉ — no headroom, no buffer: what was actually needed.

* **covered**: recommended ≥ required.
* **over-provisioning**: max(recommended − required, 0) / max(required, 1); 0 when it fell short
  (a shortfall shows up in coverage instead).

The same two numbers are computed for the **reactive** figure at *t* (the reactive floor alone,
within min/max): a reactive autoscaler decides from demand at *t* and its replicas are ready at
*t + lead*, so scoring it on the same moments measures exactly the lag presage exists to remove.

**Quantile coverage** checks the calibration on live data: once each signal's whole sizing window
after *t* (the steps after its newest point at *t*, up to lead + interval) has been observed, its
highest demand is compared with the targetQuantile window forecast that sized the recommendation.
A prediction is scored when both its moment and its windows are observed.

State is bounded and lives in ``.status.shadow`` so it survives restarts: the recommendations not
yet scored (at most :data:`SHADOW_MAX_PENDING`; when full, new ones are not recorded until older
ones are scored) and hourly aggregates over the last :data:`SHADOW_HOURS` hours. A recommendation
that would be scored on exactly the samples of the newest pending one (made within the same signal
step, with the same lead time: an interval shorter than the resolution) is not recorded either:
it was made from the same data and would count the same demand twice. Both thin the sample without
favouring any outcome. Pure: no I/O, time comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.api.predictive_scaler_status import (
    SHADOW_HOURS,
    SHADOW_MAX_PENDING,
    ShadowBucket,
    ShadowPrediction,
    ShadowStatus,
)
from presage_scaler.engine.evaluator import Recommendation, SignalData
from presage_scaler.engine.policy import whole_replicas
from presage_scaler.engine.status_record import StatusRecord
from presage_scaler.series.timegrid import align_down, steps_for

BUCKET = timedelta(hours=1)
# Forecasts and demand are floats: a window maximum a rounding error above the forecast is covered.
_COVERED_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Prediction:
    """What was recommended at ``at``, for the moment ``at + lead``; and, per signal, the targetQuantile
    forecast of the highest demand over the sizing window ``window`` after ``at``."""

    at: datetime
    replicas: int
    reactive: int
    lead: timedelta
    forecasts: tuple[float, ...] = ()
    window: timedelta = timedelta(0)

    @property
    def due(self) -> datetime:
        return self.at + self.lead


@dataclass(frozen=True)
class Score:
    """One prediction, scored: the replicas demand required at its ``moment`` against both figures, and
    how many of its window forecasts covered their window's highest demand."""

    prediction: Prediction
    required: int
    quantile_covered: int = 0
    quantile_samples: int = 0

    @property
    def moment(self) -> datetime:
        return self.prediction.due

    @property
    def covered(self) -> bool:
        return self.prediction.replicas >= self.required

    @property
    def reactive_covered(self) -> bool:
        return self.prediction.reactive >= self.required

    @property
    def over_provisioning(self) -> float:
        return over_provisioning(self.prediction.replicas, self.required)

    @property
    def reactive_over_provisioning(self) -> float:
        return over_provisioning(self.prediction.reactive, self.required)


def over_provisioning(replicas: int, required: int) -> float:
    """max(replicas − required, 0) / max(required, 1): the excess as a fraction of what was needed."""
    return max(replicas - required, 0) / max(required, 1)


@dataclass(frozen=True)
class Bucket:
    """Scores whose moment fell in the hour starting at ``start``; the ratios are kept as sums."""

    start: datetime
    samples: int = 0
    covered: int = 0
    reactive_covered: int = 0
    over_provisioning: float = 0.0
    reactive_over_provisioning: float = 0.0
    quantile_covered: int = 0
    quantile_samples: int = 0

    def add(self, score: Score) -> Bucket:
        return replace(
            self,
            samples=self.samples + 1,
            covered=self.covered + score.covered,
            reactive_covered=self.reactive_covered + score.reactive_covered,
            over_provisioning=self.over_provisioning + score.over_provisioning,
            reactive_over_provisioning=self.reactive_over_provisioning + score.reactive_over_provisioning,
            quantile_covered=self.quantile_covered + score.quantile_covered,
            quantile_samples=self.quantile_samples + score.quantile_samples,
        )


@dataclass(frozen=True)
class ShadowSummary:
    """The rolling summary over the kept hours; the ratios are None until something was scored."""

    samples: int
    pending: int
    coverage: float | None
    reactive_coverage: float | None
    over_provisioning: float | None
    reactive_over_provisioning: float | None
    window_start: datetime | None
    last_scored_time: datetime | None
    quantile_coverage: float | None = None
    """Share of scored sizing windows whose highest demand the targetQuantile forecast covered."""


def prediction_from(recommendation: Recommendation, policy: PolicySpec) -> Prediction:
    """The prediction an evaluation makes; its reactive figure is the floor alone, within min/max.

    The floor is computed per signal even when it is disabled, so the comparison is always there.
    """
    floor = max(s.reactive_replicas for s in recommendation.decision.signals)
    reactive = min(max(floor, policy.min_replicas), policy.max_replicas)
    return Prediction(
        # Whole seconds, as status keeps them, so a restored prediction is scored on the same sample.
        at=recommendation.generated_at.replace(microsecond=0),
        replicas=recommendation.replicas,
        reactive=reactive,
        lead=timedelta(seconds=round(recommendation.lead_time.value.total_seconds())),
        forecasts=tuple(round(w.quantiles[policy.target_quantile], 4) for w in recommendation.windows),
        window=timedelta(seconds=round(recommendation.sizing_window.total_seconds())),
    )


def first_sample_at_or_after(moment: datetime, step: timedelta) -> datetime:
    """The sample of a signal on a ``step`` grid that observes ``moment``: the first at or after it."""
    aligned = align_down(moment, step)
    return aligned if aligned == moment else aligned + step


def _observed_at(signal: SignalData, moment: datetime, now: datetime) -> float | None:
    """The signal's value at the first sample at or after ``moment``; None while not yet observed."""
    step = signal.history.step
    sample = first_sample_at_or_after(moment, step)
    back = (align_down(now, step) - sample) // step
    values = signal.history.values
    if back < 0 or back >= len(values):
        return None
    return float(values[len(values) - 1 - back])


def quantile_covered(data: Sequence[SignalData], prediction: Prediction, now: datetime) -> tuple[int, int] | None:
    """How many of the prediction's window forecasts covered their sizing window's highest demand, of
    how many were scored; None until every window has been observed. A window that has fallen out of
    the history is not scored."""
    covered = samples = 0
    for signal, forecast in zip(data, prediction.forecasts, strict=False):
        step = signal.history.step
        first = align_down(prediction.at, step) + step
        last = first + (steps_for(prediction.window, step) - 1) * step
        newest = align_down(now, step)
        if last > newest:
            return None
        values = signal.history.values
        begin = len(values) - 1 - (newest - first) // step
        if begin < 0:
            continue
        highest = float(values[begin : len(values) - (newest - last) // step].max())
        covered += highest <= forecast + _COVERED_TOLERANCE * max(abs(forecast), 1.0)
        samples += 1
    return covered, samples


def _scored_alike(earlier: Prediction, later: Prediction, data: Sequence[SignalData]) -> bool:
    """Whether two predictions are scored on the same samples of every signal: the same moment's sample,
    and sizing windows of the same length from the same step."""
    if earlier.lead != later.lead or earlier.window != later.window:
        return False
    for signal in data:
        step = signal.history.step
        if first_sample_at_or_after(earlier.due, step) != first_sample_at_or_after(later.due, step):
            return False
        if align_down(earlier.at, step) != align_down(later.at, step):
            return False
    return True


def required_replicas(data: Sequence[SignalData], moment: datetime, now: datetime) -> int | None:
    """Replicas the observed demand at ``moment`` required; None until every signal has observed it."""
    if not data:
        return None
    required = 0
    for signal in data:
        value = _observed_at(signal, moment, now)
        if value is None:
            return None
        required = max(required, whole_replicas(max(value, 0.0) / signal.capacity))
    return required


def unobservable(data: Sequence[SignalData], moment: datetime, now: datetime) -> bool:
    """Whether some signal's history (queried at ``now``) already starts after ``moment``: it will never
    be seen, so a prediction for it can no longer be scored."""
    for signal in data:
        step = signal.history.step
        first = align_down(now, step) - (len(signal.history.values) - 1) * step
        if first_sample_at_or_after(moment, step) < first:
            return True
    return False


class ShadowLedger(StatusRecord):
    """Pending predictions and hourly score aggregates for one PredictiveScaler.

    Restore it with :meth:`from_status` from the status the evaluation started from, call
    :meth:`observe` with the new recommendation (it scores what the new data settles, then records
    the new prediction), and write :meth:`status_patch` (or :meth:`to_status`) to ``.status.shadow``.
    """

    def __init__(
        self,
        pending: Iterable[Prediction] = (),
        buckets: Iterable[Bucket] = (),
        *,
        last_scored: datetime | None = None,
        hours: int = SHADOW_HOURS,
    ) -> None:
        self.hours = hours
        self._pending = sorted(pending, key=lambda p: p.at)[:SHADOW_MAX_PENDING]
        self._buckets = {b.start: b for b in buckets}
        self._last_scored = last_scored

    @property
    def pending(self) -> tuple[Prediction, ...]:
        return tuple(self._pending)

    def record(self, prediction: Prediction) -> bool:
        """Queue a prediction for scoring; False (not recorded) when the queue is full."""
        if len(self._pending) >= SHADOW_MAX_PENDING:
            return False
        self._pending.append(prediction)
        return True

    def settle(self, data: Sequence[SignalData], now: datetime) -> list[Score]:
        """Score every pending prediction whose moment ``data`` (queried at ``now``) has observed.

        A prediction whose moment has fallen out of the history, or out of the kept hours, is dropped
        unscored: it can no longer be judged.
        """
        scores: list[Score] = []
        horizon = self._oldest_kept(now)
        still_pending = []
        for prediction in self._pending:
            required = required_replicas(data, prediction.due, now)
            quantile = quantile_covered(data, prediction, now)
            if required is not None and quantile is not None:
                scores.append(Score(prediction, required, *quantile))
            elif prediction.due >= horizon and not unobservable(data, prediction.due, now):
                still_pending.append(prediction)
        self._pending = still_pending
        for score in scores:
            start = align_down(score.moment, BUCKET)
            self._buckets[start] = self._buckets.get(start, Bucket(start)).add(score)
            if self._last_scored is None or score.moment > self._last_scored:
                self._last_scored = score.moment
        self._buckets = {start: b for start, b in self._buckets.items() if start >= horizon}
        return scores

    def observe(self, recommendation: Recommendation, policy: PolicySpec) -> list[Score]:
        """Score what the recommendation's data settles, then record the recommendation itself, unless
        the newest pending prediction will be scored on the same samples."""
        scores = self.settle(recommendation.data, recommendation.generated_at)
        prediction = prediction_from(recommendation, policy)
        if not self._pending or not _scored_alike(self._pending[-1], prediction, recommendation.data):
            self.record(prediction)
        return scores

    def _oldest_kept(self, now: datetime) -> datetime:
        return align_down(now, BUCKET) - (self.hours - 1) * BUCKET

    def summary(self) -> ShadowSummary:
        buckets = sorted(self._buckets.values(), key=lambda b: b.start)
        samples = sum(b.samples for b in buckets)

        def ratio(total: float) -> float | None:
            return total / samples if samples else None

        windows = sum(b.quantile_samples for b in buckets)
        last = self._last_scored
        return ShadowSummary(
            samples=samples,
            pending=len(self._pending),
            coverage=ratio(sum(b.covered for b in buckets)),
            reactive_coverage=ratio(sum(b.reactive_covered for b in buckets)),
            over_provisioning=ratio(sum(b.over_provisioning for b in buckets)),
            reactive_over_provisioning=ratio(sum(b.reactive_over_provisioning for b in buckets)),
            window_start=buckets[0].start if buckets else None,
            last_scored_time=last,
            quantile_coverage=sum(b.quantile_covered for b in buckets) / windows if windows else None,
        )

    def to_status(self) -> ShadowStatus:
        """``.status.shadow``: the summary, and the state :meth:`from_status` restores from."""
        summary = self.summary()
        buckets = sorted(self._buckets.values(), key=lambda b: b.start)
        return ShadowStatus(
            buckets=[
                ShadowBucket(
                    start=b.start,
                    samples=b.samples,
                    covered=b.covered,
                    reactive_covered=b.reactive_covered,
                    over_provisioning=b.over_provisioning / b.samples,
                    reactive_over_provisioning=b.reactive_over_provisioning / b.samples,
                    quantile_covered=b.quantile_covered if b.quantile_samples else None,
                    quantile_samples=b.quantile_samples or None,
                )
                for b in buckets
                if b.samples
            ]
            or None,
            coverage=summary.coverage,
            last_scored_time=summary.last_scored_time,
            over_provisioning=summary.over_provisioning,
            pending=[
                ShadowPrediction(
                    time=p.at,
                    replicas=p.replicas,
                    reactive=p.reactive,
                    lead_time_seconds=round(p.lead.total_seconds()),
                    window_forecasts=list(p.forecasts) or None,
                    window_seconds=round(p.window.total_seconds()) if p.forecasts else None,
                )
                for p in self._pending
            ]
            or None,
            quantile_coverage=summary.quantile_coverage,
            reactive_coverage=summary.reactive_coverage,
            reactive_over_provisioning=summary.reactive_over_provisioning,
            samples=summary.samples,
            window_start=summary.window_start,
        )

    @classmethod
    def from_status(cls, status: ShadowStatus | None) -> ShadowLedger:
        """The ledger as a previous process left it in ``.status.shadow`` (empty for None)."""
        status = status or ShadowStatus()
        return cls(
            pending=(
                Prediction(
                    at=p.time,
                    replicas=p.replicas,
                    reactive=p.reactive,
                    lead=timedelta(seconds=p.lead_time_seconds),
                    forecasts=tuple(p.window_forecasts or ()),
                    window=timedelta(seconds=p.window_seconds or 0),
                )
                for p in status.pending or ()
            ),
            buckets=(
                Bucket(
                    start=b.start,
                    samples=b.samples,
                    covered=b.covered,
                    reactive_covered=b.reactive_covered,
                    over_provisioning=b.over_provisioning * b.samples,
                    reactive_over_provisioning=b.reactive_over_provisioning * b.samples,
                    quantile_covered=b.quantile_covered or 0,
                    quantile_samples=b.quantile_samples or 0,
                )
                for b in status.buckets or ()
            ),
            last_scored=status.last_scored_time,
        )

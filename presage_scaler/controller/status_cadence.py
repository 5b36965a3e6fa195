"""When an evaluation's status is written, and when it is held in memory until a later one.

A status write costs the API server CPU whatever it carries, more than the evaluation itself
(``benchmarks/bench_controller.py`` measures both), and most evaluations change nothing anyone acts
on: the same recommendation, the same current count, the same conditions, only a newer forecast.
So a status is written at once when something visible changed (:func:`visible_key`), and otherwise
held: what is held (the shadow ledger's newest prediction, recorded forecasts, the newer forecast
figures) is the next evaluation's starting point, exactly as if it had been written.

The served recommendation stays fresh, by one of two rules:

* By its own age: a status is held only while the one written will still be within the bound KEDA
  and Agones are served under when the next evaluation writes it, and at most one in a row. When
  that is, is read from the spacing observed, not the nominal interval: a controller that cannot
  keep up (which needs the saving most) evaluates each scaler less often than its interval, and
  the next evaluation is expected as late as this one, with half again to spare.
* By its Lease: the evaluating replica publishes in the Lease it renews how late its scalers'
  confirmations are (:mod:`~presage_scaler.serving.freshness`), and every replica serves a held
  scaler's written recommendation as confirmed then. A status is then held while that lateness,
  and this scaler's own spacing, with a quarter again to spare and the time a record takes to
  reach the other replicas, stay within the bound; and at most :data:`HELD_AT_MOST` after the written
  status's forecast, which bounds what a restart loses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import JSON

ADVICE = "advice"
"""The status field presage advise writes, of which the controller writes only ``live`` (and the verdict
the live record earns, :mod:`~presage_scaler.controller.live_advice`) and ``applied``
(:mod:`~presage_scaler.controller.advice_apply`)."""
ADVICE_CONTROLLERS = ("live", "applied")
"""The parts of ``advice`` a held status carries and a failed evaluation writes with it."""
HELD_AT_MOST = timedelta(minutes=10)
"""A status confirmed by its Lease is still written this long after its forecast: what a replica's
restart loses (held shadow predictions, a TimesFM backend's recorded forecast, which is taken at most
every 10 minutes) is at most this much."""

SPACING_SPARE = 1.5
"""The next evaluation is expected within this many times the spacing observed (the written
status's age, or the interval if longer) from now."""

VOUCHED_SPARE = 1.25
"""The same spare where the Lease vouches: there a hold costs no freshness a write would give (either
way the served recommendation is as old as the time since it was last confirmed, and the owner
decides again at every evaluation and republishes every retry period), so the spare only guards
against the Lease's lateness growing before the next decision. Smaller than SPACING_SPARE because a
controller behind its schedule would otherwise write every status, which keeps it behind; checked by
``benchmarks/bench_controller.py`` (status writes per evaluation)."""


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def visible_key(status: JSON) -> str:
    """What a change of must be written at once: what KEDA, Agones and the policy act on (the counts,
    the scale-down window), what ``kubectl get`` explains the number with (binding signal and
    constraint, the backend) and shows of the advice (``adviceSaving``, which moves only when presage
    advise writes or the spec changes, and ``advice.verdict``, which the controller moves when the live
    record earns Proven or FailedLive: that Event is emitted when it is written), and the conditions,
    whose messages count except the forecast figures a successful ``Ready`` restates every evaluation.
    ``lastScaleTime`` does not count: no decision reads it, and it moves at every evaluation whose
    recommendation differs from the current count (every evaluation of a Shadow scaler that would scale).
    Nor does each signal's count (``signalStatuses[].replicas``): like the forecast figures it is derived
    from, it explains a number rather than being one anything acts on, and it moves whenever demand
    crosses a replica's capacity, also while a constraint (a rate limit, ``maxReplicas``) holds the
    recommendation still; the metrics export it at every evaluation (``benchmarks/bench_controller.py``
    counts the status writes per evaluation).

    Read from status as JSON, whatever a hand-written status holds, so it is compared as text.
    """
    breakdown, forecast = _dict(status.get("breakdown")), _dict(status.get("lastForecast"))
    conditions = status.get("conditions")
    shown = [
        [
            c.get("type"),
            c.get("status"),
            c.get("reason"),
            c.get("observedGeneration"),
            None if c.get("reason") == Reason.RECOMMENDED else c.get("message"),
        ]
        for c in (conditions if isinstance(conditions, list) else ())
        if isinstance(c, dict)
    ]
    key = [
        status.get("observedGeneration"),
        status.get("currentReplicas"),
        status.get("recommendedReplicas"),
        status.get("scaleDownCandidateSince"),
        breakdown.get("bindingSignal"),
        breakdown.get("constraint"),
        forecast.get("backend"),
        status.get("adviceSaving"),
        _dict(status.get(ADVICE)).get("verdict"),
        shown,
    ]
    return json.dumps(key, default=str, separators=(",", ":"))


def degraded(status: JSON) -> bool:
    """Whether a status as JSON shows its Degraded condition True."""
    conditions = status.get("conditions")
    return any(
        isinstance(c, dict) and c.get("type") == "Degraded" and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else ())
    )


@dataclass(frozen=True, slots=True)
class WrittenStatus:
    """What the written status shows: the hash of its :func:`visible_key` (kept for every scaler, so
    kept small), when its forecast was made, and whether a Lease may vouch for it: it has a
    recommendation and is not Degraded (:mod:`~presage_scaler.serving.freshness`)."""

    key: int
    generated_at: datetime | None
    vouchable: bool

    @classmethod
    def of(cls, status: JSON) -> WrittenStatus:
        generated = forecast_time(status)
        vouchable = generated is not None and isinstance(status.get("recommendedReplicas"), int)
        return cls(hash(visible_key(status)), generated, vouchable and not degraded(status))


@dataclass(frozen=True, slots=True)
class LeaseVouch:
    """What the scaler's Lease vouches for now: the lateness last published (a share of each
    scaler's bound), when, and how long a record may take to reach the replicas that serve."""

    lateness: float
    lag: timedelta
    published_at: datetime

    def confirmed_at(self, bound: timedelta) -> datetime:
        """The earliest any scaler of the Lease with this bound was confirmed, by that record."""
        return self.published_at - bound * self.lateness


def replacing(status: JSON) -> JSON:
    """A merge patch that turns the written status into ``status``, a held one computed over it: its
    fields, and null for each status field it lacks (a held status holds every key of the status it
    was merged over, nested ones included, so only a top-level field it cleared is missing). Of
    ``advice`` it writes only what the controller keeps there (:data:`ADVICE_CONTROLLERS`) and the held
    status carries: presage advise writes the rest, and the held status may carry an older one."""
    cleared = {
        field.alias or name: None for name, field in PredictiveScalerStatus.model_fields.items() if name != ADVICE
    }
    replaced = {**cleared, **{key: value for key, value in status.items() if key != ADVICE}}
    advice = _dict(status.get(ADVICE))
    # Never cleared here: a held status lacks one only when the status it was computed over did.
    kept = {key: advice[key] for key in ADVICE_CONTROLLERS if advice.get(key) is not None}
    if kept:
        replaced[ADVICE] = kept
    return replaced


def forecast_time(status: JSON) -> datetime | None:
    """``lastForecast.generatedAt`` of a status as JSON; None when absent or unreadable, UTC when it
    names no zone."""
    generated = _dict(status.get("lastForecast")).get("generatedAt")
    try:
        at = datetime.fromisoformat(generated) if isinstance(generated, str) else None
    except ValueError:
        return None
    return at if at is None or at.tzinfo else at.replace(tzinfo=UTC)


def write_due(
    written: WrittenStatus,
    status: JSON,
    interval: timedelta,
    served_within: timedelta,
    now: datetime,
    confirmed: datetime | None,
    vouch: LeaseVouch | None = None,
) -> bool:
    """Whether ``status`` (a successful evaluation's, at ``now``) must be written now rather than held.

    ``served_within``: the age past which the written recommendation is refused (KEDA's staleness
    bound, or an Agones fleet's maximum recommendation age if shorter). ``confirmed``: when the
    previous evaluation held its status (None when it wrote). ``vouch``: what the scaler's Lease
    vouches for, None without one.
    """
    if written.generated_at is None or written.key != hash(visible_key(status)):
        return True
    age = now - written.generated_at
    if confirmed is None and age + max(interval, age) * SPACING_SPARE <= served_within:
        return False  # by its own age: the written status is one evaluation behind at most
    if vouch is None or not written.vouchable or age >= HELD_AT_MOST:
        return True
    spacing = now - max(confirmed or written.generated_at, vouch.confirmed_at(served_within))
    expected = max(served_within * vouch.lateness, interval, spacing) * VOUCHED_SPARE + vouch.lag
    return expected > served_within

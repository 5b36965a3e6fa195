"""When an evaluation's status is written, and when it is held in memory until a later one.

A status write costs the API server about 6.5 ms of CPU whatever it carries (docs/controller.md),
more than the evaluation itself, and most evaluations change nothing anyone acts on: the same
recommendation, the same current count, the same conditions, only a newer forecast. So a status
is written at once when something visible changed (:func:`visible_key`), and otherwise held and
written by the next evaluation, so that the written status is never more than one evaluation
behind. What is held (the shadow ledger's newest prediction, recorded forecasts, the newer
forecast figures) is the next evaluation's starting point, exactly as if it had been written.

The served recommendation stays fresh: a status is held only while the one written will still be
within the bound KEDA and Agones are served under when the next evaluation writes it. When that
is, is read from the spacing observed, not the nominal interval: a controller that cannot keep up
(which needs the saving most) evaluates each scaler less often than its interval, and the next
evaluation is expected as late as this one, with half again to spare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import JSON

SPACING_SPARE = 1.5
"""The next evaluation is expected within this many times the spacing observed (the written
status's age, or the interval if longer) from now."""


def merge_patch(target: JSON, patch: JSON) -> JSON:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386) would be by the API server:
    objects merge key by key, a null removes the key, anything else replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def visible_key(status: JSON) -> str:
    """What a change of must be written at once: what KEDA, Agones and the policy act on (the counts,
    the scale-down window), what ``kubectl get`` explains the number with (binding signal and
    constraint, each signal's count, the backend), and the conditions, whose messages count except
    the forecast figures a successful ``Ready`` restates every evaluation. ``lastScaleTime`` does
    not count: no decision reads it, and it moves at every evaluation whose recommendation differs
    from the current count (every evaluation of a Shadow scaler that would scale).

    Read from status as JSON, whatever a hand-written status holds, so it is compared as text.
    """
    breakdown, forecast = _dict(status.get("breakdown")), _dict(status.get("lastForecast"))
    conditions, signals = status.get("conditions"), status.get("signalStatuses")
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
        [_dict(s).get("replicas") for s in signals] if isinstance(signals, list) else None,
        shown,
    ]
    return json.dumps(key, default=str, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class WrittenStatus:
    """What the written status shows: the hash of its :func:`visible_key` (kept for every scaler, so
    kept small) and when its forecast was made."""

    key: int
    generated_at: datetime | None

    @classmethod
    def of(cls, status: JSON) -> WrittenStatus:
        return cls(hash(visible_key(status)), forecast_time(status))


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
    holding: bool,
) -> bool:
    """Whether ``status`` (a successful evaluation's, at ``now``) must be written now rather than held.

    ``served_within``: the age past which the written recommendation is refused (KEDA's staleness
    bound, or an Agones fleet's maximum recommendation age if shorter). ``holding``: the previous
    evaluation's status was held; at most one is held in a row, so the written status is at most
    one evaluation behind and its age is the spacing between evaluations.
    """
    if holding or written.generated_at is None or written.key != hash(visible_key(status)):
        return True
    age = now - written.generated_at
    return age + max(interval, age) * SPACING_SPARE > served_within

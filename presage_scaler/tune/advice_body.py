"""The body of ``status.advice`` from a tuning run: the verdict, the changed fields as a merge patch a
user can apply, and the figures of the current and the advised spec on both parts of the history.

Two fields are the controller's, not presage advise's: ``live``, the advised spec's record on live demand,
and ``applied``, presage's own apply of it. The body never writes ``applied``; it keeps ``live`` (by
leaving it out) when it advises the very patch being scored, so a daily re-advice does not restart the
proof, and keeps the verdict that record earned (Proven) with it; when the patch changes it resets
``live`` (an explicit null), and scoring starts over on the new one. A FailedLive record is also kept
while the advice has no patch (it advises no change), so that the advice after it still knows which
spec failed (:mod:`~presage_scaler.tune.previous_advice`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from presage_scaler.api.predictive_scaler_status import AdviceStatus
from presage_scaler.api.quantities import format_duration
from presage_scaler.tune.knobs import Knobs
from presage_scaler.tune.output import alike_line, backend_name, forecaster_changed, tuned_wire
from presage_scaler.tune.search import Figures
from presage_scaler.tune.tuner import Outcome, TuneResult
from presage_scaler.tune.verdict import Advice

KNOB_FIELDS = {
    "targetQuantile": "policy.targetQuantile",
    "headroom": "policy.headroom",
    "guard": "policy.scaleDownUncertaintyGuard",
    "scaleDownWindow": "policy.stabilization.scaleDownWindow",
    "maxScaleDownRate": "policy.stabilization.maxScaleDownRate",
    "history": "signal.history",
    "season": "forecastBackend.season",
    "cycles": "forecastBackend.cycles",
}
"""Each knob (:meth:`Knobs.as_dict`) and the field a user changes to set it."""
LIVE, APPLIED = "live", "applied"
"""The controller's fields of ``status.advice`` (module docstring)."""
FAILED_LIVE = "FailedLive"
KEPT_VERDICTS = ("Proven", FAILED_LIVE)
"""The verdicts a live record earns, kept while the same patch is advised again."""


def merge_diff(before: Any, after: Any) -> Any:
    """The JSON merge patch (RFC 7396) that turns ``before`` into ``after``; None when they are equal."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None if before == after else after
    patch: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        if key not in before:
            patch[key] = value
        elif (change := merge_diff(before[key], value)) is not None:
            patch[key] = change
    return patch or None


def _part(figures: Figures) -> dict[str, Any]:
    return {
        "underProvisioned": figures.under_pct,
        "costVsOracle": figures.cost_vs_oracle,
        "replicaHours": figures.replica_hours,
    }


def _outcome(outcome: Outcome) -> dict[str, Any]:
    return {"inSample": _part(outcome.in_sample), "heldOut": _part(outcome.held_out)}


def changes(current: Knobs, advised: Knobs) -> list[dict[str, str]]:
    """The fields whose values differ, in the order of :data:`KNOB_FIELDS`."""
    before, after = current.as_dict(), advised.as_dict()
    return [
        {"field": path, "current": str(before[knob]), "advised": str(after[knob])}
        for knob, path in KNOB_FIELDS.items()
        if before[knob] != after[knob]
    ]


def spec_patch(result: TuneResult, current_spec: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch of the PredictiveScaler (as stored: ``current_spec``) that sets the knobs the
    chosen spec changes, and only those, and points it at the chosen SeasonalNaive backend only when
    its season or cycles changed (:func:`presage_scaler.tune.output.tuned_wire`)."""
    diff = merge_diff(result.default.knobs.spec_wire(current_spec), tuned_wire(result, current_spec))
    return None if diff is None else {"spec": diff}


def advice_status(
    result: TuneResult,
    advice: Advice,
    spec: dict[str, Any],
    service_level: str,
    generation: int,
    now: datetime,
    previous: object = None,
) -> dict[str, Any]:
    """``status.advice`` (wire form, validated against the API) for ``result`` on the scaler whose
    stored spec is ``spec`` and whose ``status.advice`` is ``previous`` (as stored); every field of
    :class:`AdviceStatus` presage advise writes is present, null when not set, so that a merge patch of
    it leaves nothing of an earlier advice behind, except ``live`` while the patch is the one it scores
    (module docstring)."""
    split = result.split
    chosen, start = result.chosen, result.default
    advised = advice.verdict == "Advised"
    patch = spec_patch(result, spec) if advised else None
    new_backend = advised and forecaster_changed(result)
    saving = 1.0 - chosen.held_out.replica_hours / start.held_out.replica_hours if advised else 0.0
    text = patch_text(patch) if patch is not None else None
    before = previous if isinstance(previous, dict) else {}
    proving = text is not None and before.get("patch") == text
    record = before.get(LIVE)
    failed_kept = text is None and isinstance(record, dict) and record.get("verdict") == FAILED_LIVE
    verdict, message = str(advice.verdict), advice.message
    if proving and before.get("verdict") in KEPT_VERDICTS:
        verdict = str(before["verdict"])
        message = f"{verdict} on live demand (status.advice.live). {message}"
    body: dict[str, Any] = {
        "time": now,
        "lastAttemptTime": now,
        "observedGeneration": generation,
        "serviceLevel": service_level,
        "verdict": verdict,
        "message": message,
        "current": _outcome(start),
        "advised": _outcome(chosen) if advised else None,
        "saving": 100.0 * saving,
        "changes": changes(start.knobs, chosen.knobs) if advised else None,
        "patch": text,
        "forecastBackend": {
            "name": backend_name(chosen.knobs),
            "season": format_duration(chosen.knobs.forecaster.season),
            "cycles": chosen.knobs.forecaster.cycles,
        }
        if new_backend
        else None,
        "alike": alike_line(result) if advised else None,
        "history": {
            "start": result.trace.start,
            "end": split.at(split.end - 1),
            "inSample": split.in_sample,
            "heldOut": split.held_out,
        },
        "error": None,
    }
    wire = AdviceStatus.model_validate(body).to_wire()
    written = {name: wire.get(name) for name in _wire_names()}
    if proving or failed_kept:
        del written[LIVE]
    return written


def patch_text(patch: dict[str, Any]) -> str:
    """``status.advice.patch``: the merge patch as compact JSON with sorted keys, so that the same patch
    is the same text (and the same ``status.advice.live.patchDigest``) at every advice."""
    return json.dumps(patch, separators=(",", ":"), sort_keys=True)


def failed_status(message: str, now: datetime) -> dict[str, Any]:
    """The merge patch of ``status.advice`` for a failed attempt: the error, and the advice made
    before it kept."""
    return AdviceStatus.model_validate({"error": message, "lastAttemptTime": now}).to_wire()


def _wire_names() -> list[str]:
    """The fields of ``status.advice`` presage advise writes: all but ``applied``."""
    return [info.alias or name for name, info in AdviceStatus.model_fields.items() if name != APPLIED]

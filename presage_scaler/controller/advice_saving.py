"""``status.adviceSaving``: what ``kubectl get ps -o wide`` shows of ``status.advice`` (SAVING).

``status.advice`` is presage advise's, written when it runs and never by the controller; whether the
advice has been applied is a question about the spec as it is now, which only the controller sees at
once. So the controller derives this one field at every status write, from the advice and the spec:
the saving with its unit while the advised changes are still to be made, ``Applied`` from the moment
the spec holds them, without waiting for the next advise run.
"""

from __future__ import annotations

import json

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceStatus
from presage_scaler.clients.kube.client import JSON

APPLIED = "Applied"


def advice_saving(advice: AdviceStatus | None, spec: object) -> str | None:
    """The SAVING cell for ``advice`` on a scaler whose stored spec is ``spec``: ``"5.1%"`` (the
    held-out saving) while the spec lacks the advised changes, :data:`APPLIED` once it holds them,
    ``"0%"`` with the verdict Keep; None without advice, or for a verdict that advises nothing (or
    advises what failed on live demand: FailedLive)."""
    if advice is None or advice.verdict == "Keep":
        return None if advice is None else "0%"
    if advice.verdict not in ("Advised", "Proven") or advice.saving is None:
        return None
    return APPLIED if holds_patch(spec, advice.patch) else f"{advice.saving:.1f}%"


def holds_patch(spec: object, patch: str | None) -> bool:
    """Whether ``spec`` (a scaler's spec as stored) already means what it would with ``patch`` (a JSON
    merge patch of the PredictiveScaler, as ``status.advice.patch`` holds it) applied: compared parsed,
    so that ``"0.95"`` and ``0.95``, or a field written out at its default, count as the same. A patch
    or spec that cannot be read counts as not held."""
    try:
        changes = json.loads(patch) if patch is not None else {"spec": {}}
    except ValueError:
        return False
    wanted = changes.get("spec") if isinstance(changes, dict) else None
    if not isinstance(spec, dict) or not isinstance(wanted, dict):
        return False
    try:
        return _parsed(merge_patch(spec, wanted)) == _parsed(spec)
    except SpecError:
        return False


def _parsed(spec: JSON) -> PredictiveScalerSpec:
    return parse(PredictiveScalerSpec, spec)

"""Which PredictiveScalers are advised, and with which settings, as ``spec.advice`` declares it.

* A scaler in Shadow is advised unless it sets ``spec.advice.enabled: false``; without ``spec.advice``
  it is advised with :class:`AdviceSpec`'s defaults (Shadow is a trial: advice is what it is for).
* A scaler in Enforce is advised only when it sets ``spec.advice`` (and not ``enabled: false``).
* A Shadow scaler in the multi-signal form without ``spec.advice`` is not advised: tuning replays one
  signal. It is :class:`Skipped` with the reason, which is not a failure (the API refuses
  ``spec.advice`` beside ``signals``, so no such scaler asked for advice).

Decided from the stored object's wire form (``mode``, ``signal``, ``advice``) without parsing the rest
of the spec, so that ``presage advise`` can pass over a scaler it does not advise without reading
anything of it, and the controller can tell which scalers have advice to score.
"""

from __future__ import annotations

from dataclasses import dataclass

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import AdviceSpec

NOT_SINGLE_SIGNAL = (
    "not advised by default in the multi-signal form (spec.signals): advice tunes one signal (spec.signal)"
)
DEFAULTS = parse(AdviceSpec, {}, path="spec.advice")
"""The settings of a Shadow scaler that sets no ``spec.advice``."""


@dataclass(frozen=True)
class Skipped:
    """A scaler that Shadow would advise by default but that cannot be advised, and why."""

    reason: str


def advice_settings(spec: object) -> AdviceSpec | Skipped | None:
    """How the scaler whose spec (wire form) is ``spec`` is advised: its ``spec.advice``, or the
    defaults for a Shadow scaler without one; :class:`Skipped` with the reason for a Shadow scaler
    that cannot be advised by default; None when it is not advised (it opted out, or it is in
    Enforce without ``spec.advice``). Raises :class:`~presage_scaler.api.parse.SpecError` when
    ``spec.advice`` is set but does not parse."""
    wire = spec if isinstance(spec, dict) else {}
    raw = wire.get("advice")
    if raw is not None:
        settings = parse(AdviceSpec, raw, path="spec.advice")
        return settings if settings.enabled else None
    if wire.get("mode", "Shadow") != "Shadow":
        return None
    if wire.get("signal") is None:
        return Skipped(NOT_SINGLE_SIGNAL)
    return DEFAULTS

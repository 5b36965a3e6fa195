"""The advice on live demand: at each evaluation, decide with the advised spec beside the current one and
score it (:mod:`~presage_scaler.engine.advice_live`), and write what that finds: ``status.advice.live``,
``status.advice.verdict`` once the record earns Proven or FailedLive, and that transition's Event.

**Which scalers.** An advice is scored while ``status.advice`` carries a patch with the verdict Advised and
the scaler is advised at all (:func:`~presage_scaler.api.advice_scope.advice_settings`); a Proven or
FailedLive record is kept as it was judged, and nothing more is decided for it.

**The advised spec** is the scaler's stored spec with ``status.advice.patch``'s spec fields merged in
(JSON merge patch), parsed as the API parses a spec. It decides from the data the evaluation read (no
query of its own: where the advice lengthens ``signal.history``, it reads the history the current spec
reads) at the same lead time, from its own count and policy state. Its forecast is the evaluation's own
when the advice changes nothing the forecast depends on; otherwise a second one is made from the same
data: by a SeasonalNaive of ``status.advice.forecastBackend``'s season and cycles, built here (the
ForecastBackend the patch names may not exist yet), or, for a policy change alone, by the scaler's own
backend at the advised quantile levels. Where the advice changes neither the forecast nor what sizing
depends on (the quantile levels, the interval), the evaluation's own calibrated windows are reused too,
and only the policy decides again. The advised spec is parsed once while neither the spec nor the patch
changes (:class:`AdvisedSpecs`). Nothing about the advice can fail the evaluation: an advised spec that
cannot be parsed or forecast is logged and not scored this time.

**Two writers, one object.** presage advise writes ``status.advice`` with a merge patch under its own
field manager, and ``status.advice.live`` only to reset it (null, when its patch changes). The controller
writes ``status.advice.live``, and the verdict it earns, as part of its own status patch (:func:`live_fields`),
and only over a status whose advice still has the patch the record scored: the status writer's patch is
conditional on the resourceVersion it was computed over, and rebuilt over the fresh object on a conflict,
so a record computed for a patch presage advise has since replaced is not written over the new advice.
The verdict is written again whenever the advice's differs from its record's (presage advise, writing
the same patch while the record turned Proven, may have put Advised back). A status held instead of
written (:mod:`~presage_scaler.controller.status_cadence`) carries the record, as it carries the shadow
ledger: the next evaluation starts from it, and a failed evaluation writes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from presage_scaler.api.advice_patch import advised_wire, patch_digest
from presage_scaler.api.advice_scope import advice_settings
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import AdviceSpec, PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceStatus, AdvisedBackend, LiveVerdict
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import Backend, BackendError, ForecastRequest
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.clients.kube.client import JSON
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.engine.advice_live import AdviceLedger
from presage_scaler.engine.advice_proof import parse_service_level
from presage_scaler.engine.evaluator import (
    EvaluationError,
    Recommendation,
    Sizing,
    decide,
    forecast_requests,
    size,
)
from presage_scaler.engine.leadtime import HorizonError
from presage_scaler.engine.past_forecasts import CalibrationState

log = logging.getLogger(__name__)


def advised_spec(spec_json: JSON, patch: str) -> PredictiveScalerSpec:
    """The stored spec ``spec_json`` with the spec fields of ``patch`` (``status.advice.patch``) merged in,
    parsed as the API parses a spec; :class:`SpecError` when the result is not a valid spec."""
    return parse(PredictiveScalerSpec, advised_wire(spec_json, patch))


class AdvisedSpecs:
    """Each scaler's advised spec, parsed once while neither its spec nor its patch changes: the parsed spec
    (:class:`~presage_scaler.controller.predictive_scaler_objects.SpecCache` keeps one object per
    generation, so the same object means the same spec) and the patch name the entry. One entry per scaler
    whose advice is being scored, replaced when either changes and dropped when it is not scored."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[PredictiveScalerSpec, str, PredictiveScalerSpec | SpecError]] = {}

    def parsed(self, scaler: str, spec: PredictiveScalerSpec, spec_json: JSON, patch: str) -> PredictiveScalerSpec:
        """:func:`advised_spec` of ``spec_json`` (the wire form of ``spec``) and ``patch`` for ``scaler``."""
        kept = self._items.get(scaler)
        if kept is None or kept[0] is not spec or kept[1] != patch:
            try:
                advised: PredictiveScalerSpec | SpecError = advised_spec(spec_json, patch)
            except SpecError as exc:
                advised = exc
            kept = self._items[scaler] = (spec, patch, advised)
        if isinstance(kept[2], SpecError):
            raise SpecError(kept[2].problems)  # a fresh one: the kept one's traceback does not grow
        return kept[2]

    def forget(self, scaler: str) -> None:
        """Drop ``scaler``'s entry: its advice is not scored now (none, another verdict, or judged)."""
        self._items.pop(scaler, None)


def _unscored(specs: AdvisedSpecs, scaler: str) -> None:
    """Nothing is decided for ``scaler``'s advice at this evaluation: its advised spec need not stay parsed."""
    specs.forget(scaler)


def _shapes(requests: Sequence[ForecastRequest]) -> list[tuple[int, tuple[float, ...], int | None]]:
    """What of each request the forecast depends on besides the history (the same data here)."""
    return [(r.horizon, r.quantiles, r.hindcast.window if r.hindcast else None) for r in requests]


def _sized_alike(advised: PredictiveScalerSpec, spec: PredictiveScalerSpec) -> bool:
    """Whether the two specs size the same forecasts of the same data alike: the same quantile levels and
    the same sizing window (lead time, the same for both, plus the interval)."""
    levels = (advised.policy.target_quantile, advised.policy.scale_down_quantile, advised.interval)
    return levels == (spec.policy.target_quantile, spec.policy.scale_down_quantile, spec.interval)


async def advised_decision(
    advised: PredictiveScalerSpec,
    forecaster: AdvisedBackend | None,
    spec: PredictiveScalerSpec,
    current: Recommendation,
    backend: Backend,
    calibration: CalibrationState | None,
    ledger: AdviceLedger,
) -> Recommendation:
    """What the advised spec decides from the data ``current`` (the current spec's recommendation) was
    made from, from the count and policy state ``ledger`` holds (module docstring). ``calibration``: the
    recorded forecasts the evaluation started from, for a backend that cannot hindcast."""
    data, lead, now = current.data, current.lead_time, current.generated_at
    requests = forecast_requests(advised, data, lead.value, backend.max_horizon)
    identity = backend.identity
    if forecaster is not None:
        own = SeasonalNaive(season=forecaster.season, cycles=forecaster.cycles, name=forecaster.name)
        forecasts, identity, calibration = await own.forecast(requests), own.identity, None
    elif _shapes(requests) == _shapes(forecast_requests(spec, data, lead.value, backend.max_horizon)):
        forecasts = list(current.forecasts)
        if _sized_alike(advised, spec):  # a policy change alone: the evaluation's own calibrated windows
            sizing = Sizing(current.windows, current.calibration)
            return decide(advised, data, forecasts, identity, lead, ledger.replicas, ledger.state, now, sizing)
    else:
        forecasts = await backend.forecast(requests)
    sizing = size(advised, data, forecasts, lead, now, calibration)
    return decide(advised, data, forecasts, identity, lead, ledger.replicas, ledger.state, now, sizing)


@dataclass(frozen=True)
class LiveAdvice:
    """What one evaluation did with the advice: its record, and the verdict it earned now, if any."""

    ledger: AdviceLedger
    transition: LiveVerdict | None
    service_level: str
    now: datetime
    """When the evaluation was made."""


SCORED = "Advised"
JUDGED = ("Proven", "FailedLive")


async def observe_advice(
    spec: PredictiveScalerSpec,
    spec_json: JSON,
    advice: AdviceStatus | None,
    current: Recommendation,
    current_replicas: int,
    backend: Backend,
    calibration: CalibrationState | None,
    scaler: str,
    *,
    specs: AdvisedSpecs,
) -> LiveAdvice | None:
    """The advice's live record after this evaluation (module docstring); None when there is nothing to
    score, or the advised spec could not decide this time. ``current_replicas``: the target's count, which
    a new record starts from; ``scaler``: its namespace/name, for the log and ``specs``, which keeps the
    advised spec parsed from one evaluation to the next."""
    settings = advice_settings(spec_json)
    if (
        not isinstance(settings, AdviceSpec)
        or advice is None
        or advice.patch is None
        or advice.verdict not in (SCORED, *JUDGED)
    ):
        _unscored(specs, scaler)
        return None
    now = current.generated_at
    ledger = AdviceLedger.from_status(advice.live, patch_digest(advice.patch), now, current_replicas)
    if ledger.judged:  # kept as judged: written again only to put its verdict back (live_fields)
        _unscored(specs, scaler)
        return LiveAdvice(ledger, None, settings.service_level, now)
    if advice.verdict != SCORED:  # a verdict its record does not hold: not the controller's to score
        _unscored(specs, scaler)
        return None
    try:
        advised = specs.parsed(scaler, spec, spec_json, advice.patch)
        decision = await advised_decision(advised, advice.forecast_backend, spec, current, backend, calibration, ledger)
    except (SpecError, EvaluationError, BackendError, HorizonError, RecursionError) as exc:
        log.warning("advice not scored scaler=%s: the advised spec cannot decide error=%s", scaler, exc)
        return None
    except Exception:  # a fault nobody foresaw in scoring the advice never fails the evaluation
        log.exception("advice not scored scaler=%s: unexpected error", scaler)
        return None
    ledger.observe(decision, current, spec.interval)
    transition = ledger.judge(
        now,
        prove_for=settings.prove_for,
        interval=spec.interval,
        level=parse_service_level(settings.service_level),
    )
    return LiveAdvice(ledger, transition, settings.service_level, now)


def live_fields(advice: AdviceStatus | None, live: LiveAdvice | None) -> JSON:
    """The fields of ``status.advice`` to write over a status whose advice is ``advice``: the live record,
    and the verdict it earned where the advice says otherwise; nothing when ``advice`` no longer has the
    patch the record scored (presage advise replaced it since)."""
    if live is None or advice is None or advice.patch is None or patch_digest(advice.patch) != live.ledger.digest:
        return {}
    fields: JSON = {"live": live.ledger.status_patch()}
    if live.ledger.judged and advice.verdict != live.ledger.verdict:
        fields["verdict"] = live.ledger.verdict
    return {"advice": fields}


def _days(span: timedelta) -> str:
    return f"{span / timedelta(days=1):.1f} days"


def event_of(live: LiveAdvice) -> tuple[str, Reason, str] | None:
    """The Event (type, reason, message) of the verdict ``live`` earned; None when it earned none."""
    ledger = live.ledger
    if live.transition is None:
        return None
    scored = (
        f"under-provisioned {ledger.under_provisioned:.2f} % of {ledger.samples} scored moments over "
        f"{_days(live.now - ledger.since)} (the current spec: {ledger.current_under_provisioned:.2f} %)"
    )
    if live.transition == "Proven":
        return (
            "Normal",
            Reason.ADVICE_PROVEN,
            f"the advised spec met serviceLevel {live.service_level} on live demand: {scored}, using "
            f"{ledger.saving or '0.0%'} fewer replica-hours than the current spec; status.advice.patch applies it",
        )
    return (
        "Warning",
        Reason.ADVICE_FAILED_LIVE,
        f"the advised spec missed serviceLevel {live.service_level} on live demand: {scored}; the next "
        "advice does not advise it again",
    )


async def record_live_event(events: EventRecorder, written: JSON, live: LiveAdvice | None) -> None:
    """Emit the Event of the verdict ``live`` earned, once ``written`` (the object as the status write
    left it) holds it: a write that did not carry the record (the advice changed meanwhile) tells nothing."""
    event = event_of(live) if live is not None else None
    if live is None or event is None:
        return
    status = written.get("status")
    advice = status.get("advice") if isinstance(status, dict) else None
    record = advice.get("live") if isinstance(advice, dict) else None
    if isinstance(record, dict) and (record.get("patchDigest"), record.get("verdict")) == (
        live.ledger.digest,
        live.transition,
    ):
        await events.record(written, *event)

"""The PredictiveScaler kind's status: the recommendation, its breakdown, the per-signal view, shadow
scoring, calibration and the advice ``presage advise`` writes.

Class docstrings are the type descriptions that the reference prints; keep them to one paragraph.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import PlainSerializer

from presage_scaler.api import quantities
from presage_scaler.api.binding_constraints import Constraint
from presage_scaler.api.conditions import CONDITION_LIST, Condition
from presage_scaler.api.predictive_scaler import MAX_SIGNALS, SINGLE_SIGNAL
from presage_scaler.api.schema import APIModel, Duration, Int32, Int64, MeasuredString, Timestamp, field

# Shadow scoring keeps a bounded amount of state in status: hourly buckets over a day, and the
# recommendations still waiting for their scored moment.
SHADOW_HOURS = 24
SHADOW_MAX_PENDING = 32

# Calibration on a backend's own errors keeps, for a backend that cannot recompute its past forecasts,
# a day of them per signal (one every ten minutes, plus those whose window is still open).
CALIBRATION_MAX_FORECASTS = 160


ExactFigure = Annotated[MeasuredString, PlainSerializer(quantities.format_exact, return_type=str)]
"""A figure compared with a spec value: written to every digit, so the comparison reads the same from status."""


class RecommendationBreakdown(APIModel):
    """RecommendationBreakdown records how the number was arrived at, so that a surprising replica count
    can be explained without re-deriving it."""

    binding_signal: str | None = field(
        "BindingSignal names the signal that required the most replicas. With several signals this answers "
        '"which dimension is driving the size of this workload", which is the first thing anyone asks.',
        default=None,
    )
    constraint: str | None = field(
        "Constraint names the binding constraint, if any: one of "
        + ", ".join(f'"{c}"' for c in Constraint)
        + ', or "" when the forecast bound.',
        default=None,
    )
    guard_lower: MeasuredString | None = field(
        "GuardLower is the uncertainty guard's lower value: the calibrated scaleDownQuantile forecast of the "
        "highest demand over the sizing window, of the signal whose forecast requires the most replicas (its "
        "upper value is that signal's signalStatuses[].sizedTo).",
        default=None,
    )
    guard_spread: ExactFigure | None = field(
        "GuardSpread is the guard's relative spread, (upper - lower) / max(lower, 1): a scale-down is held "
        "(constraint ForecastUncertainty) while it is above policy.scaleDownUncertaintyGuard.maxRelativeSpread "
        "and the guard is enabled. Written to every digit (the shortest decimal that reads back as the number "
        "the policy compared), so comparing it with maxRelativeSpread gives the policy's answer.",
        default=None,
    )
    predictive: Int32 = field("Predictive is the replica count implied by the forecast alone.")
    reactive: Int32 | None = field("Reactive is the replica count the reactive floor would have chosen.", default=None)

    notes = (
        "Predictive is the largest over signals of signalStatuses[].replicas, ceil((sizedTo + headroom) / "
        "capacity), where sizedTo is the calibrated targetQuantile forecast of the highest demand over the "
        "sizing window. That forecast includes the hold at the peak of the last 15 minutes: "
        "signalStatuses[].sizedBy is RecentPeak when that peak, not the backend's forecast, set it. Reactive "
        "is the largest over signals of signalStatuses[].reactive, and at least 1. BindingSignal is the signal "
        "that set the count: the one whose forecast requires predictive replicas, or, when the reactive floor "
        "is above that (constraint ReactiveFloor), the one whose floor it is. The single-signal form's signal is "
        f'named "{SINGLE_SIGNAL}" in status and metrics.',
    )


ForecastFigure = Annotated[MeasuredString, PlainSerializer(quantities.format_significant, return_type=str)]
"""A forecast as a person reads it (``kubectl get``'s FORECAST): rounded where a figure stops meaning anything."""


class LastForecast(APIModel):
    """LastForecast describes the binding signal's forecast."""

    backend: str = field("Backend that produced it.")
    generated_at: Timestamp = field("GeneratedAt is when the forecast was produced.")
    lead_time_seconds: Int64 = field("LeadTimeSeconds actually used for this forecast.")
    method: str | None = field(
        "Method says how the backend made this forecast when it is not its normal path, as the backend "
        'reports it: SeasonalNaive\'s "recent-level" fallback or "seasonal-naive (2 of 3 cycles)" with fewer '
        "seasons of history than cycles, TimesFM's interpolated or extrapolated quantile levels or \"point "
        'forecast only (useQuantileHead: false)". Absent on the normal path.',
        default=None,
    )
    model: str | None = field("Model identifier reported by the backend, if any.", default=None)
    point: ForecastFigure = field("Point is the point forecast at the lead time.")
    quantiles: dict[str, ForecastFigure] | None = field(
        "Quantiles maps quantile to forecast value at the lead time.", default=None
    )
    revision: str | None = field(
        "Revision of the model weights, when the backend pins one. presage does not vendor weights, so "
        "recording which revision produced a forecast is the only way to explain a behaviour change that "
        "came from the model rather than from configuration.",
        default=None,
    )

    notes = (
        "Point and Quantiles are written as a person reads a forecast (kubectl get's FORECAST): to 4 significant "
        "digits and every digit of the whole part (274.3, 5.107, 12346). The presage_forecast_point and "
        "presage_forecast_quantile metrics carry them unrounded.",
    )


SizedBy = Literal["Forecast", "RecentPeak", "Blend", "Uncalibrated"]


class WindowCalibration(APIModel):
    """WindowCalibration is how a signal's sizedTo was calibrated on the backend's own recent errors."""

    backend_share: MeasuredString | None = field(
        "BackendShare is the backend's weight in the reference (1, 0.75, 0.5, 0.25 or 0); the rest is blendedWith's.",
        default=None,
    )
    band_ratio: MeasuredString | None = field(
        "BandRatio multiplies the calibrated offset: the square root of the backend's band width now over "
        "its mean at the scored forecasts, within [0.5, 2]; 1 when the backend reports no band, or when "
        "scaling by it would have sized more over the last day than the noise alone (bandSaving).",
        default=None,
    )
    band_saving: MeasuredString | None = field(
        "BandSaving is how much less sizing in the unit the backend's band scales would have provisioned "
        "over the last day than in the noise's alone, as a share (negative: more, and the band is not used); "
        "absent when the backend reports no band.",
        default=None,
    )
    blended_with: Literal["LastHour", "Yesterday"] | None = field(
        "BlendedWith is the reference's partner when backendShare is below 1: the last hour's mean demand, "
        "or the highest demand of the same window the day before.",
        default=None,
    )
    held_at_recent_peak: bool | None = field(
        "HeldAtRecentPeak says whether the backend's highest point forecast was held at recentPeak.",
        default=None,
    )
    noise: MeasuredString | None = field(
        "Noise is the signal's recent step-to-step change, the unit the errors are measured in.", default=None
    )
    recent_peak: MeasuredString | None = field("RecentPeak is the highest demand of the last 15 minutes.", default=None)
    reference: MeasuredString | None = field(
        "Reference is what sizedTo is calibrated from: the backend's highest point forecast over the sizing "
        "window, held at recentPeak and blended as said here.",
        default=None,
    )
    scored_forecasts: Int32 = field(
        "ScoredForecasts is how many of the backend's forecasts of the last day were scored against the "
        "demand that followed; below 12 sizedTo is uncalibrated.",
        minimum=0,
    )


class SignalStatus(APIModel):
    """SignalStatus is the per-signal view of one evaluation."""

    calibration: WindowCalibration | None = field(WindowCalibration.__doc__ or "", default=None)
    forecast: MeasuredString = field("Forecast at the lead time, at the target quantile.")
    gap_steps: Int32 | None = field("GapSteps is how many steps of the query window were gap-filled.", default=None)
    name: str = field(f'Name of the signal: signals[].name, or "{SINGLE_SIGNAL}" for the single-signal form.')
    observed: MeasuredString = field("Observed is the latest sampled value.")
    reactive: Int32 | None = field(
        "Reactive is the replica count this signal's reactive floor requires: ceil(observed x (1 + "
        "bufferSize) / capacity) for a percentage, ceil(observed / capacity) + bufferSize for replicas. "
        "Absent when the floor is disabled.",
        default=None,
    )
    replicas: Int32 = field("Replicas this signal alone would have required.")
    sized_by: SizedBy | None = field(
        'SizedBy says what set sizedTo: "Forecast", the backend\'s forecast calibrated on its errors; '
        '"RecentPeak", the peak of the last 15 minutes, above the backend\'s forecast; "Blend", the '
        "backend's forecast blended with calibration.blendedWith; \"Uncalibrated\", the backend's own band "
        "(too few past forecasts scored).",
        default=None,
    )
    sized_to: MeasuredString | None = field(
        "SizedTo is what this signal's replicas were sized to: the calibrated targetQuantile forecast of the "
        "highest demand over the sizing window (from the next step up to the lead time plus the interval), so "
        "that replicas = ceil((sizedTo + headroom) / capacity) can be checked; the largest over signals is "
        "breakdown.predictive.",
        default=None,
    )


class ShadowPrediction(APIModel):
    """ShadowPrediction is one recommendation waiting to be scored: what presage recommended at Time, to be
    compared with the demand observed at Time plus LeadTimeSeconds."""

    lead_time_seconds: Int64 = field("LeadTimeSeconds is the lead time the recommendation was made for.", minimum=0)
    reactive: Int32 = field(
        "Reactive is what the reactive floor alone would have chosen at Time, within minReplicas and maxReplicas."
    )
    replicas: Int32 = field("Replicas is the replica count presage recommended at Time.")
    time: Timestamp = field("Time is when the recommendation was made.")
    window_forecasts: list[MeasuredString] | None = field(
        "WindowForecasts holds, per signal in spec order, the targetQuantile forecast of the highest demand "
        "over the sizing window (from the step after Time up to the lead time plus the interval) that sized "
        "the recommendation.",
        default=None,
        maxItems=MAX_SIGNALS,
    )
    window_seconds: Int64 | None = field(
        "WindowSeconds is the sizing window's length: the lead time plus the interval.", default=None, minimum=0
    )


class ShadowBucket(APIModel):
    """ShadowBucket aggregates the recommendations scored in one hour, by the hour their scored moment fell
    in."""

    covered: Int32 = field("Covered counts the scored moments where the recommendation covered demand.")
    quantile_covered: Int32 | None = field(
        "QuantileCovered counts the scored sizing windows whose highest demand was at or below the "
        "targetQuantile forecast.",
        default=None,
        minimum=0,
    )
    quantile_samples: Int32 | None = field(
        "QuantileSamples counts the sizing windows scored in this hour (one per signal and recommendation).",
        default=None,
        minimum=0,
    )
    over_provisioning: MeasuredString = field(
        "OverProvisioning is the mean of (recommended - required) / max(required, 1) over the scored moments, "
        "counting 0 where the recommendation fell short."
    )
    reactive_covered: Int32 = field("ReactiveCovered is Covered for the reactive floor's figure.")
    reactive_over_provisioning: MeasuredString = field(
        "ReactiveOverProvisioning is OverProvisioning for the reactive floor's figure."
    )
    samples: Int32 = field("Samples is how many recommendations were scored in this hour.", minimum=0)
    start: Timestamp = field("Start of the hour.")


class ShadowStatus(APIModel):
    """ShadowStatus scores past recommendations against what actually happened. A recommendation made at
    time t is scored once the demand at t plus its lead time has been observed: the replicas that demand
    required are the largest, over signals, of observed demand over per-replica capacity, rounded up. The
    recommendation covered demand when it was at least that many replicas. The same is computed for the
    reactive floor's figure at t, which is what a reactive autoscaler would have provisioned. Once the whole
    sizing window after t (up to the lead time plus the interval) has been observed, each signal's highest
    demand in it is compared with the targetQuantile forecast that sized the recommendation:
    QuantileCoverage near the targetQuantile means the forecasts are calibrated. The summary covers the last
    24 hours (Buckets) and survives restarts, together with the recommendations still waiting to be scored
    (Pending). It is recorded in both modes; in Shadow it is the evidence for switching to Enforce."""

    buckets: list[ShadowBucket] | None = field(
        "Buckets holds the hourly aggregates the summary is computed from, oldest first.",
        default=None,
        maxItems=SHADOW_HOURS,
    )
    coverage: MeasuredString | None = field(
        "Coverage is the fraction of scored moments where presage's recommendation covered demand.", default=None
    )
    last_scored_time: Timestamp | None = field(
        "LastScoredTime is the latest moment (t plus lead time) that was scored.", default=None
    )
    over_provisioning: MeasuredString | None = field(
        "OverProvisioning is the mean of (recommended - required) / max(required, 1) over the scored moments, "
        "counting 0 where the recommendation fell short: 0.2 means 20% more replicas than demand needed.",
        default=None,
    )
    pending: list[ShadowPrediction] | None = field(
        "Pending holds the recommendations not yet scored, oldest first. When it is full, new recommendations "
        "are not recorded until older ones are scored; a recommendation that would be scored on the same "
        "samples as the newest pending one (made within the same signal step) is not recorded.",
        default=None,
        maxItems=SHADOW_MAX_PENDING,
    )
    quantile_coverage: MeasuredString | None = field(
        "QuantileCoverage is the fraction of scored sizing windows whose highest demand was at or below "
        "presage's targetQuantile forecast: calibrated forecasts cover a fraction targetQuantile.",
        default=None,
    )
    reactive_coverage: MeasuredString | None = field(
        "ReactiveCoverage is Coverage for the reactive floor's figure on the same moments.", default=None
    )
    reactive_over_provisioning: MeasuredString | None = field(
        "ReactiveOverProvisioning is OverProvisioning for the reactive floor's figure on the same moments.",
        default=None,
    )
    samples: Int64 | None = field("Samples is how many recommendations the summary scores.", default=None, minimum=0)
    window_start: Timestamp | None = field(
        "WindowStart is the start of the oldest hour the summary covers.", default=None
    )


class CalibrationForecast(APIModel):
    """CalibrationForecast is one forecast presage sized from, kept until the demand it forecast has been
    observed and scored."""

    reference: MeasuredString = field("Reference is the highest point forecast over the sizing window.")
    spread: MeasuredString | None = field(
        "Spread is the widest the backend's band from its median to its 0.9 quantile was over the sizing "
        "window; absent when the backend reported no band.",
        default=None,
    )
    time: Timestamp = field("Time is the time of the newest history point the forecast was made from.")
    window: Int32 = field("Window is the sizing window in steps of the signal's resolution.", minimum=1)


class SignalCalibration(APIModel):
    """SignalCalibration holds one signal's recent forecasts, at the resolution they were made at."""

    forecasts: list[CalibrationForecast] | None = field(
        "Forecasts are the recorded forecasts, oldest first: at most one every ten minutes over the last day.",
        default=None,
        maxItems=CALIBRATION_MAX_FORECASTS,
    )
    name: str = field(f'Name of the signal: signals[].name, or "{SINGLE_SIGNAL}" for the single-signal form.')
    resolution: Duration = field("Resolution of the signal the forecasts were made at.")


class AdvicePart(APIModel):
    """AdvicePart is how a spec did, replayed over one part of the history."""

    cost_vs_oracle: MeasuredString = field(
        "CostVsOracle is its replica-hours over an oracle's, which knew demand in advance and had every "
        "replica ready exactly when needed."
    )
    replica_hours: MeasuredString = field("ReplicaHours is the replica-hours it would have used.")
    under_provisioned: MeasuredString = field(
        "UnderProvisioned is the share of steps whose demand exceeded the ready capacity, in percent."
    )


class AdviceOutcome(APIModel):
    """AdviceOutcome is how a spec did on the part the advice was chosen on and on the part held out."""

    held_out: AdvicePart = field("HeldOut is the later part, never looked at when choosing.")
    in_sample: AdvicePart = field("InSample is the part the advice was chosen on.")


class AdviceChange(APIModel):
    """AdviceChange is one field the advice changes."""

    advised: str = field("Advised is the value advised.")
    current: str = field("Current is the value in the spec now.")
    field_path: str = field(
        "Field is the path of the field in the PredictiveScaler's spec (policy.targetQuantile), or "
        "forecastBackend.season and forecastBackend.cycles for the SeasonalNaive backend it refers to.",
        alias="field",
    )


class AdvisedBackend(APIModel):
    """AdvisedBackend is the SeasonalNaive ForecastBackend the advised spec refers to (forecast.backendRef),
    to create when it does not exist."""

    cycles: Int32 = field("Cycles is the number of seasons averaged.", minimum=1)
    name: str = field("Name is the ForecastBackend's name, which says what it is (seasonal-naive-24h-x2).")
    season: Duration = field("Season is the period of the pattern repeated.")


class AdviceHistory(APIModel):
    """AdviceHistory is the stretch of the signal the advice was made from, and how it was cut."""

    end: Timestamp = field("End is the time of the newest step read.")
    held_out: Duration = field("HeldOut is the length of the later part, held out to check the choice.")
    in_sample: Duration = field("InSample is the length of the part the advice was chosen on.")
    start: Timestamp = field("Start is the time of the oldest step read (the warm-up begins there).")


AdviceVerdict = Literal["Advised", "Proven", "FailedLive", "Keep", "NotEnoughHistory", "NothingMet", "HeldOutFailed"]

LiveVerdict = Literal["Proving", "Proven", "FailedLive"]
ADVICE_LIVE_MAX_PENDING = SHADOW_MAX_PENDING


class LivePrediction(APIModel):
    """LivePrediction is one decision the advised and the current spec made, not yet scored."""

    advised: Int32 = field("Advised is the replica count the advised spec decided.", minimum=0)
    current: Int32 = field("Current is the replica count the current spec decided.", minimum=0)
    lead_time_seconds: Int64 = field("LeadTimeSeconds is the lead time the decisions were made for.", minimum=0)
    time: Timestamp = field("Time is when the decisions were made.")


class AdviceLive(APIModel):
    """AdviceLive is how the advised spec (status.advice.patch) does on live demand, written by the
    controller: at every evaluation it also decides with the advised spec, from the same signal data (a
    second forecast only where the advice changes the forecaster's settings), from the count the advised
    spec itself would have had, and scores both decisions as status.shadow scores the live one, against
    the demand observed once the lead time has passed. Scoring starts again whenever the patch changes."""

    current_replica_hours: MeasuredString = field(
        "CurrentReplicaHours is the replica-hours the current spec decided over the same scored moments."
    )
    current_under_provisioned: MeasuredString = field(
        "CurrentUnderProvisioned is the current spec's under-provisioned share of the same moments, in percent."
    )
    last_scale_time: Timestamp | None = field(
        "LastScaleTime is when the advised spec last changed its count (its own policy state).", default=None
    )
    patch_digest: str = field(
        "PatchDigest identifies the status.advice.patch scored (the first 16 hex digits of its SHA-256).",
        maxLength=16,
    )
    pending: list[LivePrediction] | None = field(
        "Pending holds the decisions not yet scored (their moment is not observed yet), oldest first.",
        default=None,
        maxItems=ADVICE_LIVE_MAX_PENDING,
    )
    proven_time: Timestamp | None = field("ProvenTime is when the verdict became Proven.", default=None)
    replica_hours: MeasuredString = field("ReplicaHours is the replica-hours the advised spec decided.")
    replicas: Int32 = field(
        "Replicas is the count the advised spec holds now: the count it decides from at the next evaluation.",
        minimum=0,
    )
    samples: Int64 = field("Samples is how many moments were scored.", minimum=0)
    saving: str | None = field(
        'Saving is the share of CurrentReplicaHours the advised spec did not use, such as "4.2%" (negative '
        "when it used more); kubectl get -o wide shows it (LIVE).",
        default=None,
        maxLength=16,
    )
    scale_down_candidate_since: Timestamp | None = field(
        "ScaleDownCandidateSince is the advised spec's own scale-down window start.", default=None
    )
    since: Timestamp = field("Since is when scoring this advice began.")
    under_provisioned: MeasuredString = field(
        "UnderProvisioned is the share of scored moments whose demand exceeded the advised spec's count, in percent."
    )
    verdict: LiveVerdict = field(
        "Verdict is Proving until the advised spec has met serviceLevel for spec.advice.proveFor (Proven), or "
        "has missed it (FailedLive: under-provisioned for more of the time than serviceLevel, once at least "
        "a day is scored)."
    )


class AdviceApplied(APIModel):
    """AdviceApplied is presage's own apply of a Proven advice (spec.advice.apply: WhenProven)."""

    generation: Int64 = field("Generation is the metadata.generation the apply made.")
    misses: Int64 | None = field(
        "Misses counts the Samples whose demand exceeded the applied spec's count.", default=None, minimum=0
    )
    patch: str = field("Patch is the JSON merge patch applied (the advised fields only).")
    restore: str = field(
        "Restore is the JSON merge patch that puts back the fields the apply changed, and only those (null "
        "for a field that was absent)."
    )
    rolled_back: str | None = field("RolledBack says why the previous policy was restored, when it was.", default=None)
    rolled_back_time: Timestamp | None = field("RolledBackTime is when the previous policy was restored.", default=None)
    samples: Int64 | None = field(
        "Samples counts the decisions made after Time and scored (as status.shadow scores them) within "
        "spec.advice.every of it: the moments the rollback is judged on.",
        default=None,
        minimum=0,
    )
    time: Timestamp = field("Time is when the advice was applied.")


class AdviceStatus(APIModel):
    """AdviceStatus is what presage advise found for the spec as it was (spec.advice). Verdict Advised: the
    changes met the service level on the part chosen on and on the part held out, for fewer replica-hours
    held out than the current spec; Keep: the current spec is the cheapest found that meets it;
    NotEnoughHistory: the part chosen on is shorter than 7 days; NothingMet: no candidate met the service
    level on the part chosen on; HeldOutFailed: the choice missed it held out, or cost more there than the
    current spec; Proven: an Advised advice that met the service level on live demand for
    spec.advice.proveFor (status.advice.live); FailedLive: one that missed it there, which the next advice
    does not advise again. Advised, Proven and FailedLive carry changes and a patch. A failed attempt sets
    Error and keeps the advice made before it."""

    advised: AdviceOutcome | None = field("Advised is how the advised spec did.", default=None)
    applied: AdviceApplied | None = field(AdviceApplied.__doc__ or "", default=None)
    alike: str | None = field(
        "Alike says how far the advised spec's held-out figures could as well have landed: what the "
        "candidates nearly as cheap on the part chosen on did held out.",
        default=None,
    )
    changes: list[AdviceChange] | None = field(
        "Changes lists the fields the advice changes.", default=None, maxItems=16
    )
    current: AdviceOutcome | None = field("Current is how the current spec did.", default=None)
    error: str | None = field("Error says why the last attempt failed; absent when it succeeded.", default=None)
    forecast_backend: AdvisedBackend | None = field(AdvisedBackend.__doc__ or "", default=None)
    history: AdviceHistory | None = field(AdviceHistory.__doc__ or "", default=None)
    live: AdviceLive | None = field(AdviceLive.__doc__ or "", default=None)
    last_attempt_time: Timestamp | None = field("LastAttemptTime is when presage advise last tried.", default=None)
    message: str | None = field("Message says, in one line, what the verdict rests on and what to do.", default=None)
    observed_generation: Int64 | None = field(
        "ObservedGeneration is the metadata.generation of the spec the advice is for.", default=None
    )
    patch: str | None = field(
        "Patch is a JSON merge patch of the PredictiveScaler that applies the advice: kubectl patch "
        'predictivescaler NAME --type merge -p "$(kubectl get predictivescaler NAME -o '
        "jsonpath='{.status.advice.patch}')\" (create forecastBackend first when it is set).",
        default=None,
    )
    saving: MeasuredString | None = field(
        "Saving is the share of the current spec's held-out replica-hours the advised spec would not have "
        "used, in percent (0 with Keep).",
        default=None,
    )
    service_level: str | None = field("ServiceLevel is the spec.advice.serviceLevel the advice meets.", default=None)
    time: Timestamp | None = field("Time is when the advice was made.", default=None)
    verdict: AdviceVerdict | None = field("Verdict is what the advice is (see above).", default=None)


DECIDED_BY_HOURS = 24


class DecidedHour(APIModel):
    """DecidedHour counts one hour's decisions by what decided them."""

    counts: dict[str, Int32] = field(
        'Counts maps the constraint that set each decision\'s count ("Forecast" when none did) to how many '
        "decisions it set."
    )
    start: Timestamp = field("Start of the hour.")


class DecidedShare(APIModel):
    """DecidedShare is the share of the last day's decisions one constraint set."""

    constraint: str = field('Constraint is breakdown.constraint\'s value, or "Forecast" when the forecast bound.')
    share: MeasuredString = field("Share is the share of the decisions it set, in percent.")


class DecidedBy(APIModel):
    """DecidedBy is what set the last day's decisions: the live counterpart of presage backtest's "decided
    by" line. When the uncertainty guard (ForecastUncertainty) set more than half of them, the Ready
    condition's message says so and points at status.advice."""

    hours: list[DecidedHour] | None = field(
        "Hours holds the counts of the last 24 hours, oldest first.", default=None, maxItems=DECIDED_BY_HOURS + 1
    )
    shares: list[DecidedShare] | None = field(
        "Shares is each constraint's share of the decisions in Hours, the largest first.", default=None, maxItems=16
    )


class PredictiveScalerStatus(APIModel):
    """PredictiveScalerStatus is the observed state of a PredictiveScaler."""

    advice: AdviceStatus | None = field(AdviceStatus.__doc__ or "", default=None)
    advice_saving: str | None = field(
        "AdviceSaving is status.advice as kubectl get -o wide shows it (SAVING), written by the controller: the "
        'share of held-out replica-hours applying the advice saves, such as "5.1%", while the spec does not '
        'hold the advised changes yet; "0%" with the verdict Keep; "Applied" once the spec holds every change '
        "status.advice.patch makes. Absent without advice, and for a verdict that advises nothing.",
        default=None,
        maxLength=16,
    )
    breakdown: RecommendationBreakdown | None = field(RecommendationBreakdown.__doc__ or "", default=None)
    decided_by: DecidedBy | None = field(DecidedBy.__doc__ or "", default=None)
    calibration: list[SignalCalibration] | None = field(
        "Calibration holds, per signal, the recent forecasts of a backend that cannot recompute its past "
        "forecasts (TimesFM), so that sizing stays calibrated on the backend's own errors across restarts. "
        "Empty for SeasonalNaive, which recomputes them from the history at every evaluation.",
        default=None,
        maxItems=MAX_SIGNALS,
    )
    conditions: list[Condition] | None = field(
        "Conditions: Ready (True while a recommendation fresh enough to serve exists; reason Recommended, "
        "LastRecommendationHeld, RecommendationStale or NoRecommendation), Degraded (True when the last "
        "evaluation failed; the reason names the failure), Consumed (whether a ScaledObject or an Agones Fleet "
        "applies the recommendation; reason ScalingModifiers when a ScaledObject's formula stands between presage's "
        "answer and the count) and SpecAdjusted (True when the last evaluation sized the scaler with anything other "
        "than its spec states or probably means; reason CapacityDefaulted, AbsoluteHeadroom, LeadTimeClamped, "
        "HorizonCut or HorizonRaised, the most consequential found, and every one in the message; AsSpecified "
        "otherwise).",
        default=None,
        **CONDITION_LIST,
    )
    current_replicas: Int32 | None = field("CurrentReplicas last read from the target.", default=None)
    last_forecast: LastForecast | None = field(LastForecast.__doc__ or "", default=None)
    last_scale_time: Timestamp | None = field(
        "LastScaleTime is when presage last recommended a count other than the target's current one.",
        default=None,
    )
    observed_generation: Int64 | None = field(
        "ObservedGeneration is the metadata.generation of the spec the last evaluation used.", default=None
    )
    recommended_replicas: Int32 | None = field(
        "RecommendedReplicas is what presage would apply (and does apply in Enforce mode).", default=None
    )
    scale_down_candidate_since: Timestamp | None = field(
        "ScaleDownCandidateSince tracks the start of the scale-down stabilization window. Cleared whenever "
        "the recommendation stops being below current.",
        default=None,
    )
    shadow: ShadowStatus | None = field(ShadowStatus.__doc__ or "", default=None)
    signal_statuses: list[SignalStatus] | None = field(
        "SignalStatuses carries one entry per configured signal, so a multi-signal scaler can be debugged "
        "without guessing which dimension produced which number.",
        default=None,
    )

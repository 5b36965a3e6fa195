"""The PredictiveScaler kind's spec: target, signals, lead time, forecast, policy and advice. Its
status is :mod:`~presage_scaler.api.predictive_scaler_status`, a signal's Prometheus query
:mod:`~presage_scaler.api.prometheus_query`.

Class docstrings are the type descriptions that the reference prints; keep them to one paragraph.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from presage_scaler.api import quantities
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.quantities import nanoseconds
from presage_scaler.api.schema import (
    APIModel,
    DecimalString,
    Duration,
    Int32,
    IntOrDecimal,
    IntOrPercent,
    Quantile,
    Rule,
    cel_matches,
    field,
)
from presage_scaler.api.validation_rules import at_least, cel_nanoseconds, durations_parse

Mode = Literal["Shadow", "Enforce"]
LeadTimeSource = Literal["Static", "Observed"]

MAX_SIGNALS = 16
SINGLE_SIGNAL = "demand"
"""The name the single-signal form (``spec.signal``) goes by in status and metrics: what it measures, and
not ``default``, the default ForecastBackend's name."""
# A percentage strictly between 0 and 100: "1%", "0.5%", "99.9%".
SERVICE_LEVEL_PATTERN = r"^(0\.[0-9]*[1-9][0-9]*|[1-9][0-9]?(\.[0-9]+)?)%$"


# --- signals and capacity ------------------------------------------------------------------


_CAPACITY_QUERY = (
    "Query optionally derives per-replica capacity from live data instead of a constant, e.g. average "
    "capacity across the fleet. Takes precedence over PerReplica when set."
)


class CapacitySpec(APIModel):
    """CapacitySpec converts a signal's units into replicas."""

    per_replica: IntOrDecimal = field(
        "PerReplica is how many units of the signal one replica serves. If the signal is already "
        "expressed in replicas (for example, forecasting allocated GameServers directly), set this to 1.",
        default=1,
    )
    query: PrometheusQuery | None = field(_CAPACITY_QUERY, default=None)

    cel_rules = (
        Rule(
            cel=(
                "has(self.query) || !"
                + cel_matches("string(self.perReplica)", quantities.DECIMAL_PATTERN)
                + " || double(string(self.perReplica)) > 0.0"
            ),
            message="perReplica must be greater than 0",
            check=lambda c: c.query is not None or c.per_replica.value > 0,
            field_path=".perReplica",
        ),
    )


_HISTORY = (
    "History is how much past data to feed the model. Capped by the backend's maximum context length. "
    "Two to four weeks is a reasonable default for workloads with weekly seasonality."
)
_RESOLUTION = (
    "Resolution is the bucket width the series is sampled at. This is the single most consequential "
    "tuning knob: a foundation model sees a fixed number of points, so resolution decides how far back "
    "its context reaches. At 5m with a 16k-point context you get ~57 days, which comfortably covers "
    "weekly seasonality. At 1m you get ~11 days, which does not."
)
_SIGNAL_NOTE = (
    "The range query ends at the last whole resolution step. Steps with no sample are gaps: filled by "
    "linear interpolation between samples, and after the newest sample with its value, and counted in "
    "signalStatuses[].gapSteps. A signal whose newest sample is older than the sizing window (the lead "
    "time plus the interval) and than 3 steps of its resolution is stale: the evaluation fails with "
    "SignalStale, naming the signal and the sample's age, the scaler is Degraded and keeps serving its "
    "last good recommendation while that is fresh, as for any failed evaluation."
)
_SIGNAL_RULES = (
    at_least("resolution", "1s"),
    Rule(
        cel=f"!({durations_parse('self.history', 'self.resolution')})"
        f" || {cel_nanoseconds('self.history')} >= {cel_nanoseconds('self.resolution')}",
        message="history must be at least one resolution step",
        check=lambda s: nanoseconds(s.history) >= nanoseconds(s.resolution),
        field_path=".history",
    ),
)


class Signal(APIModel):
    """Signal is the single-signal form, paired with the top-level Capacity. Exactly one of Signal or
    Signals must be set."""

    history: Duration = field(_HISTORY, default="336h")
    prometheus: PrometheusQuery | None = field(
        "Prometheus reads the signal from a Prometheus-compatible range query endpoint (Prometheus, "
        "Thanos, Mimir, VictoriaMetrics vmselect, ...).",
        default=None,
    )
    resolution: Duration = field(_RESOLUTION, default="5m")

    notes = (_SIGNAL_NOTE,)
    cel_rules = (
        Rule(
            cel="has(self.prometheus)",
            message="prometheus is required",
            check=lambda s: s.prometheus is not None,
            field_path=".prometheus",
        ),
        *_SIGNAL_RULES,
    )


class NamedSignal(APIModel):
    """NamedSignal is one demand dimension in a multi-signal scaler. Each signal is converted to a
    replica requirement independently and the largest binds, the way an HPA combines multiple metrics.
    A workload has to be big enough for every dimension it serves, so summing or averaging them would
    let a quiet dimension mask a busy one."""

    capacity: CapacitySpec = field(
        "Capacity converts this signal's units into replicas. Required, because there is no sensible "
        "shared default across dimensions measured in different units."
    )
    history: Duration = field(_HISTORY, default="336h")
    name: str = field(
        "Name identifies the signal in status and metrics. Must be unique within the scaler.",
        minLength=1,
        maxLength=63,
        pattern=r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$",
    )
    prometheus: PrometheusQuery = field("Prometheus reads this signal from a Prometheus-compatible endpoint.")
    resolution: Duration = field(_RESOLUTION, default="5m")

    notes = (_SIGNAL_NOTE,)
    cel_rules = _SIGNAL_RULES


def _horizon_covers_lead(horizon: timedelta, lead: LeadTimeSpec) -> bool:
    """Whether a set horizon reaches the lead time: the static one, and the clamp's floor in any case."""
    reaches = nanoseconds(horizon) >= nanoseconds(lead.min)
    return reaches and (lead.source != "Static" or nanoseconds(horizon) >= nanoseconds(lead.static))


# --- PredictiveScaler.spec -----------------------------------------------------------------


class ForecastSpec(APIModel):
    """ForecastSpec selects and parameterises the forecasting backend."""

    backend_ref: str | None = field(
        'BackendRef names a cluster-scoped ForecastBackend. If unset, the backend named "default" is used.',
        default=None,
        maxLength=253,
    )
    horizon: Duration | None = field(
        "Horizon is how far ahead to forecast. It must be at least the lead time; forecasting further is "
        "harmless and makes the projected curve useful for dashboards. Defaults to 4x the resolved lead time.",
        default=None,
    )

    notes = (
        "The horizon requested, the default 4x the lead time or an explicit one, is raised to the sizing "
        "window (the lead time plus the interval) when that is longer, so that the horizon never changes what "
        "is sized, and cut to the backend's maxHorizon. The SpecAdjusted condition reports either, with "
        "HorizonRaised or HorizonCut and the steps asked for and used.",
    )


class LeadTimeSpec(APIModel):
    """LeadTimeSpec configures the forecast horizon. This is the reason predictive autoscaling beats
    reactive autoscaling. A reactive autoscaler observes demand at time T and starts a replica that is
    only useful at T+lead, so it is structurally always one lead time behind. presage forecasts demand at
    T+lead and provisions for that instead."""

    max: Duration = field(
        "Max is the longest lead time presage sizes for, whatever Static says or the Observed query returns; "
        "a longer lead time needs a longer forecast horizon and holds capacity earlier.",
        default="15m",
    )
    min: Duration = field(
        "Min and Max clamp the resolved lead time. They bound the damage from a bad Observed query and stop "
        "the horizon from collapsing to zero (which would silently turn presage into a reactive autoscaler).",
        default="30s",
    )
    observed: PrometheusQuery | None = field(
        "Observed is the query used when Source is Observed. It must return a single scalar in seconds -- "
        "typically a high quantile of the time from pod creation to readiness.",
        default=None,
    )
    source: LeadTimeSource = field(
        "LeadTimeSource selects how the provisioning lead time is determined.", default="Static"
    )
    static: Duration = field("Static is the lead time used when Source is Static.", default="2m")

    cel_rules = (
        Rule(
            cel=(
                f"!({durations_parse('self.min', 'self.max')})"
                f" || {cel_nanoseconds('self.min')} <= {cel_nanoseconds('self.max')}"
            ),
            message="min must be less than or equal to max",
            check=lambda lt: nanoseconds(lt.min) <= nanoseconds(lt.max),
            field_path=".min",
        ),
        Rule(
            cel="self.source != 'Observed' || has(self.observed)",
            message="observed is required when source is Observed",
            check=lambda lt: lt.source != "Observed" or lt.observed is not None,
            field_path=".observed",
        ),
    )


class ReactiveFloorSpec(APIModel):
    """ReactiveFloor keeps a conventional reactive computation running alongside the forecast and takes
    the maximum of the two. With it enabled, forecast error can only ever cause over-provisioning --
    presage is then strictly safer than the reactive policy it replaces. Disabling it is what unlocks
    scale-to-zero, at the cost of that guarantee. MaxReplicas and MaxScaleUpRate remain hard constraints
    and can bind below the floor; the floor removes forecast error as a cause of under-provisioning, not
    operator-configured limits."""

    buffer_size: IntOrPercent = field(
        "BufferSize is the spare capacity the reactive floor insists on, as an absolute number of replicas "
        "or a percentage of current demand.",
        default="10%",
    )
    enabled: bool = field(
        "Enabled runs the reactive floor. Disabled, nothing bounds the forecast from below: scale-to-zero "
        "becomes possible, and forecast error can cause under-provisioning.",
        default=True,
    )


class ScaleDownUncertaintyGuardSpec(APIModel):
    """ScaleDownUncertaintyGuard refuses to release capacity while the forecast is too uncertain. Adding
    capacity is deliberately never gated this way."""

    enabled: bool = field(
        "Enabled runs the guard. Disabled, a scale-down is allowed however uncertain the forecast is.", default=True
    )
    max_relative_spread: DecimalString = field(
        "MaxRelativeSpread is the largest (upper - lower) / max(lower, 1) that still permits a scale-down. "
        "Lower values are more conservative.",
        default="0.25",
    )


class StabilizationSpec(APIModel):
    """StabilizationSpec damps oscillation."""

    max_scale_down_rate: IntOrPercent = field("MaxScaleDownRate caps a single step's decrease.", default="20%")
    max_scale_up_rate: IntOrPercent = field(
        "MaxScaleUpRate caps a single step's increase, as replicas or a percentage of current replicas.",
        default="100%",
    )
    scale_down_window: Duration = field(
        "ScaleDownWindow is how long the recommendation must stay below the current replica count before a "
        "scale-down is allowed. Scale-up is deliberately not delayed by default: the whole point is to be "
        "early.",
        default="15m",
    )


class PolicySpec(APIModel):
    """PolicySpec is the decision layer: how a predictive distribution becomes a replica count."""

    headroom: IntOrPercent = field(
        "Headroom is extra capacity applied on top of the forecast, as an absolute number of signal units or "
        "a percentage.",
        default="10%",
    )
    max_replicas: Int32 = field(
        "MaxReplicas is the most replicas presage recommends. It is applied last, so it binds even below the "
        "reactive floor.",
        minimum=1,
    )
    min_replicas: Int32 = field(
        "MinReplicas is the fewest replicas presage recommends. 0 allows scale-to-zero only with the reactive "
        "floor disabled: the floor never recommends fewer than one replica.",
        default=1,
        minimum=0,
    )
    reactive_floor: ReactiveFloorSpec = field(
        ReactiveFloorSpec.__doc__ or "", default_factory=ReactiveFloorSpec, object_default=True
    )
    scale_down_quantile: Quantile = field(
        "ScaleDownQuantile is the lower quantile used to measure how confident the forecast is. It never "
        "sets the target -- its only job is to feed ScaleDownUncertaintyGuard.",
        default="0.5",
    )
    scale_down_uncertainty_guard: ScaleDownUncertaintyGuardSpec = field(
        ScaleDownUncertaintyGuardSpec.__doc__ or "",
        default_factory=ScaleDownUncertaintyGuardSpec,
        object_default=True,
    )
    stabilization: StabilizationSpec = field(
        StabilizationSpec.__doc__ or "", default_factory=StabilizationSpec, object_default=True
    )
    target_quantile: Quantile = field(
        "TargetQuantile is the service level capacity is sized to: the workload is provisioned for the "
        "demand this quantile of the forecast implies, in both directions. Raising it buys protection "
        "against being wrong in the expensive direction. Note that a more uncertain forecast has a fatter "
        "upper tail, so this automatically provisions more when the model is unsure. Uncertainty should buy "
        "capacity, not hesitation.",
        default="0.9",
    )

    notes = (
        "Sizing window. A count decided now must serve every step from the next one up to the lead time plus "
        "the interval: pods added now are ready one lead time later, and the count holds until the next "
        "evaluation's pods are. Each signal is sized for the highest demand over that window at "
        "targetQuantile, signalStatuses[].sizedTo, and needs ceil((sizedTo + headroom) / capacity) replicas.",
        "Calibration. sizedTo = reference + noise x bandRatio x score, all in signalStatuses[].calibration but "
        "the score. The reference is the backend's highest point forecast over the window, held at the peak "
        "of the last 15 minutes unless the backend's own would have sized at least 5% less over the last "
        "day, and blended with the last hour's mean or with the same window yesterday where that would have "
        "sized at least 10% less. The noise is the signal's recent step-to-step change. The bandRatio is the "
        "square root of the backend's band width now (its median to its 0.9 quantile over the window) over "
        "its mean at the scored forecasts, within [0.5, 2]: a forecast the backend is less sure of than usual "
        "provisions more. It is used where the backend's band has told where its errors fall, sizing no "
        "more over the last day than the noise alone; otherwise, and without a band (useQuantileHead false), "
        "it is 1: calibrated from errors alone. The "
        "score is the targetQuantile of how far the highest demand landed above the reference, in the same "
        "units, over the backend's forecasts of the last day: one every 10 minutes, at most 144, so that "
        "targetQuantile of windows are covered (status.shadow.quantileCoverage measures it). When the "
        "forecast made at this time yesterday missed by more than the day's 0.9 quantile of misses, that "
        "miss is expected again: the targetQuantile and scaleDownQuantile values are raised alike, so the "
        "guard's spread stays the calibrated band's. With fewer than 12 scored forecasts (a new TimesFM "
        "scaler's first two hours) sizedTo is the backend's own targetQuantile band, its highest over the "
        "window, and signalStatuses[].sizedBy is Uncalibrated.",
    )

    cel_rules = (
        Rule(
            cel="self.minReplicas <= self.maxReplicas",
            message="minReplicas must be less than or equal to maxReplicas",
            check=lambda p: p.min_replicas <= p.max_replicas,
            field_path=".minReplicas",
        ),
        Rule(
            cel=(
                f"!{cel_matches('self.scaleDownQuantile', quantities.QUANTILE_PATTERN)}"
                f" || !{cel_matches('self.targetQuantile', quantities.QUANTILE_PATTERN)}"
                " || double(self.scaleDownQuantile) <= double(self.targetQuantile)"
            ),
            message="scaleDownQuantile must be less than or equal to targetQuantile",
            check=lambda p: p.scale_down_quantile <= p.target_quantile,
            field_path=".scaleDownQuantile",
        ),
    )


_DEFAULT_MAX_RECOMMENDATION_AGE = "5m"


class AgonesFleetTarget(APIModel):
    """Agones carries options that only apply when Kind is "Fleet" in the agones.dev group. When set,
    presage does not write replicas directly; it publishes the recommendation on its FleetAutoscaler
    webhook endpoint so that Agones remains the single writer of Fleet replicas."""

    max_recommendation_age: Duration = field(
        "MaxRecommendationAge is how stale a cached recommendation may be before the webhook starts refusing "
        "to answer (returning an error so that a Chain policy falls through to its next entry). Keep this "
        "comfortably above the reconcile Interval.",
        default=_DEFAULT_MAX_RECOMMENDATION_AGE,
    )


class ScaleTargetRef(APIModel):
    """ScaleTargetRef identifies the workload whose replica count is being managed. Two families of
    target are supported: - Anything exposing the standard scale subresource (Deployment, StatefulSet,
    ReplicaSet, and most custom resources that implement it). This is the default and requires no
    target-specific support in presage. - An Agones Fleet, which is NOT scaled directly. Instead presage
    serves a FleetAutoscaler webhook for it; see AgonesFleetTarget."""

    agones: AgonesFleetTarget | None = field(AgonesFleetTarget.__doc__ or "", default=None)
    api_version: str = field('APIVersion of the target, e.g. "apps/v1".', minLength=1, maxLength=253)
    kind: str = field('Kind of the target, e.g. "Deployment".', minLength=1, maxLength=63)
    name: str = field(
        "Name of the target. Must be in the same namespace as the PredictiveScaler.", minLength=1, maxLength=253
    )

    @property
    def is_agones_fleet(self) -> bool:
        """Whether the target is an agones.dev Fleet (scaled through the webhook, not directly)."""
        return self.kind == "Fleet" and self.api_version.startswith("agones.dev/")

    cel_rules = (
        Rule(
            cel="!has(self.agones) || (self.kind == 'Fleet' && self.apiVersion.startsWith('agones.dev/'))",
            message="agones applies only to an agones.dev Fleet (apiVersion agones.dev/v1, kind Fleet)",
            check=lambda t: t.agones is None or t.is_agones_fleet,
            field_path=".agones",
        ),
    )


AdviceApply = Literal["Never", "WhenProven"]


class AdviceSpec(APIModel):
    """Advice is how presage advise (which the chart runs as a CronJob) advises the scaler: it tunes the
    policy on the signal's own history exactly as presage tune --scaler does and writes the spec to apply,
    with what it would have saved, into status.advice; from then on the controller also decides with the
    advised spec at every evaluation and scores it on the demand that comes (status.advice.live) until it
    is Proven. A scaler in Shadow is advised with these defaults unless it sets enabled: false; a scaler in
    Enforce is advised only when it sets advice. The spec is changed only by apply: WhenProven. It needs
    the single-signal form (signal; the API refuses it beside signals, and a multi-signal Shadow scaler is
    not advised by default) and a SeasonalNaive ForecastBackend: tuning scores candidates by
    SeasonalNaive's hindcasts, so a scaler whose backend is TimesFM cannot be advised, and
    status.advice.error says so."""

    apply: AdviceApply = field(
        "Apply says whether presage applies the advice itself. Never (the default): status.advice.patch is "
        "applied by hand. WhenProven: once the advice is Proven, the controller applies the advised fields, "
        "and only those, under its own field manager (presage-advice), with an AdviceApplied Event; if, over "
        "the first spec.advice.every after that, the applied spec is under-provisioned for more of the time "
        "than serviceLevel, it restores the fields it changed, with an AdviceRolledBack Event and "
        "status.advice.applied saying why. A GitOps tool that owns the spec undoes an apply unless it "
        "ignores the advised fields.",
        default="Never",
    )
    enabled: bool = field(
        "Enabled false opts the scaler out of advice: presage advise never reads its signal, and the "
        "controller scores no advised spec.",
        default=True,
    )
    every: Duration = field(
        "Every is how often the advice is made again; a change to the spec makes it again at the next run.",
        default="24h",
    )
    lookback: Duration = field(
        "Lookback is how much of the signal's history, ending now, the advice is made from: a warm-up (7 days "
        "by default), the part the policy is chosen on and the last 7 days, held out to check the choice. A "
        "change is advised only when the part chosen on spans at least 7 days. Each decision replayed reads "
        "the signal's history before it, as the scaler does, so the advice also reads the history before the "
        "lookback that its first decisions read (about 17 days at the defaults).",
        default="28d",
    )
    prove_for: Duration = field(
        "ProveFor is how long the advised spec must meet serviceLevel on live demand (status.advice.live) "
        "before the verdict becomes Proven.",
        default="7d",
    )
    service_level: str = field(
        'ServiceLevel is the most under-provisioned time allowed, as a percentage of the time, such as "1%": '
        "the advice is the policy with the fewest replica-hours that meets it.",
        default="1%",
        pattern=SERVICE_LEVEL_PATTERN,
        maxLength=16,
    )

    cel_rules = (at_least("every", "1h"), at_least("lookback", "2d"), at_least("proveFor", "1h"))


class PredictiveScalerSpec(APIModel):
    """PredictiveScalerSpec defines the desired state of a PredictiveScaler."""

    advice: AdviceSpec | None = field(AdviceSpec.__doc__ or "", default=None)
    capacity: CapacitySpec | None = field(
        "Capacity applies to the single-signal form only; multi-signal scalers carry a capacity per signal.",
        default=None,
    )
    forecast: ForecastSpec = field(ForecastSpec.__doc__ or "", default_factory=ForecastSpec)
    interval: Duration = field(
        "Interval is how often to refresh the forecast and recommendation. Note that for Agones targets this "
        "is decoupled from the FleetAutoscaler sync period: Agones may poll the webhook every 30s while "
        "presage refreshes the underlying forecast far less often.",
        default="1m",
    )
    lead_time: LeadTimeSpec = field(LeadTimeSpec.__doc__ or "", default_factory=LeadTimeSpec, object_default=True)
    mode: Mode = field(
        "Mode defaults to Shadow. Run a workload in Shadow long enough to compare the recommendation against "
        "what actually happened before switching.",
        default="Shadow",
    )
    policy: PolicySpec = field(PolicySpec.__doc__ or "")
    scale_target_ref: ScaleTargetRef = field(ScaleTargetRef.__doc__ or "")
    signal: Signal | None = field(Signal.__doc__ or "", default=None)
    signals: list[NamedSignal] | None = field(
        "Signals is the multi-signal form. Each entry becomes a replica requirement and the largest binds, so "
        "the workload ends up sized for whichever dimension needs the most.",
        default=None,
        minItems=1,
        maxItems=MAX_SIGNALS,
    )

    cel_rules = (
        at_least("interval", "1s"),
        Rule(
            cel=(
                "!has(self.forecast) || !has(self.forecast.horizon)"
                f" || !({durations_parse('self.forecast.horizon', 'self.leadTime.min', 'self.leadTime.static')})"
                f" || ({cel_nanoseconds('self.forecast.horizon')} >= {cel_nanoseconds('self.leadTime.min')}"
                " && (self.leadTime.source != 'Static'"
                f" || {cel_nanoseconds('self.forecast.horizon')} >= {cel_nanoseconds('self.leadTime.static')}))"
            ),
            message="forecast.horizon must be at least the lead time (leadTime.static, and never below leadTime.min)",
            check=lambda s: s.forecast.horizon is None or _horizon_covers_lead(s.forecast.horizon, s.lead_time),
            field_path=".forecast.horizon",
        ),
        Rule(
            cel=(
                "!(self.scaleTargetRef.kind == 'Fleet' && self.scaleTargetRef.apiVersion.startsWith('agones.dev/'))"
                f" || !({durations_parse('self.interval')})"
                " || (has(self.scaleTargetRef.agones)"
                f" ? (!({durations_parse('self.scaleTargetRef.agones.maxRecommendationAge')})"
                f" || {cel_nanoseconds('self.scaleTargetRef.agones.maxRecommendationAge')}"
                f" > {cel_nanoseconds('self.interval')})"
                f" : {nanoseconds(quantities.parse_duration(_DEFAULT_MAX_RECOMMENDATION_AGE))}"
                f" > {cel_nanoseconds('self.interval')})"
            ),
            message=(
                "interval must be shorter than scaleTargetRef.agones.maxRecommendationAge (default "
                f"{_DEFAULT_MAX_RECOMMENDATION_AGE}) for an Agones Fleet: the webhook refuses a recommendation older "
                "than that, so it would refuse for part of every interval"
            ),
            check=lambda s: (
                not s.scale_target_ref.is_agones_fleet
                or nanoseconds((s.scale_target_ref.agones or AgonesFleetTarget()).max_recommendation_age)
                > nanoseconds(s.interval)
            ),
            field_path=".interval",
        ),
        Rule(
            cel="has(self.signal) != has(self.signals)",
            message="exactly one of signal or signals must be set",
            check=lambda s: (s.signal is None) != (s.signals is None),
        ),
        Rule(
            cel="!has(self.advice) || has(self.signal)",
            message="advice applies only to the single-signal form (signal): presage advise replays one signal",
            check=lambda s: s.advice is None or s.signal is not None,
            field_path=".advice",
        ),
        Rule(
            cel="!has(self.capacity) || has(self.signal)",
            message="capacity applies only to the single-signal form (signal); with signals, set signals[].capacity",
            check=lambda s: s.capacity is None or s.signal is not None,
            field_path=".capacity",
        ),
        Rule(
            cel="!has(self.signals) || self.signals.all(s, self.signals.exists_one(t, t.name == s.name))",
            message="signal names must be unique within the scaler",
            check=lambda s: s.signals is None or len({sig.name for sig in s.signals}) == len(s.signals),
            field_path=".signals",
        ),
    )

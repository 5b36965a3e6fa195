"""The PredictiveScaler kind's spec (target, signals, lead time, forecast, policy) and status
(recommendation, breakdown, per-signal view, shadow scoring, calibration).

Class docstrings are the type descriptions that the reference prints; keep them to one paragraph.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import PlainSerializer

from presage_scaler.api import quantities
from presage_scaler.api.conditions import CONDITION_LIST, Condition
from presage_scaler.api.constraints import Constraint
from presage_scaler.api.quantities import nanoseconds
from presage_scaler.api.rules import URL, at_least, cel_nanoseconds, durations_parse
from presage_scaler.api.schema import (
    APIModel,
    DecimalString,
    Duration,
    Int32,
    Int64,
    IntOrDecimal,
    IntOrPercent,
    MeasuredString,
    Quantile,
    Rule,
    Timestamp,
    cel_matches,
    field,
)

Mode = Literal["Shadow", "Enforce"]
LeadTimeSource = Literal["Static", "Observed"]

# Shadow scoring keeps a bounded amount of state in status: hourly buckets over a day, and the
# recommendations still waiting for their scored moment.
SHADOW_HOURS = 24
SHADOW_MAX_PENDING = 32

# Calibration on a backend's own errors keeps, for a backend that cannot recompute its past forecasts,
# a day of them per signal (one every ten minutes, plus those whose window is still open).
CALIBRATION_MAX_FORECASTS = 160
MAX_SIGNALS = 16
SINGLE_SIGNAL = "demand"
"""The name the single-signal form (``spec.signal``) goes by in status and metrics: what it measures, and
not ``default``, the default ForecastBackend's name."""
# A percentage strictly between 0 and 100: "1%", "0.5%", "99.9%".
SERVICE_LEVEL_PATTERN = r"^(0\.[0-9]*[1-9][0-9]*|[1-9][0-9]?(\.[0-9]+)?)%$"


# --- signals and capacity ------------------------------------------------------------------


def _secret_name() -> Any:
    return field(
        "Name of the Secret, in the PredictiveScaler's namespace. presage reads only a Secret it was granted "
        "(a Role with resourceNames for it).",
        minLength=1,
        maxLength=253,
    )


def _secret_key(description: str, **default: Any) -> Any:
    """A key of a Secret's data; ``default`` as :func:`field`'s, required when not given."""
    return field(description, **default, minLength=1, maxLength=253)


class SecretKeyRef(APIModel):
    """SecretKeyRef selects a key of a Secret in the PredictiveScaler's own namespace."""

    key: str = _secret_key("Key of the Secret's data to read.")
    name: str = _secret_name()


class BasicAuthSecretRef(APIModel):
    """BasicAuthSecretRef names a Secret holding a username and a password for HTTP basic authentication,
    as KEDA's basic authMode reads them."""

    name: str = _secret_name()
    password_key: str = _secret_key(
        "PasswordKey is the key of the Secret's data that holds the password.", default="password"
    )
    username_key: str = _secret_key(
        "UsernameKey is the key of the Secret's data that holds the username.", default="username"
    )


class TLSSecretRef(APIModel):
    """TLSSecretRef names a Secret holding PEM TLS material: a CA bundle that verifies the server, and a
    client certificate and key for mutual TLS. A kubernetes.io/tls Secret keeps them under ca.crt, tls.crt and
    tls.key."""

    ca_key: str | None = _secret_key(
        "CAKey is the key of the Secret's data holding the PEM CA bundle that verifies the server's certificate, "
        'e.g. "ca.crt". Unset, the system\'s trusted CAs verify it.',
        default=None,
    )
    cert_key: str | None = _secret_key(
        'CertKey is the key of the Secret\'s data holding the PEM client certificate, e.g. "tls.crt", presented '
        "to a server that asks for one (mutual TLS). Set with KeyKey.",
        default=None,
    )
    key_key: str | None = _secret_key(
        "KeyKey is the key of the Secret's data holding the client certificate's unencrypted PEM private key, "
        'e.g. "tls.key". Set with CertKey.',
        default=None,
    )
    name: str = _secret_name()

    cel_rules = (
        Rule(
            cel="has(self.certKey) == has(self.keyKey)",
            message="certKey and keyKey go together: set both for a client certificate, or neither",
            check=lambda t: (t.cert_key is None) == (t.key_key is None),
            field_path=".certKey",
        ),
        Rule(
            cel="has(self.caKey) || has(self.certKey)",
            message="tlsSecretRef needs caKey, or certKey and keyKey, or all three",
            check=lambda t: t.ca_key is not None or t.cert_key is not None,
        ),
    )


class HeaderValueSource(APIModel):
    """HeaderValueSource reads a header's value from a Secret."""

    secret_key_ref: SecretKeyRef = field("SecretKeyRef selects the key of a Secret whose value is the header's.")


HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
# Control characters other than a tab end a header line or are refused by servers; a Secret's value is
# checked for them when it is read.
HEADER_VALUE_PATTERN = r"^[^\x00-\x08\x0a-\x1f\x7f]*$"
MAX_HEADERS = 16
RESERVED_HEADERS = (
    "accept",
    "accept-encoding",
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "expect",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
)
"""Header names presage sets itself or that would break the request, in lower case."""


class PrometheusHeader(APIModel):
    """PrometheusHeader is a request header sent with every query, such as the tenant header X-Scope-OrgID
    that multi-tenant Mimir, Cortex and Thanos read. Exactly one of Value or ValueFrom must be set."""

    name: str = field(
        'Name is the header\'s name, e.g. "X-Scope-OrgID". Headers presage sets itself or that carry the '
        "request's framing (Accept, Accept-Encoding, Connection, Content-Type, Content-Length, Host, "
        "Transfer-Encoding, ...) are refused, and Authorization is refused when bearerTokenSecretRef or "
        "basicAuthSecretRef sets it.",
        minLength=1,
        maxLength=128,
        pattern=HEADER_NAME_PATTERN,
    )
    value: str | None = field(
        "Value is the header's value, written in the spec (a tenant name, not a credential).",
        default=None,
        maxLength=4096,
        pattern=HEADER_VALUE_PATTERN,
    )
    value_from: HeaderValueSource | None = field(
        "ValueFrom reads the header's value from a Secret, for a value that is a credential.", default=None
    )

    cel_rules = (
        Rule(
            cel="has(self.value) != has(self.valueFrom)",
            message="exactly one of value or valueFrom must be set",
            check=lambda h: (h.value is None) != (h.value_from is None),
        ),
        Rule(
            cel="!(self.name.lowerAscii() in [" + ", ".join(f"'{n}'" for n in RESERVED_HEADERS) + "])",
            message="name is a header presage sets itself or that carries the request's framing: "
            + ", ".join(RESERVED_HEADERS)
            + " may not be set",
            check=lambda h: h.name.lower() not in RESERVED_HEADERS,
            field_path=".name",
        ),
    )


_BEARER = "BearerTokenSecretRef optionally supplies an Authorization bearer token."


def _sets_authorization(query: PrometheusQuery) -> bool:
    return query.bearer_token_secret_ref is not None or query.basic_auth_secret_ref is not None


class PrometheusQuery(APIModel):
    """PrometheusQuery is a query against a Prometheus-compatible HTTP API."""

    address: str = field(
        'Address is the base URL of the query endpoint, e.g. "http://vmselect.monitoring:8481/select/0/prometheus".',
        **URL,
    )
    basic_auth_secret_ref: BasicAuthSecretRef | None = field(
        "BasicAuthSecretRef optionally supplies an Authorization header for HTTP basic authentication. At most "
        "one of BearerTokenSecretRef and BasicAuthSecretRef may be set.",
        default=None,
    )
    bearer_token_secret_ref: SecretKeyRef | None = field(_BEARER, default=None)
    headers: list[PrometheusHeader] | None = field(
        "Headers are sent with every request, after presage's own. A multi-tenant Mimir, Cortex or Thanos reads "
        'the tenant from X-Scope-OrgID: {name: X-Scope-OrgID, value: "team-a"}. Names must be unique, in any '
        "case.",
        default=None,
        maxItems=MAX_HEADERS,
    )
    insecure_skip_verify: bool | None = field(
        "InsecureSkipVerify disables TLS verification. Not recommended.", default=None
    )
    query: str = field(
        "Query must evaluate to exactly one series. If it returns more than one, the PredictiveScaler "
        "goes Degraded rather than silently picking one.",
        minLength=1,
        maxLength=16384,
    )
    tls_secret_ref: TLSSecretRef | None = field(
        "TLSSecretRef optionally supplies TLS material for an https:// address: the CA bundle that verifies the "
        "server in place of the system's, and a client certificate and key for mutual TLS. With "
        "InsecureSkipVerify the client certificate is still presented and the server is not verified.",
        default=None,
    )

    notes = (
        "Secrets. Every Secret is read from the PredictiveScaler's own namespace, with get on that one Secret "
        "granted to presage (manifests/examples/secret-reader-role.yaml); values are cached for a minute, so a "
        "rotated password, token or certificate is used within one. Surrounding whitespace of a text value (a "
        "trailing newline) is dropped. A Secret presage may not read, a missing key, or a value it cannot use "
        "(text that is not UTF-8 or holds a line break, PEM that does not parse, a key that does not match its "
        "certificate) marks the scaler Degraded with SecretForbidden, SecretNotFound, SecretKeyNotFound or "
        "SecretInvalid, naming the Secret and the key.",
    )
    cel_rules = (
        Rule(
            cel="!(has(self.bearerTokenSecretRef) && has(self.basicAuthSecretRef))",
            message="set at most one of bearerTokenSecretRef and basicAuthSecretRef",
            check=lambda q: q.bearer_token_secret_ref is None or q.basic_auth_secret_ref is None,
            field_path=".basicAuthSecretRef",
        ),
        Rule(
            cel="!has(self.headers) || self.headers.all(h, self.headers.exists_one(g, "
            "g.name.lowerAscii() == h.name.lowerAscii()))",
            message="header names must be unique (in any case)",
            check=lambda q: len({h.name.lower() for h in q.headers or ()}) == len(q.headers or ()),
            field_path=".headers",
        ),
        Rule(
            cel="!has(self.headers) || !(has(self.bearerTokenSecretRef) || has(self.basicAuthSecretRef))"
            " || !self.headers.exists(h, h.name.lowerAscii() == 'authorization')",
            message="headers may not set Authorization when bearerTokenSecretRef or basicAuthSecretRef sets it",
            check=lambda q: (
                not _sets_authorization(q) or all(h.name.lower() != "authorization" for h in q.headers or ())
            ),
            field_path=".headers",
        ),
    )


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


class AdviceSpec(APIModel):
    """Advice opts the scaler in to advice: presage advise (which the chart runs as a CronJob) tunes the
    policy on the signal's own history exactly as presage tune --scaler does, and writes the spec to apply,
    with what it would have saved, into status.advice. It never changes the spec. Without Advice, presage
    advise never reads the scaler's signal. It needs the single-signal form (signal; the API refuses it
    beside signals) and a SeasonalNaive ForecastBackend: tuning scores candidates by SeasonalNaive's
    hindcasts, so a scaler whose backend is TimesFM cannot be advised, and status.advice.error says so."""

    every: Duration = field(
        "Every is how often the advice is made again; a change to the spec makes it again at the next run.",
        default="24h",
    )
    lookback: Duration = field(
        "Lookback is how much of the signal's history, ending now, the advice is made from: a warm-up (7 days "
        "by default), the part the policy is chosen on and the last 7 days, held out to check the choice. A "
        "change is advised only when the part chosen on spans at least 7 days.",
        default="28d",
    )
    service_level: str = field(
        'ServiceLevel is the most under-provisioned time allowed, as a percentage of the time, such as "1%": '
        "the advice is the policy with the fewest replica-hours that meets it.",
        pattern=SERVICE_LEVEL_PATTERN,
        maxLength=16,
    )

    cel_rules = (at_least("every", "1h"), at_least("lookback", "2d"))


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


# --- status ----------------------------------------------------------------------------------


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


AdviceVerdict = Literal["Advised", "Keep", "NotEnoughHistory", "NothingMet", "HeldOutFailed"]


class AdviceStatus(APIModel):
    """AdviceStatus is what presage advise found for the spec as it was (spec.advice). Verdict Advised: the
    changes met the service level on the part chosen on and on the part held out, for fewer replica-hours
    held out than the current spec; Keep: the current spec is the cheapest found that meets it;
    NotEnoughHistory: the part chosen on is shorter than 7 days; NothingMet: no candidate met the service
    level on the part chosen on; HeldOutFailed: the choice missed it held out, or cost more there than the
    current spec. Only Advised carries changes and a patch. A failed attempt sets Error and keeps the
    advice made before it."""

    advised: AdviceOutcome | None = field("Advised is how the advised spec did.", default=None)
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

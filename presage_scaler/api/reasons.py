"""One vocabulary for *why*: every CamelCase reason presage writes into a condition, an Event, an
error's ``reason`` or the ``reason`` label of ``presage_evaluation_errors_total``.

A leaf module (it imports nothing of presage's), so the domain, the controller and the metrics all
speak it without importing each other. :data:`FAILURES` are the reasons an evaluation or a probe
fails with (``Degraded=True``); the error metric's label set is exactly those, plus ``Other``.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """A condition, Event or error reason. Values compare equal to their strings."""

    # An evaluation failed: the data source.
    PROMETHEUS_ERROR = "PrometheusError"
    PROMETHEUS_UNREACHABLE = "PrometheusUnreachable"
    QUERY_FAILED = "QueryFailed"
    TOO_MANY_SERIES = "TooManySeries"
    NO_DATA = "NoData"
    INVALID_VALUE = "InvalidValue"
    INVALID_CAPACITY = "InvalidCapacity"
    SIGNAL_STALE = "SignalStale"
    # The forecast backend.
    FORECAST_FAILED = "ForecastFailed"
    BACKEND_NOT_FOUND = "BackendNotFound"
    BACKEND_NOT_READY = "BackendNotReady"
    BACKEND_OVERLOADED = "BackendOverloaded"
    BACKEND_UNAVAILABLE = "BackendUnavailable"
    BACKEND_UNREACHABLE = "BackendUnreachable"
    BACKEND_TIMEOUT = "BackendTimeout"
    BACKEND_SERVER_ERROR = "BackendServerError"
    BACKEND_REJECTED = "BackendRejected"
    INVALID_BACKEND_RESPONSE = "InvalidBackendResponse"
    HORIZON_TOO_SHORT = "HorizonTooShort"
    # The cluster and the spec.
    INVALID_SPEC = "InvalidSpec"
    KUBERNETES_UNAVAILABLE = "KubernetesUnavailable"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_KEY_NOT_FOUND = "SecretKeyNotFound"
    SECRET_FORBIDDEN = "SecretForbidden"
    SECRET_UNAVAILABLE = "SecretUnavailable"
    SECRET_INVALID = "SecretInvalid"
    TARGET_NOT_FOUND = "TargetNotFound"
    TARGET_FORBIDDEN = "TargetForbidden"
    TARGET_UNREADABLE = "TargetUnreadable"
    EVALUATION_TIMEOUT = "EvaluationTimeout"
    INTERNAL_ERROR = "InternalError"

    # Ready and Degraded when nothing failed, and the Events that go with them.
    RECOMMENDED = "Recommended"
    EVALUATION_SUCCEEDED = "EvaluationSucceeded"
    NO_RECOMMENDATION = "NoRecommendation"
    LAST_RECOMMENDATION_HELD = "LastRecommendationHeld"
    RECOMMENDATION_STALE = "RecommendationStale"
    RECOMMENDATION_CHANGED = "RecommendationChanged"
    RECOVERED = "Recovered"
    PROBE_SUCCEEDED = "ProbeSucceeded"
    # Consumed: what applies the recommendation.
    SCALED_OBJECT_FOUND = "ScaledObjectFound"
    NO_SCALED_OBJECT = "NoScaledObject"
    SCALED_OBJECTS_UNKNOWN = "ScaledObjectsUnknown"
    AGONES_WEBHOOK = "AgonesWebhook"
    SCALING_MODIFIERS = "ScalingModifiers"
    # SpecAdjusted: what the scaler is sized with other than its spec states or probably means.
    CAPACITY_DEFAULTED = "CapacityDefaulted"
    ABSOLUTE_HEADROOM = "AbsoluteHeadroom"
    LEAD_TIME_CLAMPED = "LeadTimeClamped"
    HORIZON_CUT = "HorizonCut"
    HORIZON_RAISED = "HorizonRaised"
    AS_SPECIFIED = "AsSpecified"
    # spec.advice.apply: WhenProven, the Events of presage's own apply of an advice.
    ADVICE_APPLIED = "AdviceApplied"
    ADVICE_ROLLED_BACK = "AdviceRolledBack"
    ADVICE_NOT_APPLIED = "AdviceNotApplied"
    # The advice on live demand (status.advice.live).
    ADVICE_PROVEN = "AdviceProven"
    ADVICE_FAILED_LIVE = "AdviceFailedLive"


FAILURES: frozenset[Reason] = frozenset(
    {
        Reason.PROMETHEUS_ERROR,
        Reason.PROMETHEUS_UNREACHABLE,
        Reason.QUERY_FAILED,
        Reason.TOO_MANY_SERIES,
        Reason.NO_DATA,
        Reason.INVALID_VALUE,
        Reason.INVALID_CAPACITY,
        Reason.SIGNAL_STALE,
        Reason.FORECAST_FAILED,
        Reason.BACKEND_NOT_FOUND,
        Reason.BACKEND_NOT_READY,
        Reason.BACKEND_OVERLOADED,
        Reason.BACKEND_UNAVAILABLE,
        Reason.BACKEND_UNREACHABLE,
        Reason.BACKEND_TIMEOUT,
        Reason.BACKEND_SERVER_ERROR,
        Reason.BACKEND_REJECTED,
        Reason.INVALID_BACKEND_RESPONSE,
        Reason.HORIZON_TOO_SHORT,
        Reason.INVALID_SPEC,
        Reason.KUBERNETES_UNAVAILABLE,
        Reason.SECRET_NOT_FOUND,
        Reason.SECRET_KEY_NOT_FOUND,
        Reason.SECRET_FORBIDDEN,
        Reason.SECRET_UNAVAILABLE,
        Reason.SECRET_INVALID,
        Reason.TARGET_NOT_FOUND,
        Reason.TARGET_FORBIDDEN,
        Reason.TARGET_UNREADABLE,
        Reason.EVALUATION_TIMEOUT,
        Reason.INTERNAL_ERROR,
    }
)
"""Why an evaluation or a probe failed: ``Degraded=True`` reasons, and the error metric's labels."""

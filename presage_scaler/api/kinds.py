"""The presage API, declared once: group ``scaling.presage.sh``, version ``v1alpha1``, and its kinds.

Every field, default, bound and description of the API reference lives in the kinds' modules,
:mod:`~presage_scaler.api.predictive_scaler` and :mod:`~presage_scaler.api.forecast_backend`; this
module names the group and each kind (plural, short names, scope, printer columns) and lists them
in ``KINDS``. ``crds/`` and ``docs/api-reference.md`` are generated from ``KINDS`` (``presage crds``),
and CRs are parsed into the kinds' classes (:mod:`presage_scaler.api.parse`).
"""

from __future__ import annotations

from dataclasses import dataclass

from presage_scaler.api.forecast_backend import ForecastBackendSpec, ForecastBackendStatus
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.schema import APIModel

GROUP = "scaling.presage.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORY = "presage"


@dataclass(frozen=True)
class PrinterColumn:
    """One column of ``kubectl get``."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class Kind:
    """One API kind: its names, scope, description, spec and status types and printer columns."""

    name: str
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool
    description: str
    spec: type[APIModel]
    status: type[APIModel]
    printer_columns: tuple[PrinterColumn, ...]

    @property
    def singular(self) -> str:
        return self.name.lower()


_AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")


def _condition(field: str, type_: str) -> str:
    """The JSONPath of one field of the condition of type ``type_``."""
    return f'.status.conditions[?(@.type=="{type_}")].{field}'


# The default columns answer "what does it recommend, is it working, and is it sized as its spec
# says": READY with, beside it, the Degraded reason, which names the failure (PrometheusUnreachable,
# BackendTimeout, ...) while a scaler still serves its last recommendation, and reads
# EvaluationSucceeded otherwise; then SPEC, the SpecAdjusted reason, which names the most consequential
# value the last evaluation sized with other than the spec states or probably means
# (CapacityDefaulted, AbsoluteHeadroom, LeadTimeClamped, ...) and reads AsSpecified otherwise. Each
# cell is one word or number, so a row stays one line. -o wide adds what a healthy scaler's number
# came from (the binding signal and the constraint), the Ready reason (what is served: Recommended,
# LastRecommendationHeld, RecommendationStale, NoRecommendation) and what applying the advice saves.
PREDICTIVE_SCALER = Kind(
    name="PredictiveScaler",
    plural="predictivescalers",
    short_names=("ps", "pscaler"),
    namespaced=True,
    description=(
        "PredictiveScaler forecasts a workload's demand and sizes it for the demand expected once new "
        "replicas are actually ready."
    ),
    spec=PredictiveScalerSpec,
    status=PredictiveScalerStatus,
    printer_columns=(
        PrinterColumn("Mode", ".spec.mode", description="Shadow records only; Enforce is applied by KEDA/Agones"),
        PrinterColumn("Target", ".spec.scaleTargetRef.name", description="The scaled workload"),
        PrinterColumn("Current", ".status.currentReplicas", "integer", "Replicas last read from the target"),
        PrinterColumn("Forecast", ".status.lastForecast.point", description="Point forecast at the lead time"),
        PrinterColumn("Recommended", ".status.recommendedReplicas", "integer", "What presage recommends"),
        PrinterColumn(
            "Binding", ".status.breakdown.bindingSignal", description="Signal needing most replicas", priority=1
        ),
        PrinterColumn(
            "Constraint",
            ".status.breakdown.constraint",
            description="Policy step that set the count (empty: the forecast did)",
            priority=1,
        ),
        PrinterColumn("Ready", _condition("status", "Ready"), description="A fresh recommendation is served"),
        PrinterColumn(
            "Serving", _condition("reason", "Ready"), description="The Ready reason: what is served", priority=1
        ),
        PrinterColumn(
            "Saving",
            ".status.adviceSaving",
            description="Held-out replica-hours applying the advice saves (Applied once applied; spec.advice)",
            priority=1,
        ),
        PrinterColumn(
            "Live",
            ".status.advice.live.saving",
            description="Replica-hours the advised spec saved on live demand so far (status.advice.live)",
            priority=1,
        ),
        PrinterColumn(
            "Reason",
            _condition("reason", "Degraded"),
            description="Why the last evaluation failed (EvaluationSucceeded when it did not)",
        ),
        PrinterColumn(
            "Spec",
            _condition("reason", "SpecAdjusted"),
            description="What the scaler is sized with other than its spec states or means (AsSpecified: nothing)",
        ),
        _AGE,
    ),
)

# A backend's Ready reason is ProbeSucceeded, or why the last probe failed.
FORECAST_BACKEND = Kind(
    name="ForecastBackend",
    plural="forecastbackends",
    short_names=("fb", "fcb"),
    namespaced=False,
    description="ForecastBackend is a cluster-scoped forecasting engine.",
    spec=ForecastBackendSpec,
    status=ForecastBackendStatus,
    printer_columns=(
        PrinterColumn("Type", ".spec.type", description="Forecasting implementation"),
        PrinterColumn("Model", ".status.model", description="Model reported by the backend"),
        PrinterColumn("Ready", _condition("status", "Ready"), description="The last probe succeeded"),
        PrinterColumn(
            "Reason",
            _condition("reason", "Ready"),
            description="Why the last probe failed (ProbeSucceeded when it did not)",
        ),
        PrinterColumn("Probed", ".status.lastProbeTime", "date", "When the backend was last probed", priority=1),
        _AGE,
    ),
)

KINDS = (FORECAST_BACKEND, PREDICTIVE_SCALER)

"""The scaler and backend a backtest runs: the user's YAML, or the API's defaults, plus flag overrides.

Everything goes through :func:`presage_scaler.api.parse.parse`, so a backtest validates and defaults
exactly as the cluster would. Overrides are applied to the wire form before parsing.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from presage_scaler.api import manifests
from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.kinds import FORECAST_BACKEND
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import (
    AMOUNT_MAX_LENGTH,
    format_duration,
    format_quantile,
    plain_number,
)
from presage_scaler.backends.base import Backend
from presage_scaler.backends.registry import build_backend
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.engine.policy import whole_replicas

if TYPE_CHECKING:  # trace.py needs the backtest extra; the command's flags are parsed before it is checked
    from presage_scaler.backtest.trace import Trace

MAX_REPLICAS_FACTOR = 10
"""Without --max-replicas or a spec, maxReplicas is this many times the oracle's peak count."""

INT32_MAX = 2**31 - 1
DEFAULT_INTERVAL = timedelta(minutes=1)
"""The API's default ``interval``."""
DEFAULT_WARMUP = timedelta(days=7)
"""Leading time not counted in the metrics."""


def parse_per_replica(text: str) -> float:
    """``--per-replica``: a positive number that the API's ``capacity.perReplica`` can carry."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{text!r} is not a positive number of demand units per replica, such as 20")
    if len(plain_number(value)) > AMOUNT_MAX_LENGTH:
        raise ValueError(f"{text!r} has more digits than spec.capacity.perReplica holds ({AMOUNT_MAX_LENGTH})")
    return value


def _documents(path: Path) -> list[Any]:
    """The YAML documents in ``path``, refused in one line when they are not YAML or expand too far."""
    try:
        return manifests.documents(path.read_text(), str(path))
    except manifests.ManifestError as err:
        raise BacktestError(str(err)) from None


def load_document(path: Path, kind: str) -> dict[str, Any]:
    """The ``kind`` object in a YAML file holding a whole object (apiVersion/kind/metadata/spec) or
    just its spec (returned as ``{"spec": ...}``). A multi-document file must hold exactly one object
    of that kind."""
    documents = _documents(path)
    objects = manifests.of_kind(documents, kind)
    if not objects and len(documents) == 1 and isinstance(documents[0], dict) and "kind" not in documents[0]:
        return {"spec": documents[0]}
    if len(objects) != 1:
        raise BacktestError(f"{path}: expected one {kind} (or just its spec), found {len(objects)}")
    if not isinstance(objects[0].get("spec"), dict):
        raise BacktestError(f"{path}: the {kind} has no spec")
    return objects[0]


def load_object(path: Path, kind: str) -> dict[str, Any]:
    """The spec of the ``kind`` object in a YAML file (:func:`load_document`)."""
    spec: dict[str, Any] = load_document(path, kind)["spec"]
    return spec


def backend_beside(path: Path, scaler: dict[str, Any]) -> dict[str, Any] | None:
    """The spec of the ForecastBackend that the PredictiveScaler spec ``scaler`` uses (its
    ``forecast.backendRef``, else ``default``) when the file ``path`` holds it too, as the files
    ``presage tune`` writes do; None otherwise."""
    forecast = scaler.get("forecast")
    name = (forecast.get("backendRef") if isinstance(forecast, dict) else None) or "default"
    for document in _documents(path):
        if (
            isinstance(document, dict)
            and document.get("kind") == FORECAST_BACKEND.name
            and isinstance(document.get("metadata"), dict)
            and document["metadata"].get("name") == name
            and isinstance(document.get("spec"), dict)
        ):
            spec: dict[str, Any] = document["spec"]
            return spec
    return None


@dataclass(frozen=True)
class Overrides:
    """Flags that replace values of the scaler spec (None: keep the spec's or the default)."""

    per_replica: float | None = None
    lead_time: timedelta | None = None
    """Only used to build a spec from flags; with a spec file it is the boot delay (see Setup)."""
    interval: timedelta | None = None
    target_quantile: float | None = None
    headroom: str | None = None
    max_replicas: int | None = None


def _default_spec(trace: Trace, overrides: Overrides) -> dict[str, Any]:
    """The API's defaults for a single-signal scaler on this trace, with what the flags must supply."""
    if overrides.per_replica is None or overrides.lead_time is None:
        raise BacktestError("without --spec, --per-replica and --lead-time are required")
    lead = overrides.lead_time
    peak = whole_replicas(float(trace.values.max()) / overrides.per_replica)
    if MAX_REPLICAS_FACTOR * peak > INT32_MAX:
        raise BacktestError(
            f"--per-replica {overrides.per_replica:g} makes the trace's peak need {peak} replicas; "
            "give the capacity of one replica in the trace's units"
        )
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "backtest"},
        # Never queried: the trace stands in for this signal.
        "signal": {
            "prometheus": {"address": "http://backtest.invalid", "query": f"trace {Path(trace.source).name}"},
            "resolution": format_duration(trace.step),
        },
        # A lead time outside the default [30s, 15m] clamp is what the user asked for, not an error.
        "leadTime": {
            "static": format_duration(lead),
            "min": format_duration(min(lead, timedelta(seconds=30))),
            "max": format_duration(max(lead, timedelta(minutes=15))),
        },
        "policy": {"maxReplicas": max(1, MAX_REPLICAS_FACTOR * peak)},
        # Decisions cannot be finer than the trace; say so in the spec rather than round silently.
        "interval": format_duration(max(DEFAULT_INTERVAL, trace.step)),
    }


def scaler_spec(trace: Trace, spec_data: dict[str, Any] | None, overrides: Overrides) -> PredictiveScalerSpec:
    """The scaler to backtest: ``spec_data`` (a YAML spec) or the defaults, with ``overrides``."""
    data = copy.deepcopy(spec_data) if spec_data is not None else _default_spec(trace, overrides)
    policy = data.setdefault("policy", {})
    if overrides.per_replica is not None:
        # The wire form: a whole number as an integer, a fraction as a decimal string.
        number = plain_number(overrides.per_replica)
        capacity = {"perReplica": int(number) if number.isdigit() else number}
        if data.get("signals") and len(data["signals"]) == 1:
            data["signals"][0]["capacity"] = capacity
        else:
            data["capacity"] = capacity
    if overrides.interval is not None:
        data["interval"] = format_duration(overrides.interval)
    if overrides.target_quantile is not None:
        policy["targetQuantile"] = format_quantile(overrides.target_quantile)
    if overrides.headroom is not None:
        policy["headroom"] = overrides.headroom
    if overrides.max_replicas is not None:
        policy["maxReplicas"] = overrides.max_replicas
    return parse(PredictiveScalerSpec, data, path="spec")


def backend_spec(
    data: dict[str, Any] | None, season: timedelta | None = None, cycles: int | None = None
) -> ForecastBackendSpec:
    """The ForecastBackend spec (``data``, or the default SeasonalNaive) with --season/--cycles applied."""
    data = copy.deepcopy(data) if data is not None else {"type": "SeasonalNaive"}
    if season is not None or cycles is not None:
        if data.get("type", "SeasonalNaive") != "SeasonalNaive":
            raise BacktestError("--season and --cycles apply to the SeasonalNaive backend only")
        settings = data.setdefault("seasonalNaive", {})
        if season is not None:
            settings["season"] = format_duration(season)
        if cycles is not None:
            settings["cycles"] = cycles
    return parse(ForecastBackendSpec, data, path="spec")


def make_backend(spec: ForecastBackendSpec, name: str = "default") -> Backend:
    """The backend a ForecastBackend spec describes, for the ForecastBackend ``name``: built by the
    registry, as the controller builds it (a TimesFM backend talks to its forecaster)."""
    return build_backend(name, spec)


def backend_name(document: dict[str, Any]) -> str:
    """The ForecastBackend's name in a :func:`load_document` answer: its ``metadata.name``, else
    ``default`` (the name a scaler without ``forecast.backendRef`` uses)."""
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else "default"

"""The knobs ``presage tune`` searches, and the spec a setting of them makes.

A setting is applied to the wire form of the user's spec (or the API's defaults) and parsed with
:func:`presage_scaler.api.parse.parse`, as ``presage backtest --spec`` would: a candidate is always a
spec the API server accepts, and everything the knobs do not name is the user's.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import Amount, format_duration, format_quantile, plain_number
from presage_scaler.engine.past_forecasts import SPAN
from presage_scaler.tune.errors import TuneError


@dataclass(frozen=True, order=True)
class ForecasterKnobs:
    """The settings that change the forecasts (SeasonalNaive's season and cycles, and the history the
    signal reads, which must hold those cycles): candidates that share them share one forecast."""

    season: timedelta
    cycles: int
    history: timedelta

    @property
    def label(self) -> str:
        return f"{format_duration(self.season)}x{self.cycles}"

    def backend_wire(self) -> dict[str, Any]:
        """The ForecastBackend spec."""
        return {
            "type": "SeasonalNaive",
            "seasonalNaive": {"season": format_duration(self.season), "cycles": self.cycles},
        }

    def backend_spec(self) -> ForecastBackendSpec:
        return parse(ForecastBackendSpec, self.backend_wire(), path="spec")


def history_for(season: timedelta, cycles: int, least: timedelta) -> timedelta:
    """The history a SeasonalNaive with these settings reads in full, hindcasts included: ``cycles``
    seasons before the oldest origin it is scored from a day back, in whole hours, and at least
    ``least`` (the user's)."""
    needed = season * cycles + SPAN
    return max(least, timedelta(hours=math.ceil(needed / timedelta(hours=1))))


@dataclass(frozen=True)
class Knobs:
    """One point of the search: the policy knobs and the forecaster's."""

    target_quantile: float
    headroom: Amount
    max_relative_spread: float | None
    """The uncertainty guard's threshold; None when the guard is disabled."""
    scale_down_window: timedelta
    max_scale_down_rate: Amount
    forecaster: ForecasterKnobs

    def as_dict(self) -> dict[str, Any]:
        """The knobs as a person writes them in a spec (tune.json, the terminal)."""
        return {
            "targetQuantile": format_quantile(self.target_quantile),
            "headroom": str(self.headroom),
            "guard": "off" if self.max_relative_spread is None else plain_number(self.max_relative_spread),
            "scaleDownWindow": format_duration(self.scale_down_window),
            "maxScaleDownRate": str(self.max_scale_down_rate),
            "season": format_duration(self.forecaster.season),
            "cycles": self.forecaster.cycles,
            "history": format_duration(self.forecaster.history),
        }

    def spec_wire(self, base: dict[str, Any]) -> dict[str, Any]:
        """``base`` (a PredictiveScaler spec's wire form, single-signal) with these knobs set."""
        data = copy.deepcopy(base)
        policy = data.setdefault("policy", {})
        policy["targetQuantile"] = format_quantile(self.target_quantile)
        policy["headroom"] = _wire_amount(self.headroom)
        guard = policy.setdefault("scaleDownUncertaintyGuard", {})
        guard["enabled"] = self.max_relative_spread is not None
        if self.max_relative_spread is not None:
            guard["maxRelativeSpread"] = plain_number(self.max_relative_spread)
        stabilization = policy.setdefault("stabilization", {})
        stabilization["scaleDownWindow"] = format_duration(self.scale_down_window)
        stabilization["maxScaleDownRate"] = _wire_amount(self.max_scale_down_rate)
        data["signal"]["history"] = format_duration(self.forecaster.history)
        return data

    def spec(self, base: dict[str, Any]) -> PredictiveScalerSpec:
        return parse(PredictiveScalerSpec, self.spec_wire(base), path="spec")


def _wire_amount(amount: Amount) -> int | str:
    """An amount as the API takes it: a whole number as an integer, a fraction or percentage as a string."""
    number = plain_number(amount.value)
    if amount.percent:
        return f"{number}%"
    return int(number) if number.isdigit() else number


def knobs_of(spec: PredictiveScalerSpec, backend: ForecastBackendSpec) -> Knobs:
    """The knobs a parsed spec and SeasonalNaive backend are set to."""
    if spec.signal is None:
        raise TuneError("presage tune replays one signal: the spec must use the single-signal form")
    policy = spec.policy
    guard = policy.scale_down_uncertainty_guard
    settings = backend.seasonal_naive_or_default
    return Knobs(
        target_quantile=policy.target_quantile,
        headroom=policy.headroom,
        max_relative_spread=guard.max_relative_spread if guard.enabled else None,
        scale_down_window=policy.stabilization.scale_down_window,
        max_scale_down_rate=policy.stabilization.max_scale_down_rate,
        forecaster=ForecasterKnobs(settings.season, settings.cycles, spec.signal.history),
    )


def require_tunable(backend: ForecastBackendSpec) -> None:
    """Refuse a backend the search cannot tune: it tunes SeasonalNaive's settings and scores each candidate
    by SeasonalNaive's hindcasts. Checked before any history is read where the backend is known first
    (:func:`presage_scaler.tune.from_cluster.live_scaler`)."""
    if backend.type != "SeasonalNaive":
        raise TuneError(
            f"presage tune needs a backend that answers hindcasts (SeasonalNaive); a {backend.type} backend does not"
        )

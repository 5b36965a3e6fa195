"""The forecasting backend interface: history in, point + quantiles per step out, plus identity.

Every backend (the built-in SeasonalNaive, the TimesFM model server client) implements
:class:`ProbedBackend`: :class:`Backend` plus the controller's probe. A call carries a batch of
histories, so one evaluation with several signals — or a backtest with many decision windows — is
one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

import numpy as np

from presage_scaler.api.reasons import Reason


@dataclass(frozen=True)
class History:
    """A demand series on a regular step, oldest first, already gap-filled (finite values only)."""

    values: np.ndarray
    step: timedelta


@dataclass(frozen=True)
class HindcastRequest:
    """Past forecasts asked for alongside a forecast, so that calibration can score the backend on
    its own recent errors (:mod:`presage_scaler.engine.calibration`)."""

    window: int
    """Steps ahead each past forecast covers."""
    origins: np.ndarray
    """History lengths to forecast from: origin ``e`` forecasts from ``history.values[:e]``."""
    band: tuple[float, float] | None = None
    """Two quantile levels, lower first, whose band width over the window each past forecast also
    reports (:attr:`Hindcast.spreads`); None: none asked for."""


@dataclass(frozen=True)
class ForecastRequest:
    """What to forecast: ``horizon`` steps after the last point of ``history``, at ``quantiles``; and,
    for a backend that can hindcast cheaply, what it would have forecast from earlier origins."""

    history: History
    horizon: int
    quantiles: tuple[float, ...]
    hindcast: HindcastRequest | None = None


@dataclass(frozen=True)
class Hindcast:
    """A backend's answer to a :class:`HindcastRequest`."""

    origins: np.ndarray
    references: np.ndarray
    """Per origin, the highest point forecast over the window from that origin; NaN where the
    backend would have made none."""
    spreads: np.ndarray | None = None
    """Per origin, the widest the band between the request's two ``band`` levels was over the window
    from that origin (:func:`band_spread`); None when the request asked for none."""


@dataclass(frozen=True)
class Forecast:
    """A forecast: step ``i`` (0-based) is ``(i + 1) * step`` after the last history point.

    ``quantiles`` maps each requested level to an array of ``horizon`` values. ``method`` says how
    the numbers were made when it is not the backend's normal path (for example SeasonalNaive's
    cold-start fallback), so status and logs can report it instead of hiding it.
    """

    point: np.ndarray
    quantiles: dict[float, np.ndarray]
    method: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    hindcast: Hindcast | None = None
    """Set when the backend answered the request's hindcast; None when it does not hindcast."""

    def at(self, step_index: int, level: float) -> float:
        """The value at ``level`` for the given step, clamped into the forecast's range."""
        values = self.quantiles[level]
        return float(values[min(max(step_index, 0), len(values) - 1)])

    def point_at(self, step_index: int) -> float:
        """The point forecast for the given step, clamped into the forecast's range."""
        return float(self.point[min(max(step_index, 0), len(self.point) - 1)])


def band_spread(lower: np.ndarray, upper: np.ndarray, window: int) -> float:
    """How unsure a forecast is over its first ``window`` steps: the widest its band between two
    quantile levels is there (at least 0). Every backend's hindcast spreads and calibration's current
    one are this, so they compare like with like."""
    return max(0.0, float(np.max(upper[:window] - lower[:window])))


@dataclass(frozen=True)
class ModelIdentity:
    """Which backend and model produced a forecast, as reported in ``status.lastForecast``."""

    backend: str
    model: str | None = None
    revision: str | None = None


class BackendError(Exception):
    """A backend could not forecast. ``reason`` is the CamelCase condition reason to report."""

    reason = Reason.FORECAST_FAILED


class BackendUnavailable(BackendError):
    """The backend did not answer (connection refused, timeout, not ready)."""

    reason = Reason.BACKEND_UNAVAILABLE


class BackendRejected(BackendError):
    """The backend refused the request (bad input, limits exceeded)."""

    reason = Reason.BACKEND_REJECTED


def check_history(values: np.ndarray, step: timedelta, horizon: int) -> None:
    """Refuse, with :class:`BackendRejected`, what no backend can forecast from.

    Shared by every backend so the same bad request gets the same message whichever answers it.
    """
    if values.ndim != 1:
        raise BackendRejected(f"history must be one-dimensional, got shape {values.shape}")
    if len(values) == 0:
        raise BackendRejected("history is empty: nothing to forecast from")
    if step <= timedelta(0):
        raise BackendRejected(f"history step must be positive, got {step}")
    if horizon < 1:
        raise BackendRejected(f"horizon must be at least 1 step, got {horizon}")
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise BackendRejected(
            f"history has a non-finite value ({values[bad]}) at index {bad} of {len(values)}; "
            "it should have been gap-filled"
        )


class Backend(Protocol):
    """A forecasting backend: batch forecasts plus the limits and identity it reports."""

    @property
    def identity(self) -> ModelIdentity:
        """The backend and model that produce this backend's forecasts."""
        ...

    @property
    def max_context(self) -> int | None:
        """Most history points one forecast may use (None: unbounded)."""
        ...

    @property
    def max_horizon(self) -> int | None:
        """Most forecast steps one request may ask for (None: unbounded)."""
        ...

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        """Forecast each request; results are in request order. Raises :class:`BackendError`."""
        ...


class ProbedBackend(Backend, Protocol):
    """A backend the ForecastBackend controller can probe: every backend the registry builds."""

    async def probe(self) -> str | None:
        """Check the backend answers; return the model it reports. Raises :class:`BackendError`."""
        ...

"""Every backend, by the ForecastBackend ``type`` that selects it: one place that builds them.

The controller (one live backend per ForecastBackend), ``presage backtest`` and ``presage tune`` all
build through :func:`build_backend`, so a spec means the same backend everywhere.

A new backend is one module and its API declaration: the module (beside
:mod:`~presage_scaler.backends.seasonal_naive` and :mod:`~presage_scaler.backends.timesfm`) holds a
class implementing :class:`~presage_scaler.backends.base.ProbedBackend` (forecast, limits, identity
and probe) and a module-level ``from_spec(name, spec, http=None)``; the API declares its ``type`` in
``BackendType`` and its settings section in ``ForecastBackendSpec``
(:mod:`presage_scaler.api.forecast_backend`); and ``FACTORIES`` maps that type to ``from_spec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import aiohttp

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.backends import seasonal_naive, timesfm
from presage_scaler.backends.base import ProbedBackend


class BackendFactory(Protocol):
    def __call__(
        self, name: str, spec: ForecastBackendSpec, http: aiohttp.ClientSession | None = None
    ) -> ProbedBackend: ...


FACTORIES: Mapping[str, BackendFactory] = {
    "SeasonalNaive": seasonal_naive.from_spec,
    "TimesFM": timesfm.from_spec,
}
"""The factory of each ``spec.type``."""


def build_backend(name: str, spec: ForecastBackendSpec, http: aiohttp.ClientSession | None = None) -> ProbedBackend:
    """The backend of the ForecastBackend ``name`` (its identity's ``backend``) that ``spec`` describes.

    ``http`` is a shared client for backends that talk HTTP (pooled connections); without one such a
    backend makes its own.
    """
    factory = FACTORIES.get(spec.type)
    if factory is None:  # the API admits only the types above; a spec built around it is a bug
        raise ValueError(f"no backend of type {spec.type!r}; the registry has {', '.join(sorted(FACTORIES))}")
    return factory(name, spec, http)

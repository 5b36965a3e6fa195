"""presage's own kinds as API resources to read, watch and patch: built from their declaration in
:mod:`presage_scaler.api.kinds`, so the group, version, plural and scope are written once."""

from __future__ import annotations

from presage_scaler.api.kinds import FORECAST_BACKEND, GROUP, PREDICTIVE_SCALER, VERSION, Kind
from presage_scaler.clients.kube.client import Resource


def resource_of(kind: Kind) -> Resource:
    """The REST resource serving ``kind``."""
    return Resource(GROUP, VERSION, kind.plural, kind.namespaced, kind.name)


PREDICTIVE_SCALERS = resource_of(PREDICTIVE_SCALER)
FORECAST_BACKENDS = resource_of(FORECAST_BACKEND)

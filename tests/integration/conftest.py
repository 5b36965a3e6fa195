"""Fixtures shared by the tests that run presage against the real API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import apply, install_crds, seasonal_backend, unique


@pytest.fixture(scope="module")
def cluster(kube_control_plane: KubeControlPlane) -> KubeControlPlane:
    """The session's API server with presage's CRDs installed."""
    install_crds(kube_control_plane)
    return kube_control_plane


@pytest.fixture
def backend_name(cluster: KubeControlPlane) -> Iterator[str]:
    """A fresh SeasonalNaive ForecastBackend (1h season, 2 cycles), deleted afterwards."""
    name = unique("sn")
    apply(cluster, seasonal_backend(name))
    yield name
    cluster.kubectl("delete", "forecastbackend", name, "--ignore-not-found", check=False)

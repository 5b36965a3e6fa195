"""Pytest fixtures that start real, backfilled Prometheus servers.

Register with ``pytest_plugins = ["tests.harness.fixtures_prometheus"]``. Both factories take
:class:`~tests.harness.prometheus.Series` and return a started server (or an unstarted one with
``start=False``, to :meth:`~tests.harness.prometheus.PrometheusServer.add_series` first), behind a
:class:`~tests.harness.prometheus.WebConfig` when given ``web``; every
server they made is stopped at teardown. When Prometheus cannot be installed the fixture fails
with the reason: it never skips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from tests.harness.prometheus import PrometheusServer, PrometheusUnavailable, Series, WebConfig, ensure_prometheus


class PrometheusFactory(Protocol):
    def __call__(self, *series: Series, start: bool = True, web: WebConfig | None = None) -> PrometheusServer: ...


def _factory(make_dir: Callable[[], Path]) -> Iterator[PrometheusFactory]:
    problem = _unavailable()
    if problem:
        pytest.fail(f"a real Prometheus is required for this test: {problem}", pytrace=False)
    servers: list[PrometheusServer] = []

    def make(*series: Series, start: bool = True, web: WebConfig | None = None) -> PrometheusServer:
        server = PrometheusServer(make_dir(), web=web)
        servers.append(server)
        for one in series:
            server.add_series(one.name, one.labels, one.samples)
        if start:
            server.start()  # PrometheusUnavailable carries promtool's or Prometheus's own output
        return server

    yield make
    for server in servers:
        server.stop()


def _unavailable() -> str | None:
    try:
        ensure_prometheus()
    except PrometheusUnavailable as exc:
        return str(exc)
    return None


@pytest.fixture
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusFactory]:
    """Build and start a Prometheus per call; all are stopped when the test ends."""
    yield from _factory(lambda: tmp_path_factory.mktemp("prometheus"))


@pytest.fixture(scope="module")
def module_prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusFactory]:
    """Like ``prometheus_factory``, but servers live until the end of the test module."""
    yield from _factory(lambda: tmp_path_factory.mktemp("prometheus"))

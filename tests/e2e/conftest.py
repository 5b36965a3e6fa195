"""Fixtures for the end-to-end tests: one autoscaling stack per session, one workload per test.

The stack (:mod:`tests.harness.autoscaling`) runs on an API server of its own, so the session's
shared one stays free of controllers. Each test brings its own namespace, Prometheus and demand.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Generator, Iterator

import pytest

from tests.e2e.workload import QUIET_DEMAND, Workload, demand_series
from tests.harness.autoscaling import Autoscaling, start_autoscaling
from tests.harness.fixtures_prometheus import PrometheusFactory
from tests.harness.kube import KubeHarnessError
from tests.harness.live_values import LiveValues
from tests.harness.presage_cluster import apply, seasonal_backend, unique
from tests.harness.pytest_output import uncaptured

# How often the HPA re-reads its metrics: 15 s in a cluster; short here so each step takes seconds.
HPA_SYNC_SECONDS = 2.0
# The chart's defaults but one: a recommendation is stale after 20 s instead of 2 minutes, so the
# fallback test waits less for presage's UNAVAILABLE.
CHART_VALUES = {"scaler.stalenessFloorSeconds": "20"}

_stacks: list[Autoscaling] = []


@pytest.fixture(scope="session")
def autoscaling(pytestconfig: pytest.Config) -> Iterator[Autoscaling]:
    """The stack, started once; builds what is not cached yet (all four Go builds: about 25 minutes cold on 2 cores)."""
    if os.environ.get("PRESAGE_SKIP_KUBE") == "1":
        pytest.skip("PRESAGE_SKIP_KUBE=1: Kubernetes tests skipped on request")
    with contextlib.ExitStack() as cleanup:
        # Builds take minutes the first time: show their progress, and any start-up failure, live.
        with uncaptured(pytestconfig):
            try:
                stack = start_autoscaling(cleanup, hpa_sync_period=HPA_SYNC_SECONDS, chart_values=CHART_VALUES)
            except KubeHarnessError as exc:
                raise pytest.fail.Exception(f"end-to-end stack unavailable: {exc}", pytrace=False) from None
        _stacks.append(stack)
        yield stack
        _stacks.remove(stack)


@pytest.fixture
def new_namespace(autoscaling: Autoscaling) -> Iterator[Callable[[], str]]:
    """Namespaces made on demand (their ``default`` ServiceAccount comes from the controller-manager)."""
    made: list[str] = []

    def make() -> str:
        made.append(f"e2e-{uuid.uuid4().hex[:8]}")
        autoscaling.plane.kubectl("create", "namespace", made[-1])
        return made[-1]

    yield make
    for name in made:
        autoscaling.plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def workload(
    autoscaling: Autoscaling, new_namespace: Callable[[], str], prometheus_factory: PrometheusFactory
) -> Iterator[Callable[[], Workload]]:
    """Workloads made on demand, each in a namespace of its own with its own demand and Prometheus."""
    cleanup = contextlib.ExitStack()

    def make() -> Workload:
        backend = unique("sn")
        apply(autoscaling.plane, seasonal_backend(backend))
        cleanup.callback(
            autoscaling.plane.kubectl, "delete", "forecastbackend", backend, "--ignore-not-found", check=False
        )
        demand = LiveValues(demand=QUIET_DEMAND)
        cleanup.callback(demand.stop)
        prometheus = prometheus_factory(demand_series(), start=False)
        prometheus.add_scrape_target("live", demand.address)
        prometheus.start()
        return Workload(autoscaling, new_namespace(), backend, demand, prometheus)

    with cleanup:
        yield make


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # A failed end-to-end test keeps the workdir and shows what every process logged.
    if report.failed and "autoscaling" in getattr(item, "fixturenames", ()):
        for stack in _stacks:
            stack.plane.mark_failed()
            report.sections.append(("end-to-end stack logs", stack.logs()))
    return report

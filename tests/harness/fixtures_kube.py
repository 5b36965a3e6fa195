"""pytest fixtures for a real Kubernetes API server (see tests/harness/kube.py).

Register from the top-level conftest: ``pytest_plugins = ["tests.harness.fixtures_kube"]``.
Set PRESAGE_SKIP_KUBE=1 to skip the tests that need it; otherwise a missing Go toolchain
or a failed build is a test error, never a silent skip.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Generator, Iterator

import pytest

from tests.harness.kube import KubeControlPlane, KubeHarnessError, ensure_kube_binaries
from tests.harness.pytest_output import uncaptured

_planes: list[KubeControlPlane] = []


@pytest.fixture(scope="session")
def kube_control_plane(pytestconfig: pytest.Config) -> Iterator[KubeControlPlane]:
    """One etcd + kube-apiserver for the whole session, RBAC on, admin kubeconfig ready."""
    if os.environ.get("PRESAGE_SKIP_KUBE") == "1":
        pytest.skip("PRESAGE_SKIP_KUBE=1: Kubernetes integration tests skipped on request")
    # The first build takes many minutes: show its progress (and any start-up failure)
    # live instead of letting pytest swallow it.
    with uncaptured(pytestconfig):
        try:
            plane = KubeControlPlane(ensure_kube_binaries()).start()
        except KubeHarnessError as exc:
            # `from None`: the harness message is complete, the chained traceback is noise.
            raise pytest.fail.Exception(f"Kubernetes test control plane unavailable: {exc}", pytrace=False) from None
    _planes.append(plane)
    yield plane
    _planes.remove(plane)
    with uncaptured(pytestconfig):
        plane.stop()


@pytest.fixture
def kube_namespace(kube_control_plane: KubeControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (with its `default` ServiceAccount), deleted after the test.

    No controller-manager runs, so a deleted namespace stays Terminating; names are
    unique, so that never collides.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{slug or 'test'}-{uuid.uuid4().hex[:6]}"
    # The ServiceAccount is what the (absent) controller-manager would create; without
    # it the ServiceAccount admission plugin rejects Pods in the namespace.
    manifest = (
        f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n---\n"
        f"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: {name}\n"
    )
    kube_control_plane.kubectl("apply", "-f", "-", input=manifest)
    yield name
    kube_control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # A failing test that used the API server keeps its logs and workdir for inspection.
    if report.failed and "kube_control_plane" in getattr(item, "fixturenames", ()):
        for plane in _planes:
            plane.mark_failed()
    return report

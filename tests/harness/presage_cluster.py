"""Helpers for tests that run presage against the real API server: CRDs, objects, waiting."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.controller.app import ControllerOptions
from tests.harness.kube import KubeControlPlane, KubeHarnessError

REPO = Path(__file__).resolve().parents[2]
CRDS = ("predictivescalers.scaling.presage.sh", "forecastbackends.scaling.presage.sh")


def install_crds(plane: KubeControlPlane) -> None:
    plane.kubectl("apply", "-f", str(REPO / "crds"))
    for crd in CRDS:
        plane.wait_established(f"crd/{crd}")


def apply(plane: KubeControlPlane, obj: dict[str, Any], namespace: str | None = None) -> None:
    args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
    plane.kubectl(*args, input=json.dumps(obj))


def get(plane: KubeControlPlane, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    return json.loads(plane.kubectl(*args).stdout)


def scaler_table(plane: KubeControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    """The API server's own Table of the namespace's PredictiveScalers, what ``kubectl get`` prints (every
    column, -o wide's included), as name -> column -> cell (None where the column's path finds nothing)."""
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
    with plane.http_client() as http:
        response = http.get(
            f"/apis/scaling.presage.sh/v1alpha1/namespaces/{namespace}/predictivescalers", headers={"Accept": accept}
        )
    response.raise_for_status()
    table = response.json()
    assert table["kind"] == "Table", table
    names = [column["name"] for column in table["columnDefinitions"]]
    return {row["cells"][0]: dict(zip(names, row["cells"], strict=True)) for row in table["rows"]}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def seasonal_backend(name: str, season: str = "1h", cycles: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "ForecastBackend",
        "metadata": {"name": name},
        "spec": {"type": "SeasonalNaive", "seasonalNaive": {"season": season, "cycles": cycles}},
    }


def predictive_scaler(name: str, target: str, address: str, query: str, backend: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "signal": {"prometheus": {"address": address, "query": query}, "history": "3h", "resolution": "1m"},
        "capacity": {"perReplica": 10},
        "leadTime": {"static": "2m"},
        "interval": "15s",
        "forecast": {"backendRef": backend},
        "policy": {"maxReplicas": 100},
    }
    body.update(spec)
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": name},
        "spec": body,
    }


def web_demand_scaler(name: str, address: str, backend: str, **spec: Any) -> dict[str, Any]:
    """Scaler ``name`` of the Deployment "web" that tuning and advice tests tune: it reads
    ``web_demand{job="web"}`` from the Prometheus at ``address`` at 5m, every 5m, with a 10m lead time,
    20 per replica and 2 to 150 replicas (the API's default history, 14 days); ``spec`` sets more."""
    query = 'web_demand{job="web"}'
    return predictive_scaler(
        name,
        "web",
        address,
        query,
        backend,
        signal={"prometheus": {"address": address, "query": query}, "resolution": "5m"},
        interval="5m",
        leadTime={"static": "10m"},
        capacity={"perReplica": 20},
        policy={"maxReplicas": 150, "minReplicas": 2},
        **spec,
    )


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == type_), None)


async def eventually(
    probe: Callable[[], Any], check: Callable[[Any], bool], timeout: float = 60.0, what: str = "condition"
) -> Any:
    """Poll ``probe`` (sync, run in a thread) until ``check`` holds; return the last value.

    A probe that fails with :class:`KubeHarnessError` (e.g. the object does not exist yet) counts as "not yet".
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await asyncio.to_thread(probe)
        except KubeHarnessError as exc:
            last = str(exc)
        else:
            if check(last):
                return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last value:\n{json.dumps(last)[:3000]}")


PERIOD = 3600.0


def demand(at: datetime) -> float:
    """The test workload: an hourly sine around 100 units."""
    return 100.0 + 50.0 * math.sin(2 * math.pi * at.timestamp() / PERIOD)


def recent_samples(hours: float = 3.0) -> list[tuple[datetime, float]]:
    """One sample a minute up to now, so the controller's wall clock sees fresh data."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(hours=hours)
    return [(start + timedelta(minutes=i), demand(start + timedelta(minutes=i))) for i in range(int(hours * 60) + 1)]


WRITES_EVERY_EVALUATION = StalenessBound(factor=1.0, floor=timedelta(0))
"""A staleness bound of one interval leaves no room to hold a status for the next evaluation: every
evaluation writes its status (how the controller worked before statuses were held)."""


def options(plane: KubeControlPlane, namespace: str, **overrides: Any) -> ControllerOptions:
    """An in-process controller watching one namespace, on free ports, without a Lease unless asked."""
    ports = {"grpc_port": 0, "http_port": 0, "health_port": 0}
    settings = ports | {"leader_elect": False, "probe_period": 2.0} | overrides
    return ControllerOptions(kubeconfig=plane.kubeconfig, namespaces=(namespace,), **settings)


def controller_process(
    plane: KubeControlPlane, namespace: str, identity: str, log_path: Path, *flags: str
) -> subprocess.Popen[bytes]:
    """``presage run`` as its own process (so a test can SIGKILL it), watching ``namespace`` with its
    Leases there: 4 s leases renewed every 0.5 s, so takeovers happen within seconds."""
    cmd = [
        sys.executable,
        "-m",
        "presage_scaler.cli.main",
        "run",
        f"--kubeconfig={plane.kubeconfig}",
        f"--namespaces={namespace}",
        "--grpc-port=0",
        "--http-port=0",
        "--health-port=0",
        f"--lease-namespace={namespace}",
        f"--identity={identity}",
        "--lease-duration=4",
        "--renew-deadline=3",
        "--retry-period=0.5",
        "--probe-period=2",
        *flags,
    ]
    return subprocess.Popen(cmd, cwd=REPO, stdout=log_path.open("w"), stderr=subprocess.STDOUT, env=dict(os.environ))

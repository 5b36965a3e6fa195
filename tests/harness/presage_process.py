"""``presage run`` as a process, configured the way the Helm chart's Deployment configures the pod.

There is no kubelet in the tests, so the chart's Deployment never gets a running pod. This runs what
the pod would run instead: the container's ``args`` as the chart rendered them (only the ports
moved to free loopback ports), authenticated as the chart's ServiceAccount with a token from the
TokenRequest API, so the chart's RBAC is what presage gets. What a pod learns from its environment
is passed as flags: the Lease's namespace (a pod reads it from its ServiceAccount mount).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tests.harness.kube import KubeControlPlane, KubeHarnessError
from tests.harness.presage_cluster import REPO
from tests.harness.process import ServerProcess, free_ports

_PORT_FLAGS = ("--grpc-port=", "--http-port=", "--health-port=")


def scaler_pod(manifest: list[dict[str, Any]], name: str = "presage-scaler") -> dict[str, Any]:
    """The pod spec of Deployment ``name`` among a release's rendered objects."""
    [deployment] = [o for o in manifest if o and o["kind"] == "Deployment" and o["metadata"]["name"] == name]
    return deployment["spec"]["template"]["spec"]


class PresageScaler:
    """One presage-scaler replica for ``plane``, from the chart's rendered Deployment.

    The ports are chosen once, so a :meth:`stop` and :meth:`start` keep the address KEDA dials.
    """

    READY_TIMEOUT_S = 60.0

    def __init__(self, plane: KubeControlPlane, manifest: list[dict[str, Any]], namespace: str, workdir: Path) -> None:
        pod = scaler_pod(manifest)
        [container] = pod["containers"]
        self.plane = plane
        self.namespace = namespace
        self.workdir = workdir
        self.service_account: str = pod["serviceAccountName"]
        self.chart_args: list[str] = container["args"]
        self.grpc_port, self.http_port, self.health_port = free_ports(3)
        self._process: ServerProcess | None = None
        self._starts = 0

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def argv(self, kubeconfig: Path) -> list[str]:
        """The chart's args with the ports moved, plus what a pod would know from its environment."""
        kept = [a for a in self.chart_args if not a.startswith(_PORT_FLAGS)]
        return [
            sys.executable,
            "-m",
            "presage_scaler.cli.main",
            *kept,
            f"--grpc-port={self.grpc_port}",
            f"--http-port={self.http_port}",
            f"--health-port={self.health_port}",
            f"--kubeconfig={kubeconfig}",
            f"--lease-namespace={self.namespace}",
            f"--identity=e2e-{self._starts}",
        ]

    def start(self) -> PresageScaler:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._starts += 1
        token = self.plane.service_account_token(self.namespace, self.service_account)
        argv = self.argv(self.plane.kubeconfig_for_token(token))
        log = self.workdir / f"presage-scaler-{self._starts}.log"
        self._process = ServerProcess("presage-scaler", argv, log, error=KubeHarnessError, cwd=REPO)
        try:
            deadline = time.monotonic() + self.READY_TIMEOUT_S
            # Where the chart's readiness probe asks.
            self._process.wait_http(f"http://127.0.0.1:{self.health_port}/readyz", deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.stop()

    def log_tail(self, chars: int = 4000) -> str:
        return self._process.log_tail(chars) if self._process is not None else ""

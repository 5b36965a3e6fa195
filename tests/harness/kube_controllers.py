"""kube-controller-manager beside a test API server: the controllers that turn an HPA into replicas.

Built from the same ``tests/k8s`` module as the API server (cached in
``$PRESAGE_CACHE/kube-controller-manager/<k8s-version>-<digest>``, so adding it left the API
server's cache valid). It runs only the controllers the end-to-end tests need:

- ``horizontalpodautoscaling``: reads the HPA's metrics (KEDA's external metrics, through the
  aggregation layer) and writes the target's ``spec.replicas`` through its scale subresource;
- ``deployment`` and ``replicaset``: a Deployment gets its ReplicaSet and Pods (which stay Pending:
  no scheduler, no kubelet), so ``status.replicas`` follows ``spec.replicas`` as in a cluster;
- ``serviceaccount``: every namespace gets its ``default`` ServiceAccount, which Pods need;
- ``namespace``: a deleted namespace is emptied and goes away, so a finished test's objects do too.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.harness.gobuild import ensure_built
from tests.harness.kube import KubeControlPlane, KubeHarnessError, kubernetes_build
from tests.harness.process import ServerProcess, free_port

CONTROLLERS = ("horizontalpodautoscaling", "deployment", "replicaset", "serviceaccount", "namespace")


def ensure_controller_manager() -> Path:
    """The cached kube-controller-manager binary, built first if needed."""
    build = kubernetes_build(
        "kube-controller-manager",
        "kube-controller-manager",
        {"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager"},
    )
    return ensure_built(build, KubeHarnessError) / "kube-controller-manager"


class KubeControllerManager:
    """One kube-controller-manager process for ``plane``, as its admin, without leader election.

    ``hpa_sync_period`` is how often the HPA controller re-reads metrics (15 s in a cluster); the
    tests shorten it so that each step they wait for takes seconds, not a quarter of a minute.
    """

    READY_TIMEOUT_S = 60.0

    def __init__(self, plane: KubeControlPlane, binary: Path, *, hpa_sync_period: float = 15.0) -> None:
        self.plane = plane
        self.binary = binary
        self.hpa_sync_period = hpa_sync_period
        self.port = free_port()
        self.log_path = plane.workdir / "kube-controller-manager.log"
        self._process: ServerProcess | None = None

    def start(self) -> KubeControllerManager:
        kubeconfig = str(self.plane.kubeconfig)
        cmd = [
            str(self.binary),
            f"--kubeconfig={kubeconfig}",
            # Delegated authentication and authorization of its own /healthz and /metrics.
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--controllers={','.join(CONTROLLERS)}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self.plane.workdir / 'controller-manager-certs'}",
            f"--horizontal-pod-autoscaler-sync-period={self.hpa_sync_period:g}s",
            # --v=2 logs every HPA rescale with its reason: what a failed test needs to read.
            "--v=2",
        ]
        self._process = ServerProcess("kube-controller-manager", cmd, self.log_path, error=KubeHarnessError)
        try:
            self._process.wait_http(f"https://127.0.0.1:{self.port}/healthz", time.monotonic() + self.READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def log_tail(self, chars: int = 4000) -> str:
        return self._process.log_tail(chars) if self._process is not None else ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.stop()

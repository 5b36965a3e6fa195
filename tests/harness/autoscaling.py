"""The whole autoscaling path, real at every hop, on an API server of its own.

    presage run (the chart's flags, as the chart's ServiceAccount)
      ◀─gRPC── KEDA operator ◀─gRPC── KEDA metrics adapter ◀─aggregation layer── kube-apiserver
      ◀─ the HPA controller (kube-controller-manager) reads external.metrics.k8s.io and writes the
         Deployment's spec.replicas; the Deployment and ReplicaSet controllers make its Pods
         (Pending: no kubelet), so status.replicas follows as it does in a cluster.

presage is installed with the real ``helm install`` of ``charts/presage``; its pods cannot run
without a kubelet, so :class:`~tests.harness.presage_process.PresageScaler` runs the chart's
container args as a process instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from tests.harness.helm import CHART, IMAGE_FLAGS, Helm, ensure_helm
from tests.harness.keda import Keda, ensure_keda_binaries
from tests.harness.kube import KubeControlPlane, ensure_kube_binaries
from tests.harness.kube_controllers import KubeControllerManager, ensure_controller_manager
from tests.harness.presage_process import PresageScaler

PRESAGE_NAMESPACE = "presage-system"
RELEASE = "presage"


@dataclass
class Autoscaling:
    plane: KubeControlPlane
    controllers: KubeControllerManager
    keda: Keda
    helm: Helm
    presage: PresageScaler

    def logs(self) -> str:
        """The tails of every process's log, for a failed test's report."""
        return "\n".join(
            [
                f"--- kube-controller-manager ({self.controllers.log_path}):\n{self.controllers.log_tail()}",
                self.keda.log_tails(),
                f"--- presage-scaler:\n{self.presage.log_tail()}",
            ]
        )


def start_autoscaling(
    cleanup: contextlib.ExitStack, *, hpa_sync_period: float, chart_values: Mapping[str, str]
) -> Autoscaling:
    """Build what is not cached yet, start everything, and register each stop with ``cleanup``.

    ``chart_values`` are ``helm install --set`` values. On failure the API server's workdir, which
    holds every process's log, is kept.
    """
    plane = KubeControlPlane(ensure_kube_binaries()).start()
    cleanup.callback(plane.stop)
    try:
        controllers = KubeControllerManager(plane, ensure_controller_manager(), hpa_sync_period=hpa_sync_period)
        cleanup.callback(controllers.stop)
        controllers.start()
        keda = Keda(plane, ensure_keda_binaries())
        cleanup.callback(keda.stop)
        keda.start()
        helm = Helm(ensure_helm(), plane.workdir / "helm", plane.kubeconfig)
        values = [f"--set={key}={value}" for key, value in chart_values.items()]
        helm(
            "install",
            RELEASE,
            str(CHART),
            f"--namespace={PRESAGE_NAMESPACE}",
            "--create-namespace",
            *IMAGE_FLAGS,
            *values,
        )
        rendered = helm("get", "manifest", RELEASE, f"--namespace={PRESAGE_NAMESPACE}").stdout
        presage = PresageScaler(plane, list(yaml.safe_load_all(rendered)), PRESAGE_NAMESPACE, plane.workdir / "presage")
        cleanup.callback(presage.stop)
        presage.start()
    except BaseException:
        plane.mark_failed()
        raise
    return Autoscaling(plane, controllers, keda, helm, presage)

"""KEDA's CRDs for tests against the real API server: the minimal stand-ins in tests/fixtures."""

from __future__ import annotations

from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import REPO

KEDA_CRDS_FILE = REPO / "tests" / "fixtures" / "keda-scaledobject-crd.yaml"
KEDA_CRDS = ("scaledobjects.keda.sh", "triggerauthentications.keda.sh")


def install_keda_crds(plane: KubeControlPlane) -> None:
    """Apply the ScaledObject and TriggerAuthentication CRDs and wait until they are served."""
    plane.kubectl("apply", "-f", str(KEDA_CRDS_FILE))
    for crd in KEDA_CRDS:
        plane.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")


def uninstall_keda_crds(plane: KubeControlPlane) -> None:
    """Delete them (and with them every ScaledObject), waiting until the API server stops serving them."""
    plane.kubectl("delete", "-f", str(KEDA_CRDS_FILE), "--ignore-not-found", "--wait=true", timeout=120)

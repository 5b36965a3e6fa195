"""manifests/examples on a fresh real kube-apiserver: the files the README and docs/getting-started.md
tell a user to apply apply as written, in that order, with nothing created beforehand but presage's
CRDs and the namespace the guides create (the kustomize patch networkpolicy-namespaces.yaml is
checked in test_manifests_networkpolicy)."""

from __future__ import annotations

import json

import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from tests.harness.kube import KubeControlPlane, ensure_kube_binaries
from tests.harness.presage_cluster import REPO

pytestmark = pytest.mark.integration

EXAMPLES = REPO / "manifests" / "examples"


def test_the_shadow_scaler_and_its_secret_role_apply_to_a_fresh_cluster() -> None:
    with KubeControlPlane(ensure_kube_binaries()) as plane:
        plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        for crd in ("predictivescalers", "forecastbackends"):
            plane.wait_established(f"crd/{crd}.scaling.presage.sh")
        assert plane.kubectl("get", "namespace", "shop", check=False).returncode != 0

        # README step 4, as written: the namespace, then the scaler.
        plane.kubectl("create", "namespace", "shop")
        applied = plane.kubectl("apply", "-f", str(EXAMPLES / "shadow-scaler.yaml"), check=False)
        assert applied.returncode == 0, applied.stderr
        stored = json.loads(plane.kubectl("get", "predictivescaler", "checkout", "-n", "shop", "-o", "json").stdout)
        spec = parse(PredictiveScalerSpec, stored["spec"])
        assert spec.mode == "Shadow" and spec.scale_target_ref.name == "checkout"
        # The file holds no Namespace, so `kubectl delete -f` on it can never delete the workload's.
        assert "namespace/" not in applied.stdout

        # The Role a scaler reading its Prometheus Secrets needs, in the scaler's namespace.
        role = plane.kubectl("apply", "-f", str(EXAMPLES / "secret-reader-role.yaml"), check=False)
        assert role.returncode == 0, role.stderr
        assert plane.kubectl("get", "role", "presage-scaler-read-prometheus-secrets", "-n", "shop").returncode == 0

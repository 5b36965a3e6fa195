"""`presage scaledobject` end to end: the real CLI reads a PredictiveScaler from a real API server, and
what it prints is accepted by the API server under KEDA's own ScaledObject schema (KEDA v2.21.0's CRDs).
tests/e2e runs it through a real KEDA and HPA."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import yaml

from tests.harness.keda import install_keda_crds
from tests.harness.presage_cluster import REPO, apply, get, install_crds, predictive_scaler

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(kube_control_plane):
    install_crds(kube_control_plane)
    install_keda_crds(kube_control_plane)
    return kube_control_plane


def presage(plane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "scaledobject", *args, "--kubeconfig", str(plane.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def web_scaler(**spec: Any) -> dict[str, Any]:
    obj = predictive_scaler("web", "web", "http://prometheus.invalid:9090", "app_demand", "default", **spec)
    obj["spec"]["policy"] = {"minReplicas": 2, "maxReplicas": 30}
    return obj


def kubectl_apply(plane, text: str) -> subprocess.CompletedProcess[str]:
    # kubectl validates strictly by default: an unknown or misplaced field is an error, not dropped.
    return plane.kubectl("apply", "--validate=strict", "-f", "-", input=text, check=False)


def test_printed_scaled_object_is_accepted_by_the_api_server(cluster, kube_namespace) -> None:
    apply(cluster, web_scaler(mode="Enforce"), kube_namespace)

    result = presage(cluster, "web", "-n", kube_namespace)
    assert result.returncode == 0, result.stderr
    # Not evaluated yet (no controller runs here): the command says what KEDA will see meanwhile.
    assert "no recommendation yet" in result.stderr
    # This API server (1.35 or later) and KEDA's CRD take the tolerance: read from the cluster, it is set.
    assert "tolerance left out" not in result.stderr
    assert "Set because this cluster takes it: Kubernetes 1." in " ".join(
        line.lstrip("# ") for line in result.stdout.splitlines() if line.startswith("#")
    )
    [printed] = list(yaml.safe_load_all(result.stdout))
    spec = printed["spec"]
    assert printed["metadata"] == {"name": "web", "namespace": kube_namespace}
    assert spec["scaleTargetRef"] == {"name": "web"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["pollingInterval"]) == (2, 30, 7)  # 15s interval
    assert spec["triggers"][0]["metadata"]["predictiveScaler"] == "web"

    applied = kubectl_apply(cluster, result.stdout)
    assert applied.returncode == 0, applied.stderr
    stored = get(cluster, "scaledobject", "web", kube_namespace)
    # Nothing was pruned on the way in: the stored spec is what was printed.
    assert stored["spec"] == spec
    assert stored["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["tolerance"] == 0


def test_a_file_renders_offline_what_the_cluster_renders(cluster, kube_namespace, tmp_path) -> None:
    """GitOps: the same ScaledObject from the PredictiveScaler's file, with no cluster to reach, as from
    the API server that stored it (with its defaults filled in); the API server accepts it."""
    scaler = web_scaler(mode="Shadow")
    apply(cluster, scaler, kube_namespace)
    online = presage(cluster, "web", "-n", kube_namespace, "--tls", "--hpa-tolerance")
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump({**scaler, "metadata": {"name": "web", "namespace": kube_namespace}}))
    offline = render_file(path, tmp_path, "--tls", "--hpa-tolerance")
    assert online.returncode == offline.returncode == 0, (online.stderr, offline.stderr)
    assert offline.stdout == online.stdout
    assert "read from a file, not from the cluster" in offline.stderr and "no recommendation yet" in online.stderr
    applied = kubectl_apply(cluster, offline.stdout)
    assert applied.returncode == 0, applied.stderr


def render_file(path, tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    """``presage scaledobject -f`` with no cluster to reach."""
    return subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "scaledobject", "-f", str(path), *args,
         "--kubeconfig", str(tmp_path / "absent.kubeconfig")],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip


def test_without_the_cluster_the_tolerance_is_left_out_and_said(cluster, kube_namespace, tmp_path) -> None:
    """A file says nothing of the cluster's Kubernetes or KEDA: the ScaledObject every version takes (no
    tolerance), and a warning saying how to opt in; the API server accepts it."""
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump({**web_scaler(), "metadata": {"name": "web", "namespace": kube_namespace}}))
    offline = render_file(path, tmp_path)
    assert offline.returncode == 0, offline.stderr
    behavior = yaml.safe_load(offline.stdout)["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert "tolerance" not in behavior["scaleUp"] and "tolerance" not in behavior["scaleDown"]
    left_out = "warning: HPA tolerance left out (the cluster's Kubernetes and KEDA versions are not known)"
    assert f"presage scaledobject: {left_out}" in offline.stderr
    assert "pass --hpa-tolerance" in offline.stderr
    applied = kubectl_apply(cluster, offline.stdout)
    assert applied.returncode == 0, applied.stderr
    # Declined explicitly: nothing to warn about.
    assert "HPA tolerance" not in render_file(path, tmp_path, "--no-hpa-tolerance").stderr


def test_what_the_scaler_is_sized_with_other_than_its_spec_says_is_warned(cluster, kube_namespace, tmp_path) -> None:
    """capacity omitted (one replica per signal unit) and a clamped lead time: the warnings the scaler's
    SpecAdjusted condition will carry, from the cluster and from a file alike; nothing refused."""
    scaler = web_scaler(leadTime={"static": "2h"})
    del scaler["spec"]["capacity"]
    apply(cluster, scaler, kube_namespace)
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump({**scaler, "metadata": {"name": "web", "namespace": kube_namespace}}))
    for result in (presage(cluster, "web", "-n", kube_namespace), render_file(path, tmp_path)):
        assert result.returncode == 0, result.stderr
        assert (
            f"warning: PredictiveScaler {kube_namespace}/web: SpecAdjusted CapacityDefaulted: capacity is not set"
            in result.stderr
        )
        assert "SpecAdjusted LeadTimeClamped: leadTime.static 2h is above" in result.stderr
        assert kubectl_apply(cluster, result.stdout).returncode == 0


def test_mutual_tls_output_is_accepted_too(cluster, kube_namespace) -> None:
    apply(cluster, web_scaler(), kube_namespace)
    result = presage(
        cluster,
        "web",
        "-n",
        kube_namespace,
        "--tls-secret",
        "keda-presage-client",
        "--tls-client-cert",
        "--no-hpa-tolerance",
        "--scaled-object-name",
        "web-presage",
    )
    assert result.returncode == 0, result.stderr
    applied = kubectl_apply(cluster, result.stdout)
    assert applied.returncode == 0, applied.stderr
    so = get(cluster, "scaledobject", "web-presage", kube_namespace)
    trigger = so["spec"]["triggers"][0]
    assert trigger["metadata"]["enableTLS"] == "true"
    assert trigger["authenticationRef"] == {"name": "web-presage-presage-tls"}
    assert "tolerance" not in so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]
    auth = get(cluster, "triggerauthentication", "web-presage-presage-tls", kube_namespace)
    assert {r["parameter"] for r in auth["spec"]["secretTargetRef"]} == {"caCert", "tlsClientCert", "tlsClientKey"}


def test_the_schema_is_not_a_rubber_stamp(cluster, kube_namespace) -> None:
    # The acceptance above means something only if KEDA's CRD refuses what KEDA would.
    apply(cluster, web_scaler(), kube_namespace)
    result = presage(cluster, "web", "-n", kube_namespace, "--tls")
    assert result.returncode == 0, result.stderr
    printed = yaml.safe_load(result.stdout)

    boolean_metadata = yaml.safe_load(result.stdout)
    boolean_metadata["spec"]["triggers"][0]["metadata"]["enableTLS"] = True
    misplaced_tolerance = yaml.safe_load(result.stdout)
    down = misplaced_tolerance["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    down["policies"][0]["tolerance"] = down.pop("tolerance")
    for bad in (boolean_metadata, misplaced_tolerance):
        refused = kubectl_apply(cluster, yaml.safe_dump(bad))
        assert refused.returncode != 0, f"accepted: {bad['spec']}"
    assert kubectl_apply(cluster, yaml.safe_dump(printed)).returncode == 0


def test_missing_predictive_scaler_is_a_clear_error(cluster, kube_namespace) -> None:
    result = presage(cluster, "absent", "-n", kube_namespace)
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"no PredictiveScaler 'absent' in namespace '{kube_namespace}'" in result.stderr
    assert "Traceback" not in result.stderr


def test_agones_fleet_is_refused(cluster, kube_namespace) -> None:
    fleet = web_scaler()
    fleet["spec"]["scaleTargetRef"] = {"apiVersion": "agones.dev/v1", "kind": "Fleet", "name": "arena"}
    apply(cluster, fleet, kube_namespace)
    result = presage(cluster, "web", "-n", kube_namespace)
    assert result.returncode == 1 and result.stdout == ""
    assert "FleetAutoscaler" in result.stderr and "docs/agones.md" in result.stderr

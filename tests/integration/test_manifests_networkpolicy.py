"""The NetworkPolicies in manifests/, as the real API server would store them.

No network plugin runs here, so nothing is enforced: what is checked is that the server accepts each
policy, that it selects the pods of the Deployment it guards, that it covers exactly the ports that
Deployment's Service exposes, which namespaces it admits to each port, and that those namespace
selectors match the namespaces they name. A renamed label or port fails here, not in a cluster.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import REPO

pytestmark = pytest.mark.integration

MANIFESTS = REPO / "manifests"
OWN_NAMESPACE = "<own namespace>"

Objects = dict[tuple[str, str], dict[str, Any]]


def ensure_namespace(cluster: KubeControlPlane, name: str) -> None:
    # `create`, not `apply`: other tests' labels on a namespace they applied stay as they are.
    if cluster.kubectl("get", "namespace", name, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", name)


def rendered(cluster: KubeControlPlane, kustomization: Path) -> Objects:
    """Every object of a kustomization after a server-side dry-run (defaults applied), by kind and name."""
    ensure_namespace(cluster, "presage-system")  # the namespaced objects' dry-run needs it
    out = json.loads(cluster.kubectl("apply", "--dry-run=server", "-k", str(kustomization), "-o", "json").stdout)
    return {(o["kind"], o["metadata"]["name"]): o for o in out["items"]}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"only matchLabels selectors are checked here: {selector}"
    return selector.get("matchLabels", {}).items() <= labels.items()


def admitted(objects: Objects, name: str) -> dict[str, set[str]]:
    """Who policy ``name`` admits to each port, after checking it guards Deployment and Service ``name``.

    Sources are namespace names, or OWN_NAMESPACE for a bare ``podSelector: {}``.
    """
    policy = objects["NetworkPolicy", name]["spec"]
    pod = objects["Deployment", name]["spec"]["template"]
    service = objects["Service", name]["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert selects(policy["podSelector"], pod["metadata"]["labels"]), "the policy selects none of the pods"
    container_ports = {p["name"] for c in pod["spec"]["containers"] for p in c["ports"]}
    by_port: dict[str, set[str]] = {}
    for rule in policy["ingress"]:
        for source in rule["from"]:
            if "namespaceSelector" in source:
                assert "podSelector" not in source, "checked here: whole namespaces or the own namespace"
                sources = {source["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]}
            else:
                assert source == {"podSelector": {}}, source
                sources = {OWN_NAMESPACE}
            for port in rule["ports"]:
                assert port["protocol"] == "TCP"
                by_port.setdefault(port["port"], set()).update(sources)
    assert set(by_port) <= container_ports, "the policy names a port the pods do not have"
    assert set(by_port) == {p["targetPort"] for p in service["ports"]}, "policy and Service ports differ"
    return by_port


def assert_selectors_match_namespaces(cluster: KubeControlPlane, objects: Objects, name: str) -> None:
    """Each namespaceSelector, asked of the API server, finds exactly the namespace it names."""
    for rule in objects["NetworkPolicy", name]["spec"]["ingress"]:
        for source in rule["from"]:
            if "namespaceSelector" not in source:
                continue
            labels = source["namespaceSelector"]["matchLabels"]
            [namespace] = labels.values()
            ensure_namespace(cluster, namespace)
            selector = ",".join(f"{key}={value}" for key, value in labels.items())
            found = cluster.kubectl("get", "namespaces", "-l", selector, "-o", "name").stdout.split()
            assert found == [f"namespace/{namespace}"]


def test_scaler_admits_keda_to_grpc_agones_to_http_and_monitoring_to_health(cluster: KubeControlPlane) -> None:
    objects = rendered(cluster, MANIFESTS)
    # No webhook client reaches the port the kubelet's probes use.
    assert admitted(objects, "presage-scaler") == {
        "grpc": {"keda"},
        "http": {"agones-system"},
        "health": {"monitoring"},
    }
    container = objects["Deployment", "presage-scaler"]["spec"]["template"]["spec"]["containers"][0]
    assert {container[p]["httpGet"]["port"] for p in ("livenessProbe", "readinessProbe")} == {"health"}
    assert objects["Deployment", "presage-scaler"]["metadata"]["namespace"] == "presage-system"
    assert objects["NetworkPolicy", "presage-scaler"]["metadata"]["namespace"] == "presage-system"
    assert_selectors_match_namespaces(cluster, objects, "presage-scaler")


def test_forecaster_admits_its_own_namespace_and_monitoring(cluster: KubeControlPlane) -> None:
    objects = rendered(cluster, MANIFESTS / "forecaster")
    assert admitted(objects, "presage-forecaster") == {"http": {OWN_NAMESPACE, "monitoring"}}
    # Its own namespace is where presage-scaler runs.
    assert objects["NetworkPolicy", "presage-forecaster"]["metadata"]["namespace"] == "presage-system"
    assert_selectors_match_namespaces(cluster, objects, "presage-forecaster")


def test_documented_patch_changes_the_namespaces(cluster: KubeControlPlane, tmp_path: Path) -> None:
    # The overlay exactly as the patch file's header tells a user to write it.
    patch = MANIFESTS / "examples" / "networkpolicy-namespaces.yaml"
    shutil.copy(patch, tmp_path / patch.name)
    base = os.path.relpath(MANIFESTS, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {base}\n"
        f"patches:\n  - path: {patch.name}\n    target:\n      kind: NetworkPolicy\n      name: presage-scaler\n"
    )
    objects = rendered(cluster, tmp_path)
    assert admitted(objects, "presage-scaler") == {
        "grpc": {"keda-system"},
        "http": {"agones"},
        "health": {"prometheus"},
    }
    assert_selectors_match_namespaces(cluster, objects, "presage-scaler")

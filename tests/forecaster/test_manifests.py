"""manifests/forecaster: what the Deployment promises, checked statically and by a real API server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from presage_forecaster.settings import parse_settings

DIR = Path(__file__).resolve().parents[2] / "manifests" / "forecaster"


def load(name: str) -> dict:
    return yaml.safe_load((DIR / name).read_text())


def test_kustomization_lists_existing_files_in_presage_system():
    kustomization = load("kustomization.yaml")
    assert kustomization["namespace"] == "presage-system"
    assert set(kustomization["resources"]) == {
        "weights-pvc.yaml",
        "deployment.yaml",
        "service.yaml",
        "networkpolicy.yaml",
    }
    assert all((DIR / r).exists() for r in kustomization["resources"])
    assert load("weights-loader.yaml")["metadata"]["namespace"] == "presage-system"


def test_deployment_runs_non_root_offline_with_probes_resources_and_weights():
    deployment = load("deployment.yaml")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and env["HF_HOME"].startswith("/tmp")
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": 8080}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])

    settings = parse_settings(container["args"], {})  # the server's own flag parser accepts them
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert settings.model.startswith(mounts["weights"]["mountPath"] + "/") and mounts["weights"]["readOnly"]
    assert mounts["tmp"]["mountPath"] == "/tmp"  # HF_HOME and Python's temp files on a read-only root
    volumes = {v["name"]: v for v in pod["volumes"]}
    claim = volumes["weights"]["persistentVolumeClaim"]["claimName"]
    assert claim == load("weights-pvc.yaml")["metadata"]["name"]
    loader = load("weights-loader.yaml")["spec"]
    assert loader["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim
    assert loader["securityContext"]["runAsUser"] == pod["securityContext"]["runAsUser"]


def test_service_matches_the_api_example_endpoint():
    service = load("service.yaml")
    assert service["metadata"]["name"] == "presage-forecaster"  # http://presage-forecaster.presage-system:8080
    assert service["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]
    labels = load("deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


@pytest.mark.integration
def test_api_server_accepts_the_manifests(kube_control_plane):
    # No controller-manager runs, so the namespace's default ServiceAccount is created here.
    namespace = (
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: presage-system\n---\n"
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: presage-system\n"
    )
    kube_control_plane.kubectl("apply", "-f", "-", input=namespace)
    result = kube_control_plane.kubectl("apply", "--dry-run=server", "-k", str(DIR), "-o", "name")
    assert set(result.stdout.split()) == {
        "persistentvolumeclaim/presage-forecaster-weights",
        "deployment.apps/presage-forecaster",
        "service/presage-forecaster",
        "networkpolicy.networking.k8s.io/presage-forecaster",
    }
    loader = kube_control_plane.kubectl("apply", "--dry-run=server", "-f", str(DIR / "weights-loader.yaml"))
    assert "presage-forecaster-weights-loader" in loader.stdout

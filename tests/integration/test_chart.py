"""charts/presage with a real helm (built from the Go module proxy) and a real API server of its own.

Lint, the kustomize manifests generated from it, what each option renders (down to the flags
`presage run` parses and the Secrets its files come from), server-side validation of every rendered
object, and install, upgrade and uninstall. tests/e2e runs the installed chart's presage through KEDA.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from presage_scaler.cli.main import build_parser
from tests.harness.chart_manifests import stale_manifests
from tests.harness.helm import CHART, Helm, ensure_helm
from tests.harness.kube import KubeControlPlane, ensure_kube_binaries
from tests.harness.presage_process import scaler_pod

pytestmark = pytest.mark.integration

NAMESPACE = "presage-system"
# Every option set at once, away from its default.
EVERYTHING = {
    "forecaster.enabled": "true",
    "scaler.replicas": "1",
    "scaler.leaderElection.enabled": "false",
    "scaler.watchNamespaces": "{shop,payments}",
    "scaler.logLevel": "DEBUG",
    "scaler.stalenessFactor": "4",
    "scaler.stalenessFloorSeconds": "60",
    "scaler.extraArgs": "{--concurrency=64}",
    "scaler.watchTargets": "false",
    "scaler.grpc.port": "9443",
    "scaler.health.port": "8082",
    "scaler.grpc.tls.secretName": "presage-grpc-tls",
    "scaler.grpc.tls.requireClientCert": "true",
    "scaler.grpc.tls.clientCASecretName": "keda-client-ca",
    "scaler.http.tls.secretName": "presage-http-tls",
    "networkPolicy.kedaNamespace": "keda-system",
    "networkPolicy.agonesNamespace": "",
    "networkPolicy.monitoringNamespace": "prometheus",
}
VARIANTS = {"defaults": {}, "everything": EVERYTHING}

Objects = dict[tuple[str, str], dict[str, Any]]


def set_flags(values: dict[str, str]) -> list[str]:
    return [f"--set={key}={value}" for key, value in values.items()]


def render(helm: Helm, values: dict[str, str], *extra: str) -> Objects:
    out = helm("template", "presage", str(CHART), f"--namespace={NAMESPACE}", *set_flags(values), *extra).stdout
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out) if o}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(ensure_helm(), tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def chart_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeControlPlane, Helm]]:
    """An API server of its own: the shared one has presage's objects applied by kubectl, not helm."""
    with KubeControlPlane(ensure_kube_binaries()) as plane:
        yield plane, Helm(ensure_helm(), tmp_path_factory.mktemp("helm-cluster"), plane.kubeconfig)


@pytest.mark.parametrize("variant", VARIANTS)
def test_lint_is_clean(helm: Helm, variant: str) -> None:
    result = helm("lint", "--strict", str(CHART), *set_flags(VARIANTS[variant]))
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def test_kustomize_manifests_are_generated_from_the_chart(helm: Helm) -> None:
    assert stale_manifests(helm) == [], "run `python -m tests.harness.chart_manifests` and commit manifests/"


def mounted_secret(pod: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """(Secret name, key) that the file at ``path`` in ``container`` comes from."""
    file = PurePosixPath(path)
    [mount] = [m for m in container["volumeMounts"] if PurePosixPath(m["mountPath"]) == file.parent]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    items = {i["path"]: i["key"] for i in volume["secret"].get("items", [])}
    return volume["secret"]["secretName"], items.get(file.name, file.name)


def test_default_args_are_the_documented_ones(helm: Helm) -> None:
    [container] = scaler_pod(list(render(helm, {}).values()))["containers"]
    assert container["args"] == [
        "run",
        "--grpc-port=9090",
        "--http-port=8080",
        "--health-port=8081",
        "--lease-name=presage-scaler",
    ]


def test_every_option_reaches_presage_run(helm: Helm) -> None:
    objects = render(helm, EVERYTHING)
    deployment = objects["Deployment", "presage-scaler"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    # presage's own parser: an unknown or misspelt flag exits here.
    args = build_parser().parse_args(container["args"])
    assert args.command == "run"
    assert (args.grpc_port, args.http_port, args.health_port, args.lease_name) == (9443, 8080, 8082, "presage-scaler")
    assert (args.namespaces, args.log_level, args.leader_elect) == ("shop,payments", "DEBUG", False)
    assert (args.staleness_factor, args.staleness_floor, args.concurrency) == (4.0, 60.0, 64)
    assert args.watch_targets is False
    rules = objects["ClusterRole", "presage-scaler"]["rules"]
    assert not [r for r in rules if "apps" in r["apiGroups"] and "watch" in r["verbs"]]  # no watch, no grant
    default_rules = render(helm, {})["ClusterRole", "presage-scaler"]["rules"]
    assert {
        "apiGroups": ["apps"],
        "resources": ["deployments", "statefulsets", "replicasets"],
        "verbs": [
            "list",
            "watch",
        ],
    } in default_rules
    assert deployment["spec"]["replicas"] == 1
    files = {
        "grpc cert": (args.grpc_tls_cert, ("presage-grpc-tls", "tls.crt")),
        "grpc key": (args.grpc_tls_key, ("presage-grpc-tls", "tls.key")),
        "client CA": (args.grpc_client_ca, ("keda-client-ca", "ca.crt")),
        "http cert": (args.http_tls_cert, ("presage-http-tls", "tls.crt")),
        "http key": (args.http_tls_key, ("presage-http-tls", "tls.key")),
    }
    for what, (path, source) in files.items():
        assert isinstance(path, Path), what
        assert mounted_secret(pod, container, str(path)) == source, what
    # Probes stay on the plain-HTTP health port when the webhook serves HTTPS; the Service follows the ports.
    probes = [container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")]
    assert [(p["port"], p.get("scheme", "HTTP")) for p in probes] == [("health", "HTTP")] * 2
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["health"] == 8082
    ports = {p["name"]: p["port"] for p in objects["Service", "presage-scaler"]["spec"]["ports"]}
    assert ports == {"grpc": 9443, "http": 8080, "health": 8082}
    assert ("Deployment", "presage-forecaster") in objects


def test_shards_reach_presage_run_with_the_leases_they_need(helm: Helm) -> None:
    objects = render(helm, {"scaler.leaderElection.shards": "3"})
    [container] = scaler_pod(list(objects.values()))["containers"]
    args = build_parser().parse_args(container["args"])
    assert (args.shards, args.leader_elect) == (3, True)
    rules = objects["Role", "presage-scaler-leader-election"]["rules"]
    verbs = {verb for rule in rules if "resourceNames" not in rule for verb in rule["verbs"]}
    assert verbs == {"create", "get", "list", "update", "delete"}  # shard and membership Leases
    single = render(helm, {})["Role", "presage-scaler-leader-election"]["rules"]
    assert [r.get("resourceNames") for r in single] == [None, ["presage-scaler"]]  # one named Lease only
    [default] = scaler_pod(list(render(helm, {}).values()))["containers"]
    assert build_parser().parse_args(default["args"]).shards == 1
    refused = helm(
        "template",
        "presage",
        str(CHART),
        "--set=scaler.leaderElection.shards=2",
        "--set=scaler.leaderElection.enabled=false",
        check=False,
    )
    assert refused.returncode != 0 and "shards above 1 needs scaler.leaderElection.enabled" in refused.stderr


def admitted(policy: dict[str, Any]) -> dict[str, set[str]]:
    """Port name -> the namespace names (or "own" for a bare podSelector) a NetworkPolicy admits."""
    by_port: dict[str, set[str]] = {}
    for rule in policy["spec"]["ingress"]:
        sources = {
            s["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] if "namespaceSelector" in s else "own"
            for s in rule["from"]
        }
        for port in rule["ports"]:
            by_port.setdefault(port["port"], set()).update(sources)
    return by_port


def test_network_policy_namespaces_are_values(helm: Helm) -> None:
    defaults = render(helm, {"forecaster.enabled": "true"})
    assert admitted(defaults["NetworkPolicy", "presage-scaler"]) == {
        "grpc": {"keda"},
        "http": {"agones-system"},
        "health": {"monitoring"},
    }
    changed = render(helm, EVERYTHING)
    # An empty namespace drops its rule: no Agones here.
    assert admitted(changed["NetworkPolicy", "presage-scaler"]) == {"grpc": {"keda-system"}, "health": {"prometheus"}}
    assert admitted(changed["NetworkPolicy", "presage-forecaster"]) == {"http": {"own", "prometheus"}}
    off = render(helm, {"forecaster.enabled": "true", "networkPolicy.enabled": "false"})
    assert not [key for key in off if key[0] == "NetworkPolicy"]


def test_forecaster_is_optional(helm: Helm) -> None:
    assert not [key for key in render(helm, {}) if "forecaster" in key[1]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_objects_pass_the_api_servers_validation(
    chart_cluster: tuple[KubeControlPlane, Helm], variant: str
) -> None:
    plane, helm = chart_cluster
    plane.kubectl("apply", "--server-side", "-f", str(CHART / "crds"))  # a dry run cannot create a kind
    if plane.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        plane.kubectl("create", "namespace", NAMESPACE)
    objects = render(helm, VARIANTS[variant])
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects.values())})
    result = plane.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=body, check=False)
    assert result.returncode == 0, result.stderr


def test_install_upgrade_uninstall(chart_cluster: tuple[KubeControlPlane, Helm]) -> None:
    plane, helm = chart_cluster

    def get(kind: str, name: str) -> dict[str, Any] | None:
        result = plane.kubectl("get", kind, name, f"--namespace={NAMESPACE}", "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    helm("install", "presage", str(CHART), f"--namespace={NAMESPACE}", "--create-namespace")
    for crd in ("predictivescalers.scaling.presage.sh", "forecastbackends.scaling.presage.sh"):
        plane.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    assert get("forecastbackend", "default")["spec"]["seasonalNaive"] == {"season": "168h", "cycles": 3}
    assert get("deployment", "presage-scaler")["spec"]["replicas"] == 2
    assert get("clusterrole", "presage-scaler") is not None
    assert admitted(get("networkpolicy", "presage-scaler"))["grpc"] == {"keda"}

    helm(
        "upgrade",
        "presage",
        str(CHART),
        f"--namespace={NAMESPACE}",
        "--set=networkPolicy.kedaNamespace=keda-system",
        "--set=scaler.replicas=3",
    )
    assert admitted(get("networkpolicy", "presage-scaler"))["grpc"] == {"keda-system"}
    assert get("deployment", "presage-scaler")["spec"]["replicas"] == 3
    history = json.loads(helm("history", "presage", f"--namespace={NAMESPACE}", "-o", "json").stdout)
    assert [(r["revision"], r["status"]) for r in history] == [(1, "superseded"), (2, "deployed")]

    helm("uninstall", "presage", f"--namespace={NAMESPACE}", "--wait")
    for kind, name in [
        ("deployment", "presage-scaler"),
        ("service", "presage-scaler"),
        ("clusterrole", "presage-scaler"),
        ("networkpolicy", "presage-scaler"),
        ("forecastbackend", "default"),
    ]:
        assert get(kind, name) is None, f"{kind}/{name} survived helm uninstall"
    # Helm never deletes the CRDs it installed from crds/ (that would delete every PredictiveScaler).
    assert plane.kubectl("get", "crd", "predictivescalers.scaling.presage.sh", check=False).returncode == 0

"""charts/presage with a real helm (built from the Go module proxy) and real API servers of its own.

Lint, the values schema, the kustomize manifests generated from it, what each option renders (down to
the flags `presage run` parses and the Secrets its files come from), server-side validation of every
rendered object, and install, upgrade and uninstall: from nothing, over a kustomize install, and with
the CRD switches. tests/e2e runs the installed chart's presage through KEDA.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from presage_scaler.cli.advise import DEFAULT_DEADLINE
from presage_scaler.cli.main import build_parser
from tests.harness.chart_manifests import stale_manifests
from tests.harness.helm import CHART, IMAGE_FLAGS, IMAGES, Helm, ensure_helm
from tests.harness.kube import KubeControlPlane, ensure_kube_binaries
from tests.harness.presage_process import scaler_pod

pytestmark = pytest.mark.integration

REPO = CHART.parents[1]
NAMESPACE = "presage-system"
PRESAGE_CRDS = ("predictivescalers.scaling.presage.sh", "forecastbackends.scaling.presage.sh")
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
    "crds.keep": "false",
    "serviceAccount.create": "false",
    "serviceAccount.name": "presage-identity",
    "scaler.extraEnv[0].name": "SSL_CERT_FILE",
    "scaler.extraEnv[0].value": "/etc/presage/ca/ca.crt",
    "scaler.extraVolumes[0].name": "prometheus-ca",
    "scaler.extraVolumes[0].configMap.name": "prometheus-ca",
    "scaler.extraVolumeMounts[0].name": "prometheus-ca",
    "scaler.extraVolumeMounts[0].mountPath": "/etc/presage/ca",
    "scaler.podAnnotations.team": "autoscaling",
    "scaler.podLabels.tier": "control",
    "scaler.priorityClassName": "system-cluster-critical",
    "scaler.topologySpreadConstraints[0].maxSkew": "1",
    "scaler.topologySpreadConstraints[0].topologyKey": "topology.kubernetes.io/zone",
    "scaler.topologySpreadConstraints[0].whenUnsatisfiable": "DoNotSchedule",
    "metrics.serviceMonitor.enabled": "true",
    "metrics.serviceMonitor.interval": "30s",
    "metrics.serviceMonitor.labels.release": "kube-prometheus-stack",
    "metrics.podMonitor.enabled": "true",
    "metrics.podMonitor.scrapeTimeout": "10s",
    "certManager.enabled": "true",
    "advise.schedule": "5 */6 * * *",
    "advise.shards": "4",
    "advise.image.repository": "registry.example.com/presage-advise",
    "advise.image.tag": "0.2.0",
    "advise.image.pullPolicy": "IfNotPresent",
    "advise.warmup": "3d",
    "advise.holdout": "2d12h",
    "advise.deadline": "20m",
    "advise.jobs": "2",
    "advise.extraArgs": "{--namespace=shop}",
    "advise.extraEnv[0].name": "SSL_CERT_FILE",
    "advise.extraEnv[0].value": "/etc/ssl/certs/ca-certificates.crt",
    "advise.resources.requests.cpu": "2",
    "advise.activeDeadlineSeconds": "1800",
    "advise.backoffLimitPerIndex": "0",
    "advise.podAnnotations.team": "autoscaling",
    "advise.podLabels.tier": "batch",
    "advise.nodeSelector.pool": "batch",
    "advise.tolerations[0].key": "batch",
    "advise.tolerations[0].operator": "Exists",
    "advise.priorityClassName": "low",
}
# No presage advise CronJob (it runs by default).
NO_ADVICE = {"advise.enabled": "false"}
VARIANTS = {"defaults": {}, "everything": EVERYTHING, "no advice": NO_ADVICE}


def stand_in_crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    """A CRD that makes the API server serve ``kind`` and keep any content: a stand-in for the Prometheus
    Operator's and cert-manager's own, so that the chart's objects of those kinds install, upgrade and
    uninstall here (their schemas are those projects' to validate)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


OPTIONAL_KINDS = [
    stand_in_crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    stand_in_crd("monitoring.coreos.com", "PodMonitor", "podmonitors"),
    stand_in_crd("cert-manager.io", "Certificate", "certificates"),
    stand_in_crd("cert-manager.io", "Issuer", "issuers"),
]


def install_optional_kinds(plane: KubeControlPlane) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": OPTIONAL_KINDS})
    plane.kubectl("apply", "-f", "-", input=body)
    for crd in OPTIONAL_KINDS:
        plane.wait_established(f"crd/{crd['metadata']['name']}")


Objects = dict[tuple[str, str], dict[str, Any]]


def set_flags(values: dict[str, str]) -> list[str]:
    return [f"--set={key}={value}" for key, value in values.items()]


def render(helm: Helm, values: dict[str, str], *extra: str) -> Objects:
    out = helm(
        "template", "presage", str(CHART), f"--namespace={NAMESPACE}", *IMAGE_FLAGS, *set_flags(values), *extra
    ).stdout
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out) if o}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(ensure_helm(), tmp_path_factory.mktemp("helm"))


@pytest.fixture
def chart_cluster(tmp_path: Path) -> Iterator[tuple[KubeControlPlane, Helm]]:
    """A fresh API server for each test (a few seconds to start): the shared one has presage's CRDs
    applied by kubectl, and which CRDs and ForecastBackends exist is what these tests are about."""
    with KubeControlPlane(ensure_kube_binaries()) as plane:
        install_optional_kinds(plane)
        yield plane, Helm(ensure_helm(), tmp_path / "helm", plane.kubeconfig)


def get(plane: KubeControlPlane, kind: str, name: str, namespace: str = NAMESPACE) -> dict[str, Any] | None:
    """The object as JSON, or None when the API server has none of that name."""
    result = plane.kubectl("get", kind, name, f"--namespace={namespace}", "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def owner(obj: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The ownership Helm checks: the managed-by label and the release name and namespace annotations."""
    metadata = obj["metadata"]
    return (
        metadata.get("labels", {}).get("app.kubernetes.io/managed-by"),
        metadata.get("annotations", {}).get("meta.helm.sh/release-name"),
        metadata.get("annotations", {}).get("meta.helm.sh/release-namespace"),
    )


RELEASE_OWNED = ("Helm", "presage", NAMESPACE)


@pytest.mark.parametrize("variant", VARIANTS)
def test_lint_is_clean(helm: Helm, variant: str) -> None:
    result = helm("lint", "--strict", str(CHART), *IMAGE_FLAGS, *set_flags(VARIANTS[variant]))
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("flag", "error"),
    [
        ("scaler.replica=3", "at '/scaler': additional properties 'replica' not allowed"),
        ("metrics.serviceMonitor.enable=true", "at '/metrics/serviceMonitor': additional properties 'enable'"),
        ("crds.instal=false", "at '/crds': additional properties 'instal' not allowed"),
        ("scaler.grpc.port=http", "at '/scaler/grpc/port': got string, want integer"),
        ("scaler.podDisruptionBudget.minAvailable=most", "at '/scaler/podDisruptionBudget/minAvailable'"),
        ("certManager.issuer.kind=Issuers", "at '/certManager/issuer/kind'"),
        ("defaultForecastBackend.seasonalNaive.season=weekly", "at '/defaultForecastBackend/seasonalNaive/season'"),
        ("advise.shards=0", "at '/advise/shards'"),
        ("advise.shard=1", "at '/advise': additional properties 'shard' not allowed"),
        ("advise.warmup=week", "at '/advise/warmup'"),
        ("advise.schedule=", "at '/advise/schedule'"),
    ],
)
def test_a_misspelt_or_mistyped_value_fails_before_anything_renders(helm: Helm, flag: str, error: str) -> None:
    """values.schema.json: helm lint, template and install refuse it, naming the value."""
    for command in (["lint", "--strict", str(CHART)], ["template", "presage", str(CHART)]):
        result = helm(*command, f"--set={flag}", check=False)
        assert result.returncode != 0 and error in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("enabled", "value", "build"),
    [
        ((), "scaler.image.repository", "Dockerfile.scaler"),
        (("forecaster.enabled",), "forecaster.image.repository", "Dockerfile.forecaster"),
    ],
)
def test_an_image_repository_left_unset_fails_saying_what_to_build_and_set(
    helm: Helm, enabled: tuple[str, ...], value: str, build: str
) -> None:
    """No registry publishes presage's images, so the chart names none: template and install stop at
    the first image without a repository, with the value to set and how to build the image."""
    others = [flag for flag in IMAGE_FLAGS if not flag.startswith(f"--set={value}=")]
    flags = [*others, *(f"--set={switch}=true" for switch in enabled)]
    for command in (["template", "presage", str(CHART)], ["install", "presage", str(CHART), "--dry-run=client"]):
        refused = helm(*command, f"--namespace={NAMESPACE}", *flags, check=False)
        assert refused.returncode != 0
        assert (
            f"{value} is not set: no registry publishes presage's images. Build {build}, push it where your "
            f"cluster pulls from, and set it, e.g. --set {value}={IMAGES[value]}"
        ) in refused.stderr, refused.stderr
    # Set, it renders.
    assert any(o["kind"] == "Deployment" for o in render(helm, {switch: "true" for switch in enabled}).values())


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
    objects = render(helm, {**EVERYTHING, "certManager.enabled": "false"})
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


def test_every_option_reaches_the_pod(helm: Helm) -> None:
    objects = render(helm, EVERYTHING)
    pod = objects["Deployment", "presage-scaler"]["spec"]["template"]
    spec = pod["spec"]
    [container] = spec["containers"]
    assert container["env"] == [{"name": "SSL_CERT_FILE", "value": "/etc/presage/ca/ca.crt"}]
    assert {"name": "prometheus-ca", "configMap": {"name": "prometheus-ca"}} in spec["volumes"]
    assert {"name": "prometheus-ca", "mountPath": "/etc/presage/ca"} in container["volumeMounts"]
    assert pod["metadata"]["annotations"] == {"team": "autoscaling"}
    assert pod["metadata"]["labels"]["tier"] == "control"
    assert spec["priorityClassName"] == "system-cluster-critical"
    # The chart adds the pods' selector to a constraint that names none.
    assert spec["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {
                "matchLabels": {"app.kubernetes.io/name": "presage-scaler", "app.kubernetes.io/instance": "presage"}
            },
        }
    ]
    assert "topologySpreadConstraints" not in scaler_pod(
        list(render(helm, {"scaler.topologySpreadConstraints": "null"}).values())
    )
    # Still non-root, read-only and without capabilities with everything set.
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_service_account_created_or_named(helm: Helm) -> None:
    default = render(helm, {})
    assert ("ServiceAccount", "presage-scaler") in default
    assert scaler_pod(list(default.values()))["serviceAccountName"] == "presage-scaler"
    existing = render(helm, {"serviceAccount.create": "false", "serviceAccount.name": "presage-identity"})
    # Only advise's own identity (it is never the scaler's) is still created.
    assert [key for key in existing if key[0] == "ServiceAccount"] == [("ServiceAccount", ADVISE_NAME)]
    assert scaler_pod(list(existing.values()))["serviceAccountName"] == "presage-identity"
    for binding in (("ClusterRoleBinding", "presage-scaler"), ("RoleBinding", "presage-scaler-leader-election")):
        assert [s["name"] for s in existing[binding]["subjects"]] == ["presage-identity"], binding
    named = render(helm, {"serviceAccount.name": "presage-identity", "serviceAccount.annotations.iam": "role"})
    assert named["ServiceAccount", "presage-identity"]["metadata"]["annotations"] == {"iam": "role"}


def test_pod_disruption_budget_with_more_than_one_replica(helm: Helm) -> None:
    pdb = render(helm, {})["PodDisruptionBudget", "presage-scaler"]["spec"]
    assert pdb == {
        "minAvailable": 1,
        "selector": {
            "matchLabels": {"app.kubernetes.io/name": "presage-scaler", "app.kubernetes.io/instance": "presage"}
        },
    }
    assert (
        "minAvailable"
        not in render(helm, {"scaler.podDisruptionBudget.maxUnavailable": "50%"})[
            "PodDisruptionBudget", "presage-scaler"
        ]["spec"]
    )
    for off in ({"scaler.replicas": "1"}, {"scaler.podDisruptionBudget.enabled": "false"}):
        assert not [key for key in render(helm, off) if key[0] == "PodDisruptionBudget"], off


def test_monitors_scrape_the_health_port(helm: Helm) -> None:
    objects = render(helm, EVERYTHING)
    service = objects["Service", "presage-scaler"]
    monitor = objects["ServiceMonitor", "presage-scaler"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [{"port": "health", "path": "/metrics", "interval": "30s"}]
    pods = objects["PodMonitor", "presage-scaler"]
    pod_labels = objects["Deployment", "presage-scaler"]["spec"]["template"]["metadata"]["labels"]
    assert pods["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pods["spec"]["podMetricsEndpoints"] == [{"port": "health", "path": "/metrics", "scrapeTimeout": "10s"}]
    assert "health" in {p["name"] for p in service["spec"]["ports"]}
    assert not [key for key in render(helm, {}) if key[0] in ("ServiceMonitor", "PodMonitor")]


def test_cert_manager_certificate_serves_both_listeners(helm: Helm) -> None:
    objects = render(helm, {"certManager.enabled": "true", "scaler.grpc.tls.requireClientCert": "true"})
    certificate = objects["Certificate", "presage-scaler"]["spec"]
    assert certificate["secretName"] == "presage-scaler-tls"
    assert certificate["dnsNames"] == [
        "presage-scaler",
        "presage-scaler.presage-system",
        "presage-scaler.presage-system.svc",
        "presage-scaler.presage-system.svc.cluster.local",
    ]
    # No issuer given: a self-signed CA of the release's own signs it.
    assert certificate["issuerRef"] == {"name": "presage-scaler-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert objects["Issuer", "presage-scaler-ca"]["spec"] == {"ca": {"secretName": "presage-scaler-ca"}}
    assert objects["Certificate", "presage-scaler-ca"]["spec"]["isCA"] is True
    pod = scaler_pod(list(objects.values()))
    [container] = pod["containers"]
    args = build_parser().parse_args(container["args"])
    for path in (args.grpc_tls_cert, args.grpc_tls_key, args.http_tls_cert, args.http_tls_key, args.grpc_client_ca):
        assert mounted_secret(pod, container, str(path))[0] == "presage-scaler-tls", path
    # An issuer of your own: only the serving certificate; a listener's own Secret wins; one listener only.
    own = render(
        helm,
        {
            "certManager.enabled": "true",
            "certManager.issuer.name": "letsencrypt",
            "certManager.issuer.kind": "ClusterIssuer",
            "certManager.http": "false",
        },
    )
    assert [key for key in own if key[0] in ("Certificate", "Issuer")] == [("Certificate", "presage-scaler")]
    assert own["Certificate", "presage-scaler"]["spec"]["issuerRef"]["kind"] == "ClusterIssuer"
    [plain] = scaler_pod(list(own.values()))["containers"]
    assert build_parser().parse_args(plain["args"]).http_tls_cert is None
    mixed = render(helm, {"certManager.enabled": "true", "scaler.grpc.tls.secretName": "mine"})
    pod = scaler_pod(list(mixed.values()))
    [container] = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert mounted_secret(pod, container, str(args.grpc_tls_cert))[0] == "mine"
    assert mounted_secret(pod, container, str(args.http_tls_cert))[0] == "presage-scaler-tls"


def test_crds_are_templates_kept_on_uninstall(helm: Helm) -> None:
    """The CRDs render from templates (so helm upgrade upgrades them) with crds/'s schema, kept on
    uninstall unless crds.keep is false, and not at all with crds.install false."""
    objects = render(helm, {})
    for name in PRESAGE_CRDS:
        crd = objects["CustomResourceDefinition", name]
        [file] = [f for f in (REPO / "crds").iterdir() if yaml.safe_load(f.read_text())["metadata"]["name"] == name]
        assert crd["spec"] == yaml.safe_load(file.read_text())["spec"]
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert (
        "annotations"
        not in render(helm, {"crds.keep": "false"})["CustomResourceDefinition", PRESAGE_CRDS[0]]["metadata"]
    )
    assert not [key for key in render(helm, {"crds.install": "false"}) if key[0] == "CustomResourceDefinition"]


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
        *IMAGE_FLAGS,
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


ADVISE_NAME = "presage-scaler-advise"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
CHART_VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


def advise_job(objects: Objects) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The advise CronJob's Job spec, pod template and its one container."""
    job = objects["CronJob", ADVISE_NAME]["spec"]["jobTemplate"]["spec"]
    [container] = job["template"]["spec"]["containers"]
    return job, job["template"], container


def test_advise_runs_by_default_on_the_scaler_deployments_image(helm: Helm) -> None:
    """The default values render the advise CronJob, its ServiceAccount and its RBAC, and the CronJob
    runs exactly the scaler Deployment's image (repository, tag and pull policy): no second image to
    build. advise.enabled=false renders none of it."""
    for scaler_image in ({}, {"scaler.image.tag": "0.3.1", "scaler.image.pullPolicy": "Always"}):
        objects = render(helm, scaler_image)
        [scaler] = scaler_pod(list(objects.values()))["containers"]
        _, _, container = advise_job(objects)
        assert container["image"] == scaler["image"], scaler_image
        assert container.get("imagePullPolicy") == scaler.get("imagePullPolicy"), scaler_image
        assert container["image"].startswith(IMAGES["scaler.image.repository"] + ":")
    assert container["image"].endswith(":0.3.1") and container["imagePullPolicy"] == "Always"
    assert {("ServiceAccount", ADVISE_NAME), ("ClusterRole", ADVISE_NAME), ("ClusterRoleBinding", ADVISE_NAME)} <= set(
        render(helm, {})
    )
    assert CHART_VALUES["advise"]["enabled"] is True
    objects = render(helm, NO_ADVICE)
    assert not [key for key in objects if "advise" in key[1] or key[0] in ("CronJob", "Job")]


def test_advise_runs_as_an_indexed_job_each_pod_a_shard(helm: Helm, monkeypatch: pytest.MonkeyPatch) -> None:
    objects = render(helm, {"advise.shards": "3"})
    cronjob = objects["CronJob", ADVISE_NAME]
    assert cronjob["metadata"]["namespace"] == NAMESPACE
    assert cronjob["spec"]["schedule"] == "17 * * * *"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert (cronjob["spec"]["successfulJobsHistoryLimit"], cronjob["spec"]["failedJobsHistoryLimit"]) == (1, 3)
    job, template, container = advise_job(objects)
    assert job["completionMode"] == "Indexed"
    assert (job["completions"], job["parallelism"]) == (3, 3)
    assert (job["backoffLimitPerIndex"], job["activeDeadlineSeconds"]) == (1, 3300)
    pod = template["spec"]
    assert pod["restartPolicy"] == "Never"
    assert container["name"] == "advise"
    assert container["image"] == f"{IMAGES['scaler.image.repository']}:{APP_VERSION}"
    assert "imagePullPolicy" not in container
    # No --shard: each pod takes its index from the variable Kubernetes sets in an indexed Job's pods.
    assert container["args"] == ["advise", "--shards=3", "--jobs=1"]
    assert not [a for a in container["args"] if a.startswith("--shard=")]
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.shard, args.shards, args.jobs) == ("advise", 2, 3, 1)
    assert args.warmup == timedelta(days=7) and args.holdout is None  # presage's defaults
    assert args.deadline == DEFAULT_DEADLINE
    # Its own identity, with the scaler's pod and container security.
    assert pod["serviceAccountName"] == ADVISE_NAME
    assert ("ServiceAccount", ADVISE_NAME) in objects
    assert pod["securityContext"] == CHART_VALUES["scaler"]["podSecurityContext"]
    assert container["securityContext"] == CHART_VALUES["scaler"]["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    [mount] = container["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in volume
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    labels = template["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == ADVISE_NAME
    assert labels["app.kubernetes.io/instance"] == "presage"
    assert labels["app.kubernetes.io/part-of"] == "presage"
    # The scaler's own pods are never selected by it, nor it by theirs.
    scaler_selector = objects["Deployment", "presage-scaler"]["spec"]["selector"]["matchLabels"]
    assert not scaler_selector.items() <= labels.items()


def test_every_advise_option_reaches_presage_advise(helm: Helm) -> None:
    objects = render(helm, {**EVERYTHING, "scaler.imagePullSecrets[0].name": "registry"})
    cronjob = objects["CronJob", ADVISE_NAME]
    assert cronjob["spec"]["schedule"] == "5 */6 * * *"
    job, template, container = advise_job(objects)
    assert (job["completions"], job["parallelism"]) == (4, 4)
    assert (job["backoffLimitPerIndex"], job["activeDeadlineSeconds"]) == (0, 1800)
    assert container["image"] == "registry.example.com/presage-advise:0.2.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.shards, args.jobs, args.namespace) == ("advise", 4, 2, "shop")
    assert (args.warmup, args.holdout) == (timedelta(days=3), timedelta(days=2, hours=12))
    assert args.deadline == timedelta(minutes=20)
    assert container["env"] == [{"name": "SSL_CERT_FILE", "value": "/etc/ssl/certs/ca-certificates.crt"}]
    assert container["resources"]["requests"]["cpu"] == 2
    pod = template["spec"]
    assert template["metadata"]["annotations"] == {"team": "autoscaling"}
    assert template["metadata"]["labels"]["tier"] == "batch"
    assert pod["nodeSelector"] == {"pool": "batch"}
    assert pod["tolerations"] == [{"key": "batch", "operator": "Exists"}]
    assert pod["priorityClassName"] == "low"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    # Its ServiceAccount is its own, whatever the scaler's is (here an existing one, not created).
    assert pod["serviceAccountName"] == ADVISE_NAME
    assert ("ServiceAccount", ADVISE_NAME) in objects
    assert ("ServiceAccount", "presage-identity") not in objects


def test_advise_refuses_a_scaler_name_too_long_for_a_cronjob(helm: Helm) -> None:
    """A CronJob's name is at most 52 characters (its Jobs add a suffix); helm says so, not the API server."""
    long_name = "s" * 46  # a valid scaler.name; with "-advise" it is 53 characters
    refused = helm(
        "template",
        "presage",
        str(CHART),
        *IMAGE_FLAGS,
        f"--set=scaler.name={long_name}",
        check=False,
    )
    assert refused.returncode != 0 and "longer than Kubernetes allows (52 characters)" in refused.stderr
    assert ("CronJob", f"{'s' * 45}-advise") in render(helm, {"scaler.name": "s" * 45})


# What presage advise does, and all it may do: list and read scalers, read their ForecastBackend,
# patch their status subresource, and write Events.
ADVISE_RULES = [
    {"apiGroups": ["scaling.presage.sh"], "resources": ["predictivescalers"], "verbs": ["get", "list"]},
    {"apiGroups": ["scaling.presage.sh"], "resources": ["forecastbackends"], "verbs": ["get"]},
    {"apiGroups": ["scaling.presage.sh"], "resources": ["predictivescalers/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]


def test_advise_cluster_role_grants_exactly_what_advise_uses(helm: Helm) -> None:
    objects = render(helm, {})
    rules = objects["ClusterRole", ADVISE_NAME]["rules"]
    assert rules == ADVISE_RULES
    granted = [
        (group, resource, verb)
        for r in rules
        for group in r["apiGroups"]
        for resource in r["resources"]
        for verb in r["verbs"]
    ]
    assert not [g for g in granted if "*" in g or g[1] == "secrets" or g[2] in ("update", "delete", "watch")]
    binding = objects["ClusterRoleBinding", ADVISE_NAME]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ADVISE_NAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": ADVISE_NAME, "namespace": NAMESPACE}]
    # rbac.create false: the ServiceAccount still, no roles.
    unbound = render(helm, {"rbac.create": "false"})
    assert [key for key in unbound if "advise" in key[1]] == [("ServiceAccount", ADVISE_NAME), ("CronJob", ADVISE_NAME)]


def test_advise_service_account_may_do_what_advise_does_and_nothing_more(
    chart_cluster: tuple[KubeControlPlane, Helm],
) -> None:
    """Installed with the defaults (advise runs), the API server's own authorizer answers for the advise
    ServiceAccount's token; the example Role grants it the one Secret a scaler's signal names."""
    plane, helm = chart_cluster
    install(helm)
    assert get(plane, "cronjob", ADVISE_NAME) is not None
    plane.kubectl("create", "namespace", "shop")
    as_advise = plane.kubeconfig_for_token(plane.service_account_token(NAMESPACE, ADVISE_NAME))

    def may(*request: str) -> bool:
        result = plane.kubectl("auth", "can-i", *request, kubeconfig=as_advise, check=False)
        assert result.stdout.strip() in ("yes", "no"), result.stdout + result.stderr
        return result.stdout.strip() == "yes"

    allowed = [
        ("list", "predictivescalers.scaling.presage.sh", "--all-namespaces"),
        ("get", "predictivescalers.scaling.presage.sh", "-n", "shop"),
        ("get", "forecastbackends.scaling.presage.sh"),
        ("patch", "predictivescalers.scaling.presage.sh", "--subresource=status", "-n", "shop"),
        ("create", "events", "-n", "shop"),
        ("patch", "events", "-n", "shop"),
    ]
    denied = [
        ("patch", "predictivescalers.scaling.presage.sh", "-n", "shop"),  # the spec is never written
        ("update", "predictivescalers.scaling.presage.sh", "--subresource=status", "-n", "shop"),
        ("watch", "predictivescalers.scaling.presage.sh", "-n", "shop"),
        ("list", "forecastbackends.scaling.presage.sh"),
        ("get", "secrets", "-n", "shop"),
        ("list", "secrets", "--all-namespaces"),
        ("get", "deployments.apps", "--subresource=scale", "-n", "shop"),
        ("create", "jobs.batch", "-n", NAMESPACE),
    ]
    assert [r for r in allowed if not may(*r)] == []
    assert [r for r in denied if may(*r)] == []
    # The example grants exactly one Secret in the scaler's namespace, to the scaler and to advise.
    for doc in yaml.safe_load_all((REPO / "manifests" / "examples" / "secret-reader-role.yaml").read_text()):
        plane.kubectl("apply", "-f", "-", input=json.dumps(doc))
    assert may("get", "secrets/prometheus-token", "-n", "shop")
    assert not may("get", "secrets/other", "-n", "shop")


def test_rendered_objects_pass_the_api_servers_validation(chart_cluster: tuple[KubeControlPlane, Helm]) -> None:
    plane, helm = chart_cluster
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))  # a dry run cannot create a kind
    plane.kubectl("create", "namespace", NAMESPACE)
    for variant in VARIANTS.values():
        objects = render(helm, variant)
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects.values())})
        result = plane.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=body, check=False)
        assert result.returncode == 0, result.stderr


def install(helm: Helm, *flags: str) -> str:
    """helm install the chart as ``presage`` in presage-system; its NOTES."""
    return helm(
        "install", "presage", str(CHART), f"--namespace={NAMESPACE}", "--create-namespace", *IMAGE_FLAGS, *flags
    ).stdout


def test_install_upgrade_uninstall(chart_cluster: tuple[KubeControlPlane, Helm]) -> None:
    plane, helm = chart_cluster
    install(helm)
    for crd in PRESAGE_CRDS:
        plane.wait_established(f"crd/{crd}")
        assert owner(get(plane, "crd", crd)) == RELEASE_OWNED, crd  # the release's: upgraded with it
    # Applied by a hook once the CRDs exist, marked as the release's.
    backend = get(plane, "forecastbackend", "default")
    assert backend["spec"]["seasonalNaive"] == {"season": "168h", "cycles": 3}
    assert owner(backend) == RELEASE_OWNED
    assert get(plane, "deployment", "presage-scaler")["spec"]["replicas"] == 2
    assert get(plane, "poddisruptionbudget", "presage-scaler")["spec"]["minAvailable"] == 1
    assert get(plane, "clusterrole", "presage-scaler") is not None
    assert admitted(get(plane, "networkpolicy", "presage-scaler"))["grpc"] == {"keda"}

    helm(
        "upgrade",
        "presage",
        str(CHART),
        f"--namespace={NAMESPACE}",
        *IMAGE_FLAGS,
        "--set=networkPolicy.kedaNamespace=keda-system",
        "--set=scaler.replicas=3",
        "--set=defaultForecastBackend.seasonalNaive.cycles=4",
        "--set=metrics.serviceMonitor.enabled=true",
        "--set=metrics.podMonitor.enabled=true",
        "--set=certManager.enabled=true",
        "--set=advise.enabled=true",
    )
    assert admitted(get(plane, "networkpolicy", "presage-scaler"))["grpc"] == {"keda-system"}
    assert get(plane, "cronjob", "presage-scaler-advise")["spec"]["jobTemplate"]["spec"]["completionMode"] == "Indexed"
    assert get(plane, "deployment", "presage-scaler")["spec"]["replicas"] == 3
    upgraded = get(plane, "forecastbackend", "default")
    assert upgraded["spec"]["seasonalNaive"]["cycles"] == 4
    # Updated in place, never deleted and created again: scalers never find it missing.
    assert upgraded["metadata"]["uid"] == backend["metadata"]["uid"]
    for kind in ("servicemonitor", "podmonitor", "certificate"):
        assert get(plane, kind, "presage-scaler") is not None, kind
    history = json.loads(helm("history", "presage", f"--namespace={NAMESPACE}", "-o", "json").stdout)
    assert [(r["revision"], r["status"]) for r in history] == [(1, "superseded"), (2, "deployed")]

    helm("uninstall", "presage", f"--namespace={NAMESPACE}", "--wait")
    for kind, name in [
        ("deployment", "presage-scaler"),
        ("service", "presage-scaler"),
        ("clusterrole", "presage-scaler"),
        ("networkpolicy", "presage-scaler"),
        ("poddisruptionbudget", "presage-scaler"),
        ("servicemonitor", "presage-scaler"),
        ("certificate", "presage-scaler"),
        ("cronjob", "presage-scaler-advise"),
        ("clusterrole", "presage-scaler-advise"),
    ]:
        assert get(plane, kind, name) is None, f"{kind}/{name} survived helm uninstall"
    # Kept: the CRDs (deleting them would delete every PredictiveScaler) and, with them, the backend.
    for crd in PRESAGE_CRDS:
        assert get(plane, "crd", crd) is not None, crd
    assert get(plane, "forecastbackend", "default") is not None


def test_helm_takes_over_a_kustomize_install(chart_cluster: tuple[KubeControlPlane, Helm]) -> None:
    """kubectl apply -f crds/ and -k manifests/, then helm install: the release adopts every object the
    kustomize install created (they carry the ownership Helm checks) and leaves kubectl's CRDs to it."""
    plane, helm = chart_cluster
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in PRESAGE_CRDS:
        plane.wait_established(f"crd/{crd}")
    plane.kubectl("apply", "-k", str(REPO / "manifests"))
    assert owner(get(plane, "forecastbackend", "default")) == RELEASE_OWNED

    notes = install(helm)
    for kind, name in [
        ("deployment", "presage-scaler"),
        ("serviceaccount", "presage-scaler"),
        ("clusterrole", "presage-scaler"),
        ("poddisruptionbudget", "presage-scaler"),
    ]:
        assert helm("get", "manifest", "presage", f"--namespace={NAMESPACE}").stdout.count(f"name: {name}"), name
        assert owner(get(plane, kind, name)) == RELEASE_OWNED, kind
    for crd in PRESAGE_CRDS:
        assert f"The CRD {crd} was installed by something other than this release" in notes
    # kubectl still co-owns the fields it applied: the first upgrade that changes one takes them over.
    upgrade = ("upgrade", "presage", str(CHART), f"--namespace={NAMESPACE}", *IMAGE_FLAGS)
    conflict = helm(*upgrade, "--set=scaler.replicas=3", check=False)
    assert conflict.returncode != 0 and 'conflict with "kubectl-client-side-apply"' in conflict.stderr
    helm(*upgrade, "--set=scaler.replicas=3", "--force-conflicts")
    assert get(plane, "deployment", "presage-scaler")["spec"]["replicas"] == 3
    helm(*upgrade, "--set=scaler.replicas=4")
    assert get(plane, "deployment", "presage-scaler")["spec"]["replicas"] == 4
    helm("uninstall", "presage", f"--namespace={NAMESPACE}", "--wait")
    assert get(plane, "deployment", "presage-scaler") is None
    assert all(get(plane, "crd", crd) is not None for crd in PRESAGE_CRDS)  # kubectl's, not the release's


def test_a_default_backend_of_your_own_is_left_alone(chart_cluster: tuple[KubeControlPlane, Helm]) -> None:
    plane, helm = chart_cluster
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    for crd in PRESAGE_CRDS:
        plane.wait_established(f"crd/{crd}")
    mine = {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "ForecastBackend",
        "metadata": {"name": "default"},
        "spec": {"type": "SeasonalNaive", "seasonalNaive": {"season": "24h", "cycles": 7}},
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(mine))
    notes = install(helm)
    assert "A ForecastBackend named default exists already and is not this release's" in notes
    assert get(plane, "forecastbackend", "default")["spec"]["seasonalNaive"] == {"season": "24h", "cycles": 7}


def test_crd_switches(chart_cluster: tuple[KubeControlPlane, Helm]) -> None:
    """crds.install false: the release holds no CRD (they were applied apart, as that value asks);
    crds.keep false: helm uninstall deletes the CRDs it installed."""
    plane, helm = chart_cluster
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
    install(helm, "--set=crds.install=false")
    assert "CustomResourceDefinition" not in helm("get", "manifest", "presage", f"--namespace={NAMESPACE}").stdout
    assert owner(get(plane, "forecastbackend", "default")) == RELEASE_OWNED
    helm("uninstall", "presage", f"--namespace={NAMESPACE}", "--wait")
    assert all(get(plane, "crd", crd) is not None for crd in PRESAGE_CRDS)

    plane.kubectl("delete", "-f", str(REPO / "crds"), "--wait")
    install(helm, "--set=crds.keep=false")
    assert all(owner(get(plane, "crd", crd)) == RELEASE_OWNED for crd in PRESAGE_CRDS)
    helm("uninstall", "presage", f"--namespace={NAMESPACE}", "--wait")
    plane.kubectl("wait", "--for=delete", *(f"crd/{crd}" for crd in PRESAGE_CRDS), "--timeout=60s")

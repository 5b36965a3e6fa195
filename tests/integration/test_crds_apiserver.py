"""The generated CRDs on a real kube-apiserver: they install, default, validate and print."""

from __future__ import annotations

import copy
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from tests.harness.presage_cluster import scaler_table

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

SCALER = {
    "apiVersion": "scaling.presage.sh/v1alpha1",
    "kind": "PredictiveScaler",
    "metadata": {"name": "web"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "policy": {"maxReplicas": 10},
        "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "sum(rate(requests_total[1m]))"}},
        "capacity": {"perReplica": 50},
    },
}
NAMED = {"name": "rps", "prometheus": {"address": "http://p:9090", "query": "q"}, "capacity": {"perReplica": 5}}
PROMETHEUS = SCALER["spec"]["signal"]["prometheus"]
TENANT = {"name": "X-Scope-OrgID", "value": "team-a"}
LIVE = {
    "currentReplicaHours": "52.0",
    "currentUnderProvisioned": "0.0",
    "patchDigest": "0123456789abcdef",
    "replicaHours": "50.0",
    "replicas": 4,
    "samples": 120,
    "saving": "3.8%",
    "since": "2026-12-01T09:00:00Z",
    "underProvisioned": "0.0",
    "verdict": "Proving",
}


@pytest.fixture(scope="module")
def crds_installed(kube_control_plane):
    kube_control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    for crd in ("predictivescalers.scaling.presage.sh", "forecastbackends.scaling.presage.sh"):
        kube_control_plane.wait_established(f"crd/{crd}")
    return kube_control_plane


def mutate(path: str, value) -> dict:
    scaler = copy.deepcopy(SCALER)
    *parents, leaf = path.split(".")
    node = scaler["spec"]
    for key in parents:
        node = node.setdefault(key, {})
    if value is DELETE:
        node.pop(leaf)
    else:
        node[leaf] = value
    return scaler


DELETE = object()


def apply(plane, namespace: str, obj: dict, check: bool = True):
    return plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj), check=check)


def test_defaults_appear_on_create(crds_installed, kube_namespace):
    apply(crds_installed, kube_namespace, SCALER)
    stored = json.loads(
        crds_installed.kubectl("get", "predictivescaler", "web", "-n", kube_namespace, "-o", "json").stdout
    )
    spec = stored["spec"]
    assert spec["mode"] == "Shadow" and spec["interval"] == "1m"
    assert spec["leadTime"] == {"source": "Static", "static": "2m", "min": "30s", "max": "15m"}
    assert spec["policy"]["targetQuantile"] == "0.9" and spec["policy"]["headroom"] == "10%"
    assert spec["policy"]["stabilization"]["scaleDownWindow"] == "15m"
    assert spec["signal"]["history"] == "336h"
    # What the API server stores parses into the same typed spec presage computes defaults for.
    assert parse(PredictiveScalerSpec, spec) == parse(PredictiveScalerSpec, SCALER["spec"])


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("signals", [NAMED], "exactly one of signal or signals must be set"),
        ("signal", DELETE, "exactly one of signal or signals must be set"),
        ("policy.targetQuantile", "1.5", "spec.policy.targetQuantile"),
        ("policy.minReplicas", 20, "spec.policy.minReplicas"),
        ("policy.scaleDownQuantile", "0.95", "scaleDownQuantile must be less than or equal to targetQuantile"),
        ("interval", "5 minutes", "spec.interval"),
        ("leadTime", {"min": "20m"}, "spec.leadTime.min"),
        ("policy.headroom", "-5%", "spec.policy.headroom"),
        ("scaleTargetRef.agones", {}, "spec.scaleTargetRef.agones"),
        ("capacity", {"perReplica": 0}, "spec.capacity.perReplica"),
        (
            "signal.prometheus",
            {**PROMETHEUS, "bearerTokenSecretRef": {"name": "t", "key": "k"}, "basicAuthSecretRef": {"name": "b"}},
            "set at most one of bearerTokenSecretRef and basicAuthSecretRef",
        ),
        (
            "signal.prometheus",
            {**PROMETHEUS, "headers": [TENANT, {"name": "x-scope-orgid", "value": "b"}]},
            "header names must be unique (in any case)",
        ),
        (
            "signal.prometheus",
            {**PROMETHEUS, "basicAuthSecretRef": {"name": "b"}, "headers": [{"name": "AUTHORIZATION", "value": "x"}]},
            "headers may not set Authorization when bearerTokenSecretRef or basicAuthSecretRef sets it",
        ),
        ("signal.prometheus", {**PROMETHEUS, "headers": [{"name": "Content-Type", "value": "x"}]}, "presage sets"),
        ("signal.prometheus", {**PROMETHEUS, "headers": [{"name": "X-A"}]}, "exactly one of value or valueFrom"),
        ("signal.prometheus", {**PROMETHEUS, "headers": [{"name": "X-A", "value": "a\nb"}]}, "headers[0].value"),
        ("signal.prometheus", {**PROMETHEUS, "headers": [{"name": "X A", "value": "a"}]}, "headers[0].name"),
        (
            "signal.prometheus",
            {**PROMETHEUS, "tlsSecretRef": {"name": "t", "keyKey": "tls.key"}},
            "certKey and keyKey go together",
        ),
        ("signal.prometheus", {**PROMETHEUS, "tlsSecretRef": {"name": "t"}}, "tlsSecretRef needs caKey"),
    ],
)
def test_invalid_scalers_are_refused_naming_the_field(crds_installed, kube_namespace, path, value, expected):
    result = apply(crds_installed, kube_namespace, mutate(path, value), check=False)
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr


def test_every_connection_field_is_stored_in_every_query_and_parses_as_presage_reads_it(crds_installed, kube_namespace):
    """The rules' cost fits the API server's budget with every query holding the most headers (33 queries
    of 16 headers each), and what it stores is what presage parses."""
    connection = {
        "address": "https://mimir:8080/prometheus",
        "query": "q",
        "basicAuthSecretRef": {"name": "prom-basic"},
        "tlsSecretRef": {"name": "prom-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"},
        "insecureSkipVerify": False,
        "headers": [TENANT, {"name": "X-Key", "valueFrom": {"secretKeyRef": {"name": "k", "key": "v"}}}]
        + [{"name": f"X-Extra-{i}", "value": "v" * 256} for i in range(14)],
    }
    scaler = mutate("signal", DELETE)
    scaler["spec"].pop("capacity")
    scaler["spec"]["signals"] = [
        {"name": f"s{i}", "prometheus": connection, "capacity": {"perReplica": 5, "query": connection}}
        for i in range(16)
    ]
    scaler["spec"]["leadTime"] = {"source": "Observed", "observed": connection}
    apply(crds_installed, kube_namespace, scaler)
    stored = json.loads(
        crds_installed.kubectl("get", "predictivescaler", "web", "-n", kube_namespace, "-o", "json").stdout
    )
    assert stored["spec"]["signals"][15]["prometheus"]["basicAuthSecretRef"] == {
        "name": "prom-basic",
        "usernameKey": "username",
        "passwordKey": "password",
    }
    assert parse(PredictiveScalerSpec, stored["spec"]) == parse(PredictiveScalerSpec, scaler["spec"])


def test_duplicate_signal_names_are_refused(crds_installed, kube_namespace):
    scaler = mutate("signal", DELETE)
    scaler["spec"].pop("capacity")
    scaler["spec"]["signals"] = [NAMED, NAMED]
    result = apply(crds_installed, kube_namespace, scaler, check=False)
    assert result.returncode != 0 and "signal names must be unique" in result.stderr, result.stderr


def test_backend_rules_and_printer_columns(crds_installed, kube_namespace):
    bad = {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "ForecastBackend",
        "metadata": {"name": "tfm"},
        "spec": {"type": "TimesFM"},
    }
    result = crds_installed.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode != 0 and "timesFM is required when type is TimesFM" in result.stderr
    good = {**bad, "metadata": {"name": "default-test"}, "spec": {}}
    crds_installed.kubectl("apply", "-f", "-", input=json.dumps(good))
    table = crds_installed.kubectl("get", "forecastbackends", "default-test").stdout
    assert table.split("\n")[0].split() == ["NAME", "TYPE", "MODEL", "READY", "REASON", "AGE"]
    assert "SeasonalNaive" in table


def condition(type_: str, status: str, reason: str) -> dict:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-12-01T09:00:00Z",
    }


def set_status(plane, kind: str, name: str, status: dict, namespace: str | None = None) -> None:
    """Write ``status`` through the status subresource, as presage does."""
    where = ["-n", namespace] if namespace else []
    body = json.dumps({"status": status})
    plane.kubectl("patch", kind, name, *where, "--subresource=status", "--type=merge", "-p", body)


def table(plane, *args: str) -> list[dict[str, str]]:
    """``kubectl get`` rows as column -> cell ("" where kubectl prints nothing), read by the header's
    column positions."""
    output = plane.kubectl("get", *args).stdout
    print(output)  # for whoever reads the test's log
    header, *rows = output.rstrip("\n").split("\n")
    starts = [match.start() for match in re.finditer(r"\S+", header)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{header[a:b].strip(): row[a:b].strip() for a, b in bounds} for row in rows]


def test_get_says_whether_a_scaler_works_and_why_not(crds_installed, kube_namespace):
    """The default columns of `kubectl get ps` show readiness and, beside it, why the last evaluation
    failed; -o wide adds what is served and where a healthy count came from."""
    plane = crds_installed
    for name in ("checkout", "cart", "search"):
        apply(plane, kube_namespace, {**SCALER, "metadata": {"name": name}})
    forecast = {"backend": "default", "generatedAt": "2026-12-01T09:00:00Z", "leadTimeSeconds": 120, "point": "274.3"}
    healthy = {
        "currentReplicas": 6,
        "recommendedReplicas": 7,
        "lastForecast": forecast,
        "breakdown": {"predictive": 6, "reactive": 7, "bindingSignal": "demand", "constraint": "ReactiveFloor"},
    }
    set_status(
        plane,
        "ps",
        "checkout",
        {
            **healthy,
            "conditions": [
                condition("Ready", "True", "Recommended"),
                condition("Degraded", "False", "EvaluationSucceeded"),
                condition("SpecAdjusted", "False", "AsSpecified"),
            ],
        },
        kube_namespace,
    )
    held = [
        condition("Ready", "True", "LastRecommendationHeld"),
        condition("Degraded", "True", "PrometheusUnreachable"),
        condition("SpecAdjusted", "True", "CapacityDefaulted"),
    ]
    set_status(plane, "ps", "cart", {**healthy, "conditions": held}, kube_namespace)
    # Never evaluated successfully: no count, and the failure is the reason.
    failed = [condition("Ready", "False", "NoRecommendation"), condition("Degraded", "True", "PrometheusUnreachable")]
    set_status(plane, "ps", "search", {"currentReplicas": 3, "conditions": failed}, kube_namespace)

    rows = {row["NAME"]: row for row in table(plane, "ps", "-n", kube_namespace)}
    assert list(rows["checkout"]) == [
        "NAME",
        "MODE",
        "TARGET",
        "CURRENT",
        "FORECAST",
        "RECOMMENDED",
        "READY",
        "REASON",
        "SPEC",
        "AGE",
    ]
    assert (rows["checkout"]["READY"], rows["checkout"]["REASON"]) == ("True", "EvaluationSucceeded")
    # What the last evaluation sized with other than the spec says, beside whether it worked.
    assert (rows["checkout"]["SPEC"], rows["cart"]["SPEC"], rows["search"]["SPEC"]) == (
        "AsSpecified",
        "CapacityDefaulted",
        "",
    )
    assert (rows["cart"]["READY"], rows["cart"]["REASON"]) == ("True", "PrometheusUnreachable")
    assert (rows["search"]["READY"], rows["search"]["REASON"]) == ("False", "PrometheusUnreachable")
    assert (rows["search"]["FORECAST"], rows["search"]["RECOMMENDED"]) == ("", "")
    wide = {
        row["NAME"]: row for row in table(plane, "ps", "-n", kube_namespace, "-o", "wide") if row["NAME"] != "search"
    }
    assert wide["checkout"] | {"AGE": ""} == {
        "NAME": "checkout",
        "MODE": "Shadow",
        "TARGET": "web",
        "CURRENT": "6",
        "FORECAST": "274.3",
        "RECOMMENDED": "7",
        "BINDING": "demand",
        "CONSTRAINT": "ReactiveFloor",
        "READY": "True",
        "SERVING": "Recommended",
        "SAVING": "",
        "LIVE": "",
        "REASON": "EvaluationSucceeded",
        "SPEC": "AsSpecified",
        "AGE": "",
    }
    assert wide["cart"]["SERVING"] == "LastRecommendationHeld"


def test_the_table_says_what_the_advice_saves_with_its_unit(crds_installed, kube_namespace):
    """SAVING is status.adviceSaving, a cell with its unit (or Applied), not advice.saving's bare figure;
    SPEC is the SpecAdjusted reason."""
    plane = crds_installed
    for name in ("advised", "applied", "never", "proving"):
        apply(plane, kube_namespace, {**SCALER, "metadata": {"name": name}})
    advice = {"verdict": "Advised", "saving": "5.1072", "serviceLevel": "1%"}
    adjusted = condition("SpecAdjusted", "True", "AbsoluteHeadroom")
    set_status(
        plane, "ps", "advised", {"advice": advice, "adviceSaving": "5.1%", "conditions": [adjusted]}, kube_namespace
    )
    set_status(plane, "ps", "applied", {"advice": advice, "adviceSaving": "Applied"}, kube_namespace)
    proving = {**advice, "live": LIVE}
    set_status(plane, "ps", "proving", {"advice": proving, "adviceSaving": "5.1%"}, kube_namespace)
    rows = scaler_table(plane, kube_namespace)
    assert (rows["advised"]["Saving"], rows["applied"]["Saving"], rows["never"]["Saving"]) == ("5.1%", "Applied", None)
    # LIVE is the advised spec's saving on the demand that came since the advice, beside the backtest's.
    assert (rows["proving"]["Live"], rows["advised"]["Live"]) == ("3.8%", None)
    assert (rows["advised"]["Spec"], rows["never"]["Spec"]) == ("AbsoluteHeadroom", None)


def test_get_says_why_a_backend_is_not_ready(crds_installed):
    backend = {
        **BACKEND,
        "metadata": {"name": "tfm-down"},
        "spec": {"type": "TimesFM", "timesFM": {"endpoint": "http://f:8080"}},
    }
    crds_installed.kubectl("apply", "-f", "-", input=json.dumps(backend))
    conditions = [
        condition("Ready", "False", "BackendUnreachable"),
        condition("Degraded", "True", "BackendUnreachable"),
    ]
    set_status(crds_installed, "fb", "tfm-down", {"conditions": conditions, "lastProbeTime": "2026-12-01T09:00:00Z"})
    [row] = [r for r in table(crds_installed, "fb", "-o", "wide") if r["NAME"] == "tfm-down"]
    assert (row["TYPE"], row["READY"], row["REASON"]) == ("TimesFM", "False", "BackendUnreachable")
    assert "PROBED" in row


def object_paths(schema: dict, path: str) -> list[str]:
    """The explain path of every object in a CRD schema (list items are explained through their field)."""
    node = schema.get("items", schema)
    paths = [path] if "properties" in node else []
    for name, child in node.get("properties", {}).items():
        if name != "metadata":
            paths += object_paths(child, f"{path}.{name}")
    return paths


@pytest.mark.parametrize("plural", ["predictivescalers", "forecastbackends"])
def test_explain_describes_every_field_and_its_default(crds_installed, plural):
    """kubectl explain on every object of both kinds: no field without a description, and each default
    stated (explain itself shows none)."""
    [document] = [yaml.safe_load(p.read_text()) for p in (REPO / "crds").glob(f"*_{plural}.yaml")]
    root = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    kind = document["spec"]["names"]["singular"]
    paths = object_paths(root, kind)
    assert len(paths) > 5
    undescribed = []
    for path in paths:
        out = crds_installed.kubectl("explain", path).stdout
        if "<no description>" in out or "<empty>" in out:
            undescribed.append(path)
    assert not undescribed, undescribed
    recursive = crds_installed.kubectl("explain", kind, "--recursive").stdout
    assert "<no description>" not in recursive and "<empty>" not in recursive
    if plural == "predictivescalers":
        policy = crds_installed.kubectl("explain", "predictivescaler.spec.policy").stdout
        assert "Default: 10%." in " ".join(policy.split())  # headroom
        assert "MaxReplicas is the most replicas presage recommends" in " ".join(policy.split())


BACKEND = {"apiVersion": "scaling.presage.sh/v1alpha1", "kind": "ForecastBackend", "metadata": {"name": "weekly"}}


def test_a_season_in_days_is_a_duration_on_both_sides(crds_installed):
    """``season: 7d``, as the CLI's --season takes it, is stored as written and parsed to a week."""
    backend = {**BACKEND, "spec": {"type": "SeasonalNaive", "seasonalNaive": {"season": "7d", "cycles": 2}}}
    crds_installed.kubectl("apply", "-f", "-", input=json.dumps(backend))
    stored = json.loads(crds_installed.kubectl("get", "forecastbackend", "weekly", "-o", "json").stdout)
    assert stored["spec"]["seasonalNaive"]["season"] == "7d"
    assert parse(ForecastBackendSpec, stored["spec"]).seasonal_naive_or_default.season == timedelta(days=7)


@pytest.mark.parametrize(
    ("path", "value", "accepted"),
    [
        ("signal.history", "14d", True),
        ("signal.history", "1d12h", True),
        ("signal.history", "0d30s", False),  # history below the 1m resolution: the CEL compares days too
        ("signal.history", "1.5d", False),
        ("signal.history", "12h1d", False),
        ("signal.history", "10000d", False),
        ("interval", "0d", False),  # below the 1s floor
        ("leadTime", {"min": "1d", "max": "12h"}, False),
        ("leadTime", {"min": "1m", "max": "1d"}, True),
        ("forecast", {"horizon": "1d"}, True),
        ("forecast", {"horizon": "0d1m"}, False),  # shorter than the 2m static lead time
    ],
)
def test_durations_in_days_get_the_same_verdict_from_both(crds_installed, kube_namespace, path, value, accepted):
    scaler = mutate(path, value)
    result = apply(crds_installed, kube_namespace, scaler, check=False)
    assert (result.returncode == 0) == accepted, result.stderr
    try:
        parse(PredictiveScalerSpec, scaler["spec"])
    except SpecError:
        assert not accepted
    else:
        assert accepted


def test_crd_files_name_both_kinds():
    """The CRDs are valid YAML documents with the expected names."""
    names = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in (REPO / "crds").glob("*.yaml")}
    assert names == {"predictivescalers.scaling.presage.sh", "forecastbackends.scaling.presage.sh"}

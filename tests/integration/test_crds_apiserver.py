"""The generated CRDs on a real kube-apiserver: they install, default, validate and print."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec

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


@pytest.fixture(scope="module")
def crds_installed(kube_control_plane):
    kube_control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    for crd in ("predictivescalers.scaling.presage.sh", "forecastbackends.scaling.presage.sh"):
        kube_control_plane.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
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
    ],
)
def test_invalid_scalers_are_refused_naming_the_field(crds_installed, kube_namespace, path, value, expected):
    result = apply(crds_installed, kube_namespace, mutate(path, value), check=False)
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr


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
    assert table.split("\n")[0].split() == ["NAME", "TYPE", "MODEL", "READY", "AGE"]
    assert "SeasonalNaive" in table
    apply(crds_installed, kube_namespace, SCALER)
    header = crds_installed.kubectl("get", "ps", "-n", kube_namespace).stdout.split("\n")[0].split()
    assert header == ["NAME", "MODE", "TARGET", "CURRENT", "FORECAST", "RECOMMENDED", "BINDING", "CONSTRAINT", "AGE"]


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

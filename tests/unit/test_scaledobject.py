"""Rendering the KEDA ScaledObject for a PredictiveScaler (presage_scaler/scaledobject/render.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from presage_scaler.api.serving_contract import SCALER_KEY
from presage_scaler.clients.kube.scaler_lookup import CommandError
from presage_scaler.scaledobject.render import (
    DEFAULT_SCALER_ADDRESS,
    ClusterSupport,
    ScaledObjectError,
    ScaledObjectOptions,
    crd_has_tolerance,
    hpa_behavior,
    kubernetes_version,
    polling_interval_seconds,
    render,
    to_yaml,
    tolerance,
)
from presage_scaler.scaledobject.sources import from_file


def scaler(
    *,
    name: str = "web",
    namespace: str = "shop",
    mode: str = "Enforce",
    target: dict[str, str] | None = None,
    policy: dict[str, Any] | None = None,
    interval: str | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "mode": mode,
        "scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "sum(rate(x[5m]))"}},
        "capacity": {"perReplica": 10},
        "policy": policy or {"minReplicas": 2, "maxReplicas": 60},
    }
    if interval is not None:
        spec["interval"] = interval
    obj: dict[str, Any] = {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


TAKES_TOLERANCE = ClusterSupport((1, 35), keda_tolerance=True)
"""A cluster whose Kubernetes enables HPAConfigurableTolerance by default, with a KEDA that has the field."""


def scaled_object(obj: dict[str, Any], **options: Any) -> dict[str, Any]:
    return render(obj, ScaledObjectOptions(**options)).documents[0]


def test_defaults_for_a_deployment() -> None:
    so = scaled_object(scaler(status={"recommendedReplicas": 7, "currentReplicas": 5}))
    assert so["apiVersion"] == "keda.sh/v1alpha1" and so["kind"] == "ScaledObject"
    assert so["metadata"] == {"name": "web", "namespace": "shop"}
    spec = so["spec"]
    # apps/v1 Deployment is KEDA's default: only the name is written.
    assert spec["scaleTargetRef"] == {"name": "web"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 60)
    assert spec["pollingInterval"] == 30  # half of the default 1m interval
    assert spec["triggers"] == [
        {
            "type": "external",
            "metricType": "AverageValue",
            "metadata": {"scalerAddress": DEFAULT_SCALER_ADDRESS, SCALER_KEY: "web"},
        }
    ]
    assert "authenticationRef" not in spec["triggers"][0]


def test_other_targets_spell_out_api_version_and_kind() -> None:
    target = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}
    assert scaled_object(scaler(target=target))["spec"]["scaleTargetRef"] == {
        "name": "db",
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
    }
    rollout = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web"}
    assert scaled_object(scaler(target=rollout))["spec"]["scaleTargetRef"]["apiVersion"] == "argoproj.io/v1alpha1"


def test_scaled_object_name_and_scaler_address_options() -> None:
    so = scaled_object(scaler(), name="web-keda", scaler_address="presage.example:443")
    assert so["metadata"]["name"] == "web-keda"
    # The trigger still names the PredictiveScaler, not the ScaledObject.
    assert so["spec"]["triggers"][0]["metadata"] == {"scalerAddress": "presage.example:443", SCALER_KEY: "web"}


@pytest.mark.parametrize("address", ["presage", "presage:", ":9090", "presage:http", "presage:70000"])
def test_scaler_address_must_be_host_port(address: str) -> None:
    with pytest.raises(ScaledObjectError, match="host:port"):
        render(scaler(), ScaledObjectOptions(scaler_address=address))


@pytest.mark.parametrize(
    ("interval", "seconds"),
    [
        (timedelta(seconds=4), 5),
        (timedelta(seconds=15), 7),
        (timedelta(seconds=30), 15),
        (timedelta(minutes=1), 30),
        (timedelta(minutes=10), 30),
    ],
)
def test_polling_interval_is_half_the_interval_within_bounds(interval: timedelta, seconds: int) -> None:
    assert polling_interval_seconds(interval) == seconds


def test_polling_interval_follows_the_scaler_and_the_flag() -> None:
    assert scaled_object(scaler(interval="20s"))["spec"]["pollingInterval"] == 10
    assert scaled_object(scaler(interval="20s"), polling_interval=45)["spec"]["pollingInterval"] == 45
    with pytest.raises(ScaledObjectError, match="polling interval"):
        render(scaler(), ScaledObjectOptions(polling_interval=0))


def test_hpa_behavior_turns_the_hpas_own_damping_off() -> None:
    rendered = render(scaler(), support=TAKES_TOLERANCE)
    behavior = rendered.documents[0]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior == hpa_behavior(60, tolerance=True)
    down, up = behavior["scaleDown"], behavior["scaleUp"]
    assert down["stabilizationWindowSeconds"] == 0 and up["stabilizationWindowSeconds"] == 0
    # One period may go all the way down (100 %) or all the way up to maxReplicas.
    assert down["policies"] == [{"type": "Percent", "value": 100, "periodSeconds": 15}]
    assert up["policies"] == [{"type": "Pods", "value": 60, "periodSeconds": 15}]
    assert down["tolerance"] == 0 and up["tolerance"] == 0


def test_no_hpa_tolerance_omits_the_field() -> None:
    rendered = render(scaler(), ScaledObjectOptions(hpa_tolerance=False))
    behavior = rendered.documents[0]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert "tolerance" not in behavior["scaleUp"] and "tolerance" not in behavior["scaleDown"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 0
    assert any("10%" in note and "--no-hpa-tolerance" in note for note in rendered.notes)


@pytest.mark.parametrize(
    ("support", "included", "says"),
    [
        (TAKES_TOLERANCE, True, "Set because this cluster takes it: Kubernetes 1.35"),
        (ClusterSupport((1, 37), keda_tolerance=True), True, "Kubernetes 1.37 enables HPAConfigurableTolerance"),
        (ClusterSupport((1, 34), keda_tolerance=True), False, "Kubernetes 1.34 does not enable"),
        (ClusterSupport((1, 29), keda_tolerance=True), False, "Kubernetes 1.29 does not enable"),
        (ClusterSupport((1, 35), keda_tolerance=False), False, "CRD has no tolerance field (KEDA before 2.18)"),
        (ClusterSupport((1, 35), keda_tolerance=None), False, "CRD could not be read"),
        (ClusterSupport(), False, "the cluster's Kubernetes and KEDA versions are not known"),
    ],
)
def test_the_tolerance_is_set_only_where_the_cluster_takes_it(
    support: ClusterSupport, included: bool, says: str
) -> None:
    rendered = render(scaler(status={"recommendedReplicas": 4, "currentReplicas": 4}), support=support)
    behavior = rendered.documents[0]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert ("tolerance" in behavior["scaleUp"]) is ("tolerance" in behavior["scaleDown"]) is included
    [note] = [n for n in rendered.notes if "tolerance" in n.split(":")[0]]
    assert says in note
    if included:
        assert rendered.warnings == []
    else:
        # Left out, which every cluster takes; the person running the command is told how to opt in.
        [warning] = rendered.warnings
        assert says in warning and "pass --hpa-tolerance" in warning and "10 -> 11" in warning
        assert "which every Kubernetes and KEDA take" in note


@pytest.mark.parametrize(
    ("support", "warns"),
    [
        (TAKES_TOLERANCE, None),
        (ClusterSupport(), None),  # nothing says otherwise
        (ClusterSupport((1, 30), keda_tolerance=True), "Kubernetes 1.30 has no configurable HPA tolerance"),
        (ClusterSupport((1, 33), keda_tolerance=True), "only with the HPAConfigurableTolerance feature gate"),
        (ClusterSupport((1, 36), keda_tolerance=False), "kubectl apply refuses the ScaledObject"),
    ],
)
def test_an_explicit_choice_is_kept_and_a_cluster_that_would_not_take_it_is_named(
    support: ClusterSupport, warns: str | None
) -> None:
    asked = tolerance(True, support)
    assert asked.included and "tolerance 0 (--hpa-tolerance)" in asked.note
    assert (asked.warning is None) if warns is None else (asked.warning is not None and warns in asked.warning)
    declined = tolerance(False, support)
    assert not declined.included and declined.warning is None and "--no-hpa-tolerance" in declined.note


@pytest.mark.parametrize(
    ("body", "version"),
    [
        ({"major": "1", "minor": "35", "gitVersion": "v1.35.0"}, (1, 35)),
        ({"major": "1", "minor": "33+", "gitVersion": "v1.33.5-gke.1"}, (1, 33)),
        ({"major": "1"}, None),
        ({"major": "one", "minor": "35"}, None),
        ({}, None),
    ],
)
def test_kubernetes_version_from_the_version_endpoint(body: dict[str, Any], version: tuple[int, int] | None) -> None:
    assert kubernetes_version(body) == version


def scaled_object_crd(scale_up: dict[str, Any], served: bool = True) -> dict[str, Any]:
    behavior = {"properties": {"scaleUp": {"properties": scale_up}}}
    advanced = {"properties": {"horizontalPodAutoscalerConfig": {"properties": {"behavior": behavior}}}}
    schema = {"properties": {"spec": {"properties": {"advanced": advanced}}}}
    return {"spec": {"versions": [{"name": "v1alpha1", "served": served, "schema": {"openAPIV3Schema": schema}}]}}


@pytest.mark.parametrize(
    ("crd", "has"),
    [
        (scaled_object_crd({"tolerance": {"x-kubernetes-int-or-string": True}, "policies": {}}), True),
        (scaled_object_crd({"policies": {}}), False),
        (scaled_object_crd({"tolerance": {}}, served=False), False),
        ({"spec": {"versions": "v1alpha1"}}, False),
        ({"spec": {"versions": [None, 3]}}, False),
        ({}, False),
    ],
)
def test_crd_has_tolerance(crd: dict[str, Any], has: bool) -> None:
    assert crd_has_tolerance(crd) is has


def test_what_the_scaler_is_sized_with_other_than_its_spec_says_is_a_warning() -> None:
    """The same notices as the scaler's SpecAdjusted condition, before anything is applied."""
    obj = scaler(policy={"minReplicas": 2, "maxReplicas": 60, "headroom": 10})
    del obj["spec"]["capacity"]
    obj["spec"]["leadTime"] = {"static": "2h"}
    for from_cluster in (True, False):
        rendered = render(obj, ScaledObjectOptions(hpa_tolerance=False), from_cluster=from_cluster)
        notices = [w for w in rendered.warnings if "SpecAdjusted" in w]
        assert [w.split(":")[1].strip() for w in notices] == [
            "SpecAdjusted CapacityDefaulted",
            "SpecAdjusted AbsoluteHeadroom",
            "SpecAdjusted LeadTimeClamped",
        ]
        assert all(w.startswith("PredictiveScaler shop/web: SpecAdjusted") for w in notices)
        assert "one replica per signal unit" in notices[0] and 'write "10%"' in notices[1]
        assert "leadTime.static 2h is above" in notices[2] and "15m" in notices[2]
        assert rendered.documents == render(scaler(), ScaledObjectOptions(hpa_tolerance=False)).documents


def test_a_lead_time_no_evaluation_survives_is_a_warning_too() -> None:
    obj = scaler(interval="1s")
    obj["spec"]["signal"]["resolution"] = "1s"
    obj["spec"]["signal"]["history"] = "1h"
    obj["spec"]["leadTime"] = {"static": "10h", "max": "10h"}
    [warning] = [w for w in render(obj, support=TAKES_TOLERANCE).warnings if "no evaluation" in w]
    assert "no evaluation can succeed (HorizonTooShort): lead time 10h needs 36000 steps" in warning


@pytest.mark.parametrize(("min_replicas", "floor"), [(2, 2), (0, 1), (1, 1)])
def test_fallback_holds_the_current_count_by_default(min_replicas: int, floor: int) -> None:
    # A recommendation in status does not change the default: the live current count is the floor.
    obj = scaler(policy={"minReplicas": min_replicas, "maxReplicas": 60}, status={"recommendedReplicas": 40})
    fallback = scaled_object(obj)["spec"]["fallback"]
    assert fallback == {"failureThreshold": 3, "replicas": floor, "behavior": "currentReplicasIfHigher"}


@pytest.mark.parametrize("mode", ["Enforce", "Shadow"])
def test_with_min_replicas_0_the_fallback_floor_raises_a_workload_at_0_and_says_so(mode: str) -> None:
    # KEDA skips a fallback of 0, so the floor is 1: a workload at 0 is raised to 1 while presage fails.
    obj = scaler(mode=mode, policy={"minReplicas": 0, "maxReplicas": 60}, status={"recommendedReplicas": 0})
    rendered = render(obj, ScaledObjectOptions())
    assert rendered.documents[0]["spec"]["fallback"]["replicas"] == 1
    [note] = [n for n in rendered.notes if n.startswith("fallback:")]
    assert "adds no scale-up" not in note and "a workload at 0 replicas is raised to 1" in note
    [warning] = [w for w in rendered.warnings if "fallback floor" in w]
    assert "fallback floor of 1" in warning and f"in {mode} mode" in warning and "minReplicas is 0" in warning
    # With minReplicas 1 the default floor adds nothing: the note says so, and nothing warns.
    kept = render(scaler(mode=mode, status={"recommendedReplicas": 2, "currentReplicas": 2}), support=TAKES_TOLERANCE)
    assert any("adds no scale-up either" in n for n in kept.notes) and kept.warnings == []


def test_the_fallback_note_separates_errors_from_unreachable() -> None:
    [note] = [n for n in render(scaler()).notes if n.startswith("fallback:")]
    assert "a stale recommendation, an unknown scaler" in note
    assert "When presage is unreachable KEDA does not reach its fallback" in note


def test_fallback_options() -> None:
    fallback = scaled_object(scaler(), fallback_replicas=12, fallback_failure_threshold=5)["spec"]["fallback"]
    assert fallback == {"failureThreshold": 5, "replicas": 12, "behavior": "currentReplicasIfHigher"}
    for bad in (0, 61):
        with pytest.raises(ScaledObjectError, match="between 1 and the scaler's maxReplicas"):
            render(scaler(), ScaledObjectOptions(fallback_replicas=bad))
    with pytest.raises(ScaledObjectError, match="failure threshold"):
        render(scaler(), ScaledObjectOptions(fallback_failure_threshold=-1))


def test_fallback_is_the_same_in_shadow_mode() -> None:
    # With the HPA clamping to minReplicaCount anyway, max(current, max(min, 1)) never moves a Shadow workload.
    assert scaled_object(scaler(mode="Shadow"))["spec"]["fallback"] == scaled_object(scaler())["spec"]["fallback"]


def test_tls_without_a_secret_only_enables_tls() -> None:
    rendered = render(scaler(), ScaledObjectOptions(tls=True))
    assert len(rendered.documents) == 1
    trigger = rendered.documents[0]["spec"]["triggers"][0]
    assert trigger["metadata"]["enableTLS"] == "true"
    assert "authenticationRef" not in trigger


def test_tls_secret_renders_a_trigger_authentication_for_the_ca() -> None:
    so, auth = render(scaler(), ScaledObjectOptions(tls_secret="presage-ca")).documents
    trigger = so["spec"]["triggers"][0]
    assert trigger["metadata"]["enableTLS"] == "true"  # implied by the secret
    assert trigger["authenticationRef"] == {"name": "web-presage-tls"}
    assert auth == {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": {"name": "web-presage-tls", "namespace": "shop"},
        "spec": {"secretTargetRef": [{"parameter": "caCert", "name": "presage-ca", "key": "ca.crt"}]},
    }


def test_mutual_tls_adds_the_client_certificate() -> None:
    _, auth = render(scaler(), ScaledObjectOptions(tls_secret="keda-client", tls_client_cert=True)).documents
    assert [(r["parameter"], r["key"]) for r in auth["spec"]["secretTargetRef"]] == [
        ("caCert", "ca.crt"),
        ("tlsClientCert", "tls.crt"),
        ("tlsClientKey", "tls.key"),
    ]
    with pytest.raises(ScaledObjectError, match="--tls-secret"):
        render(scaler(), ScaledObjectOptions(tls_client_cert=True))


def test_agones_fleet_is_refused_with_a_pointer_to_the_webhook() -> None:
    fleet = scaler(target={"apiVersion": "agones.dev/v1", "kind": "Fleet", "name": "arena"})
    with pytest.raises(ScaledObjectError, match=r"FleetAutoscaler.*docs/agones\.md"):
        render(fleet)


def test_invalid_spec_names_the_field() -> None:
    obj = scaler(policy={"minReplicas": 5, "maxReplicas": 2})
    with pytest.raises(ScaledObjectError, match=r"shop/web has an invalid spec: spec\.policy"):
        render(obj)


def test_warnings() -> None:
    def warnings(obj: dict[str, Any], options: ScaledObjectOptions | None = None) -> list[str]:
        return render(obj, options, support=TAKES_TOLERANCE).warnings

    assert warnings(scaler(status={"recommendedReplicas": 4, "currentReplicas": 4})) == []
    [no_rec] = warnings(scaler())
    assert "no recommendation yet" in no_rec and "NOT_FOUND" in no_rec
    # Shadow must not change the count, but the HPA clamps into [min, max]: say so.
    shadow = scaler(mode="Shadow", status={"recommendedReplicas": 4, "currentReplicas": 1})
    [clamp] = warnings(shadow)
    assert "Shadow" in clamp and "moves it to 2" in clamp
    [floor] = warnings(
        scaler(mode="Shadow", status={"recommendedReplicas": 4, "currentReplicas": 4}),
        ScaledObjectOptions(fallback_replicas=10),
    )
    assert "fallback floor of 10" in floor
    # Enforce: clamping is the point, no warning.
    assert warnings(scaler(status={"recommendedReplicas": 4, "currentReplicas": 1})) == []


def test_yaml_round_trips_with_the_reasons_as_comments() -> None:
    rendered = render(scaler(interval="20s"), ScaledObjectOptions(tls_secret="ca", tls_client_cert=True))
    text = to_yaml(rendered)
    assert list(yaml.safe_load_all(text)) == rendered.documents
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header and all(len(line) <= 100 for line in header)
    comments = " ".join(line.lstrip("# ") for line in header)
    for needle in ("pollingInterval 10s", "tolerance 0", "10 -> 11", "HPAConfigurableTolerance", "never a scale-down"):
        assert needle in comments
    # Trigger metadata values are strings in KEDA's schema: "true", not a YAML boolean.
    assert "enableTLS: 'true'" in text


def test_docs_example_is_what_the_command_prints() -> None:
    """docs/keda.md shows real output; regenerate it from here when the rendering changes."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "keda.md").read_text()
    example = docs.split("### Example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    documented = scaler(interval="30s", status={"recommendedReplicas": 7, "currentReplicas": 5})
    options = ScaledObjectOptions(tls_secret="presage-scaler-client-tls", tls_client_cert=True)
    assert example == to_yaml(render(documented, options, support=TAKES_TOLERANCE))


# --- from a file, without a cluster (GitOps) -------------------------------------------------------


def test_from_a_file_the_same_manifests_and_what_was_not_checked() -> None:
    live = scaler(mode="Shadow", status={"recommendedReplicas": 4, "currentReplicas": 1})
    offline = render(live, from_cluster=False)
    assert offline.documents == render(live).documents and offline.notes == render(live).notes
    # The status a file may carry is not the cluster's now: no warning reads it, one note says so. The
    # cluster's versions are not known either: the tolerance is left out, and said so.
    [left_out] = offline.warnings
    assert left_out.startswith("HPA tolerance left out (the cluster's Kubernetes and KEDA versions are not known)")
    assert offline.unchecked is not None
    assert "read from a file" in offline.unchecked and "evaluated it yet" in offline.unchecked
    assert "[2, 60]" in offline.unchecked
    enforce = render(scaler(), from_cluster=False).unchecked
    assert enforce is not None and "minReplicas" not in enforce
    assert render(live).unchecked is None
    # What the spec alone tells is still said.
    at_zero = scaler(policy={"minReplicas": 0, "maxReplicas": 5})
    [floor] = render(at_zero, ScaledObjectOptions(hpa_tolerance=False), from_cluster=False).warnings
    assert "fallback floor of 1" in floor


def write_manifests(tmp_path: Path, *objects: dict[str, Any]) -> str:
    path = tmp_path / "scalers.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return str(path)


def test_from_file_takes_name_and_namespace_from_the_metadata(tmp_path: Path) -> None:
    backend = {"apiVersion": "scaling.presage.sh/v1alpha1", "kind": "ForecastBackend", "metadata": {"name": "b"}}
    path = write_manifests(tmp_path, backend, scaler(name="web", namespace="shop"))
    found = from_file(path, None, None)
    assert found["metadata"] == {"name": "web", "namespace": "shop"}
    assert from_file(path, "web", "other")["metadata"]["namespace"] == "other"  # -n replaces it


@pytest.mark.parametrize(
    ("objects", "name", "namespace", "message"),
    [
        ([scaler(name="web")], "api", None, "holds no PredictiveScaler named 'api' (it holds 'web')"),
        ([], None, None, "holds no PredictiveScaler"),
        ([scaler(name="a"), scaler(name="b")], None, None, "holds 2 PredictiveScalers ('a', 'b'): name the one"),
        ([{**scaler(), "metadata": {"name": "web"}}], None, None, "has no metadata.namespace: pass -n NAMESPACE"),
        ([{**scaler(), "metadata": {"namespace": "shop"}}], None, None, "the PredictiveScaler has no metadata.name"),
        ([{**scaler(), "apiVersion": "scaling.presage.sh/v1"}], None, None, "apiVersion is 'scaling.presage.sh/v1'"),
    ],
)
def test_from_file_refusals(
    tmp_path: Path, objects: list[dict[str, Any]], name: str | None, namespace: str | None, message: str
) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        from_file(write_manifests(tmp_path, *objects), name, namespace)


def test_from_file_refuses_what_is_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: [PredictiveScaler\n")
    with pytest.raises(CommandError, match=r"broken\.yaml: not valid YAML"):
        from_file(str(path), None, None)
    with pytest.raises(CommandError, match=r"cannot read .*absent\.yaml"):
        from_file(str(tmp_path / "absent.yaml"), None, None)


def _offline(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI with no cluster to reach: a kubeconfig that does not exist and nothing in-cluster."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBERNETES_")}
    return subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "scaledobject", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "KUBECONFIG": "/nonexistent/kubeconfig", "HOME": "/nonexistent"},
    )


def test_the_cli_renders_a_file_and_stdin_without_a_cluster(tmp_path: Path) -> None:
    obj = scaler(mode="Shadow", interval="30s")
    path = write_manifests(tmp_path, obj)
    from_path = _offline("-f", path, "--tls")
    assert from_path.returncode == 0, from_path.stderr
    assert from_path.stdout == to_yaml(render(obj, ScaledObjectOptions(tls=True)))
    assert from_path.stderr.splitlines()[-1].startswith(
        "presage scaledobject: note: PredictiveScaler shop/web was read from a file"
    )
    assert "presage scaledobject: warning: HPA tolerance left out" in from_path.stderr
    assert "tolerance" not in from_path.stdout.split("apiVersion:", 1)[1]  # in the comments only
    from_stdin = _offline("-f", "-", "-n", "other", stdin=Path(path).read_text())
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert yaml.safe_load(from_stdin.stdout)["metadata"] == {"name": "web", "namespace": "other"}


def test_the_cli_without_a_name_or_a_file_says_which_to_give() -> None:
    result = _offline()
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr
        == "presage scaledobject: error: give the PredictiveScaler's name (read from the cluster) or -f FILE\n"
    )

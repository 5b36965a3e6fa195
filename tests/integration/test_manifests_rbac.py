"""manifests/ on the real API server, and the controller running with its ServiceAccount's own token.

If the ClusterRole lacked a verb the controller needs, these evaluations, status writes, events or
the Lease would fail with 403; if it granted more than it should, the forbidden calls below would
succeed.
"""

from __future__ import annotations

import base64
import json
import logging

import pytest
import yaml

from presage_scaler.controller.app import ControllerOptions, running
from tests.harness.presage_cluster import REPO, apply, condition, deployment, eventually, get, recent_samples
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration


def _example(name: str, namespace: str) -> dict:
    documents = list(yaml.safe_load_all((REPO / "manifests" / "examples" / name).read_text()))
    for doc in documents:
        doc["metadata"]["namespace"] = namespace
    return documents


def _example_scaler_of_two(cluster, namespace: str, prometheus_url: str, interval: str) -> dict:
    """The example Shadow scaler, reading ``app_demand`` from ``prometheus_url`` every ``interval``,
    applied with its Deployment "checkout" at 2 replicas."""
    [scaler] = [doc for doc in _example("shadow-scaler.yaml", namespace) if doc["kind"] == "PredictiveScaler"]
    scaler["spec"]["signal"] = {
        "prometheus": {"address": prometheus_url, "query": "app_demand"},
        "history": "3h",
        "resolution": "1m",
    }
    scaler["spec"]["interval"] = interval
    apply(cluster, deployment("checkout", 2), namespace)
    apply(cluster, scaler)
    return scaler


async def test_controller_runs_with_its_service_account(cluster, kube_namespace, prometheus_factory):
    cluster.kubectl("apply", "-k", str(REPO / "manifests"))
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    token = cluster.service_account_token("presage-system", "presage-scaler")
    kubeconfig = cluster.kubeconfig_for_token(token)

    scaler = _example_scaler_of_two(cluster, kube_namespace, prom.url, "5s")
    secret_data = {"token": base64.b64encode(b"t").decode()}
    apply(
        cluster,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prometheus-token"}, "data": secret_data},
        kube_namespace,
    )
    with_token = json.loads(json.dumps(scaler))
    with_token["metadata"]["name"] = "with-token"
    with_token["spec"]["signal"]["prometheus"]["bearerTokenSecretRef"] = {"name": "prometheus-token", "key": "token"}
    apply(cluster, with_token)

    options = ControllerOptions(
        kubeconfig=kubeconfig,
        grpc_port=0,
        http_port=0,
        health_port=0,
        lease_namespace="presage-system",
        probe_period=2,
    )
    async with running(options) as app:
        checkout = await eventually(
            lambda: get(cluster, "predictivescaler", "checkout", kube_namespace),
            lambda o: (o.get("status") or {}).get("recommendedReplicas") is not None,
            what="the example scaler's recommendation, written with the ServiceAccount token",
        )
        assert app.leading
        assert condition(checkout, "Ready")["status"] == "True"
        assert checkout["status"]["currentReplicas"] == 2  # read through deployments/scale

        # No Secret access until the namespace grants exactly that Secret.
        denied = await eventually(
            lambda: get(cluster, "predictivescaler", "with-token", kube_namespace),
            lambda o: (condition(o, "Degraded") or {}).get("reason") == "SecretForbidden",
            what="SecretForbidden without a Role",
        )
        assert "prometheus-token" in condition(denied, "Degraded")["message"]
        for doc in _example("secret-reader-role.yaml", kube_namespace):
            apply(cluster, doc)
        await eventually(
            lambda: get(cluster, "predictivescaler", "with-token", kube_namespace),
            lambda o: (o.get("status") or {}).get("recommendedReplicas") is not None,
            timeout=90,
            what="the scaler to recover once the Secret is granted (token cache expiry included)",
        )

        backend = await eventually(
            lambda: get(cluster, "forecastbackend", "default"),
            lambda o: condition(o, "Ready") is not None,
            what="the default backend's status",
        )
        assert backend["status"]["model"] == "seasonal-naive/168hx3"
        lease = get(cluster, "lease", "presage-scaler", "presage-system")
        assert lease["spec"]["holderIdentity"] == options.identity
        events = json.loads(cluster.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
        assert any(e["reason"] == "RecommendationChanged" for e in events)

    # Forbidden actions stay forbidden.
    with cluster.http_client(token) as http:
        assert http.get(f"/api/v1/namespaces/{kube_namespace}/secrets/other").status_code == 403
        assert http.get("/api/v1/namespaces/kube-system/secrets").status_code == 403
        assert http.get(f"/api/v1/namespaces/{kube_namespace}/secrets").status_code == 403
        patch = http.patch(
            f"/apis/apps/v1/namespaces/{kube_namespace}/deployments/checkout/scale",
            content=json.dumps({"spec": {"replicas": 9}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert patch.status_code == 403  # presage recommends; KEDA/HPA or Agones apply
        scalers = f"/apis/scaling.presage.sh/v1alpha1/namespaces/{kube_namespace}/predictivescalers"
        assert http.delete(f"{scalers}/checkout").status_code == 403
        assert (
            http.put(
                f"{scalers}/checkout", json=get(cluster, "predictivescaler", "checkout", kube_namespace)
            ).status_code
            == 403
        )
        assert http.post(scalers, json={**scaler, "metadata": {"name": "made"}}).status_code == 403

        # And what it needs is granted (the ServiceAccount's view of itself): a spec is patched only to
        # apply an advice (spec.advice.apply: WhenProven, tests/integration/test_advice_apply.py).
        def allowed(group: str, resource: str, verb: str) -> bool:
            attributes = {"group": group, "resource": resource, "verb": verb}
            review = http.post(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                json={"spec": {"resourceAttributes": attributes}},
            )
            return bool(review.json()["status"]["allowed"])

        assert allowed("keda.sh", "scaledobjects", "watch")
        assert allowed("scaling.presage.sh", "predictivescalers", "patch")
        assert allowed("scaling.presage.sh", "forecastbackends", "create")
        assert not allowed("scaling.presage.sh", "forecastbackends", "patch")
        assert not allowed("scaling.presage.sh", "forecastbackends", "delete")


async def test_without_list_and_watch_on_deployments_counts_are_read_through_the_scale_subresource(
    cluster, kube_namespace, prometheus_factory, caplog
):
    """RBAC from before the replica-count watch (the ClusterRole without list/watch on apps kinds):
    the controller says so once and reads the scale subresource, as it always did."""
    cluster.kubectl("apply", "-k", str(REPO / "manifests"))
    [role] = [
        d for d in yaml.safe_load_all((REPO / "manifests" / "rbac.yaml").read_text()) if d["kind"] == "ClusterRole"
    ]
    rules = [r for r in role["rules"] if not ("apps" in r["apiGroups"] and "watch" in r["verbs"])]
    assert len(rules) == len(role["rules"]) - 1
    name = "presage-without-watch"
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "presage-system"}}
    apply(cluster, account)
    apply(cluster, {**role, "metadata": {"name": name}, "rules": rules})
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "presage-system"}],
    }
    apply(cluster, binding)
    kubeconfig = cluster.kubeconfig_for_token(cluster.service_account_token("presage-system", name))
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    _example_scaler_of_two(cluster, kube_namespace, prom.url, "2s")

    options = ControllerOptions(
        kubeconfig=kubeconfig,
        namespaces=(kube_namespace,),
        grpc_port=0,
        http_port=0,
        health_port=0,
        leader_elect=False,
    )
    with caplog.at_level(logging.WARNING, logger="presage_scaler.controller.replica_counts"):
        async with running(options) as app:
            await eventually(
                lambda: get(cluster, "predictivescaler", "checkout", kube_namespace),
                lambda o: (o.get("status") or {}).get("currentReplicas") == 2,
                what="the count read through the scale subresource",
            )
            cluster.kubectl("scale", "deployment", "checkout", "--replicas=5", "-n", kube_namespace)
            await eventually(
                lambda: get(cluster, "predictivescaler", "checkout", kube_namespace),
                lambda o: o["status"].get("currentReplicas") == 5,
                what="the new count, read through the scale subresource",
            )
            await eventually(lambda: app.scalers.evaluations, lambda n: n >= 4, what="more evaluations")
            assert app.replicas is not None and app.replicas.watching() == []
    said = [r.getMessage() for r in caplog.records if "may not list deployments" in r.getMessage()]
    assert len(said) == 1 and "--no-watch-targets" in said[0]  # once, with what to do

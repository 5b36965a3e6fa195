"""The Kubernetes test harness runs a real API server: admin access, RBAC, CRDs, restarts."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest

from tests.harness.kube import KubeControlPlane

pytestmark = pytest.mark.integration


def _get_json(kube: KubeControlPlane, *args: str) -> dict:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


def test_admin_creates_namespace_and_configmap(kube_control_plane: KubeControlPlane) -> None:
    kube = kube_control_plane
    namespace = f"admin-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", namespace)
    kube.kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=window=300")

    configmap = _get_json(kube, "configmap", "settings", "-n", namespace)
    assert configmap["data"] == {"window": "300"}
    assert _get_json(kube, "namespace", namespace)["status"]["phase"] == "Active"


def test_readyz_through_kubectl(kube_control_plane: KubeControlPlane) -> None:
    assert kube_control_plane.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_rbac_forbids_service_account_until_granted(kube_control_plane: KubeControlPlane, kube_namespace: str) -> None:
    kube, ns = kube_control_plane, kube_namespace
    kube.kubectl("create", "serviceaccount", "reader", "-n", ns)
    token = kube.service_account_token(ns, "reader")
    secrets = f"/api/v1/namespaces/{ns}/secrets"

    with kube.http_client(token) as client:
        # Authenticated (not 401) as the ServiceAccount, but RBAC grants it nothing.
        denied = client.get(secrets)
        assert denied.status_code == 403, denied.text
        assert denied.json()["reason"] == "Forbidden"
        assert f"system:serviceaccount:{ns}:reader" in denied.json()["message"]

        token_kubeconfig = kube.kubeconfig_for_token(token)
        refused = kube.kubectl("get", "secrets", "-n", ns, kubeconfig=token_kubeconfig, check=False)
        assert refused.returncode != 0
        assert "forbidden" in refused.stderr.lower()

        kube.kubectl("create", "role", "secret-reader", "-n", ns, "--verb=get,list", "--resource=secrets")
        kube.kubectl(
            "create", "rolebinding", "reader-secrets", "-n", ns,
            "--role=secret-reader", f"--serviceaccount={ns}:reader",
        )  # fmt: skip
        # The RBAC authorizer reads bindings from an informer cache: allow it to catch up.
        deadline = time.monotonic() + 15
        while (allowed := client.get(secrets)).status_code == 403 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert allowed.status_code == 200, allowed.text
        assert allowed.json()["kind"] == "SecretList"

        # The grant is namespaced: other namespaces stay forbidden.
        assert client.get("/api/v1/namespaces/default/secrets").status_code == 403
        # Writing was never granted.
        create = client.post(secrets, json={"metadata": {"name": "x"}, "stringData": {"k": "v"}})
        assert create.status_code == 403

    assert kube.kubectl("get", "secrets", "-n", ns, kubeconfig=token_kubeconfig).returncode == 0


def test_token_request_honours_audience(kube_control_plane: KubeControlPlane, kube_namespace: str) -> None:
    kube_control_plane.kubectl("create", "serviceaccount", "scaler", "-n", kube_namespace)
    token = kube_control_plane.service_account_token(kube_namespace, "scaler", audience="presage")
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["aud"] == ["presage"]
    assert claims["sub"] == f"system:serviceaccount:{kube_namespace}:scaler"


def test_api_resources_include_leases(kube_control_plane: KubeControlPlane) -> None:
    names = kube_control_plane.kubectl("api-resources", "--api-group=coordination.k8s.io", "-o", "name")
    assert "leases.coordination.k8s.io" in names.stdout.split()


def test_crd_becomes_established(kube_control_plane: KubeControlPlane, kube_namespace: str) -> None:
    kube = kube_control_plane
    plural = f"widgets{uuid.uuid4().hex[:6]}"
    crd = f"{plural}.harness.presage.test"
    manifest = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {crd}
spec:
  group: harness.presage.test
  scope: Namespaced
  names: {{plural: {plural}, singular: w{plural}, kind: W{plural}, listKind: W{plural}List}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                replicas: {{type: integer, minimum: 0}}
"""
    kube.kubectl("apply", "-f", "-", input=manifest)
    try:
        kube.wait_established(f"crd/{crd}")

        widget = (
            f"apiVersion: harness.presage.test/v1\nkind: W{plural}\n"
            f"metadata: {{name: one, namespace: {kube_namespace}}}\nspec: {{replicas: 3}}\n"
        )
        kube.kubectl("apply", "-f", "-", input=widget)
        assert _get_json(kube, plural, "one", "-n", kube_namespace)["spec"]["replicas"] == 3

        # The schema is enforced by the real API server.
        invalid = widget.replace("replicas: 3", "replicas: -1")
        rejected = kube.kubectl("apply", "-f", "-", input=invalid, check=False)
        assert rejected.returncode != 0
        assert "spec.replicas" in rejected.stderr
    finally:
        kube.kubectl("delete", "crd", crd, "--wait=false", check=False)


def test_restart_apiserver_keeps_data(kube_control_plane: KubeControlPlane, kube_namespace: str) -> None:
    kube = kube_control_plane
    kube.kubectl("create", "configmap", "survivor", "-n", kube_namespace, "--from-literal=k=v")

    kube.restart_apiserver()

    assert kube.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    assert _get_json(kube, "configmap", "survivor", "-n", kube_namespace)["data"] == {"k": "v"}
    # Writes work again after the restart, through the same kubeconfig.
    kube.kubectl("create", "configmap", "after-restart", "-n", kube_namespace)

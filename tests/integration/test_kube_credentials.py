"""Credentials as cluster vendors hand them out, against the real API server: an exec plugin (how EKS,
GKE and AKS authenticate), a merged KUBECONFIG list, inline certificates; and lists that page.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import ApiError, KubeClient, Resource
from tests.harness.kube import KubeControlPlane

pytestmark = pytest.mark.integration

CONFIG_MAPS = Resource("", "v1", "configmaps", True, "ConfigMap")


def _kubeconfig(plane: KubeControlPlane, user: dict[str, Any], *, cluster: dict[str, Any] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": cluster or {"server": plane.server, "certificate-authority": str(plane.ca_path)}}
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}],
        "current-context": "x",
    }


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def _reader(plane: KubeControlPlane, namespace: str) -> str:
    """A ServiceAccount token allowed to list ConfigMaps in ``namespace`` and nothing else."""
    rbac = f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: reader, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: reader, namespace: {namespace}}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [list, get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: reader, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}}
subjects: [{{kind: ServiceAccount, name: reader, namespace: {namespace}}}]
"""
    plane.kubectl("apply", "-f", "-", input=rbac)
    return plane.service_account_token(namespace, "reader")


def _exec_plugin(tmp_path: Path, token: str, lifetime_s: float) -> tuple[Path, Path]:
    """A credential plugin that prints an ExecCredential and counts its runs in a file."""
    calls = tmp_path / "calls"
    script = tmp_path / "credential-plugin"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import datetime, json, pathlib
            calls = pathlib.Path({str(calls)!r})
            calls.write_text(str(int(calls.read_text() or 0) + 1) if calls.exists() else "1")
            expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds={lifetime_s})
            print(json.dumps({{
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "status": {{"token": {token!r}, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}},
            }}))
            """
        )
    )
    script.chmod(0o755)
    return script, calls


async def test_an_exec_plugin_authenticates_and_is_rerun_when_its_token_expires(cluster, kube_namespace, tmp_path):
    token = _reader(cluster, kube_namespace)
    plugin, calls = _exec_plugin(tmp_path, token, lifetime_s=2)
    user = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}
    }
    config = kube_config.from_kubeconfig(_write(tmp_path / "exec.kubeconfig", _kubeconfig(cluster, user)))
    assert config.namespace == "team-a"
    async with KubeClient(config) as client:
        assert (await client.list(CONFIG_MAPS, kube_namespace))["kind"] == "ConfigMapList"
        with pytest.raises(ApiError) as denied:  # the plugin's identity, not an admin's
            await client.list(CONFIG_MAPS, "default")
        assert denied.value.status == 403
        before = int(calls.read_text())
        await asyncio.sleep(3)  # past the credential's expiry (whole seconds in RFC 3339)
        await client.list(CONFIG_MAPS, kube_namespace)
        assert int(calls.read_text()) > before


async def test_a_kubeconfig_list_is_merged_like_kubectl_merges_it(cluster, kube_namespace, tmp_path, monkeypatch):
    token = _reader(cluster, kube_namespace)
    whole = _kubeconfig(cluster, {"token": token})
    contexts = _write(
        tmp_path / "contexts", {k: whole[k] for k in ("apiVersion", "kind", "contexts", "current-context")}
    )
    clusters = _write(tmp_path / "clusters", {k: whole[k] for k in ("apiVersion", "kind", "clusters", "users")})
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(contexts), str(clusters)]))
    config = kube_config.load()
    async with KubeClient(config) as client:
        assert (await client.list(CONFIG_MAPS, kube_namespace))["kind"] == "ConfigMapList"


def test_inline_certificates_work_and_their_temp_files_go_with_the_process(cluster, tmp_path):
    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    user = {"client-certificate-data": data(cluster.admin_cert), "client-key-data": data(cluster.admin_key)}
    inline = {"server": cluster.server, "certificate-authority-data": data(cluster.ca_path)}
    path = _write(tmp_path / "inline.kubeconfig", _kubeconfig(cluster, user, cluster=inline))
    program = textwrap.dedent(
        f"""\
        import asyncio, json
        from presage_scaler.clients.kube import credentials as config
        from presage_scaler.clients.kube.client import KubeClient, Resource
        async def main():
            loaded = config.from_kubeconfig({str(path)!r})
            async with KubeClient(loaded) as client:
                listing = await client.list(Resource("", "v1", "namespaces", False, "Namespace"))
            files = [str(loaded.ca_file), str(loaded.client_cert), str(loaded.client_key)]
            print(json.dumps([*files, len(listing["items"])]))
        asyncio.run(main())
        """
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60)
    *files, namespaces = json.loads(result.stdout)
    assert namespaces >= 1
    assert all(not Path(f).exists() for f in files), files  # written for ssl, removed at exit


async def test_lists_page_through_every_object(cluster, kube_namespace):
    async with KubeClient(kube_config.from_kubeconfig(cluster.kubeconfig)) as client:
        for i in range(7):
            await client.create(CONFIG_MAPS, kube_namespace, {"metadata": {"name": f"c{i}"}})
        listing = await client.list(CONFIG_MAPS, kube_namespace, page_size=2)
        names = [item["metadata"]["name"] for item in listing["items"]]
        assert set(names) >= {f"c{i}" for i in range(7)} and len(names) == len(set(names)), names
        assert not listing["metadata"].get("continue")
        assert listing["metadata"]["resourceVersion"]

"""Every Prometheus a KEDA user can reach, presage reaches: real Prometheus servers started with
``--web.config.file`` behind basic auth, behind TLS with a private CA, and requiring a client certificate
(mutual TLS), and a plain one behind a header-checking gateway that wants the tenant header
``X-Scope-OrgID`` (as a multi-tenant Mimir or Cortex does). Each is read by the controller's evaluation with
its Secrets in a real kube-apiserver, and by ``presage backtest --prometheus`` with the connection flags;
each wrong setting fails with a reason and a message that say what to fix.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from presage_scaler.api.parse import parse
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.cli.main import main
from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import KubeClient
from presage_scaler.clients.kube.secrets import SecretError, Secrets
from presage_scaler.clients.prometheus import PrometheusClientPool, QueryFailed
from presage_scaler.controller.app import running
from presage_scaler.controller.prometheus_signals import PrometheusSignalSource
from presage_scaler.engine.evaluator import EvaluationError
from tests.harness.certs import issue
from tests.harness.fixtures_prometheus import PrometheusFactory
from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import (
    apply,
    condition,
    deployment,
    eventually,
    get,
    options,
    predictive_scaler,
    recent_samples,
)
from tests.harness.prometheus import Series, WebConfig
from tests.harness.tenant_proxy import TenantProxy

pytestmark = pytest.mark.integration

QUERY = 'app_demand{job="web"}'
USER, PASSWORD = "presage", "correct horse battery staple"
TENANT = "team-a"


class Pki:
    """A private CA and the server certificate it signs (for 127.0.0.1); a client CA and the client
    certificate it signs; and a client certificate of a CA nobody trusts."""

    def __init__(self) -> None:
        self.ca = issue("private-ca", ca=True)
        self.server = issue("prometheus", self.ca, usage=[ExtendedKeyUsageOID.SERVER_AUTH], hosts=["127.0.0.1"])
        self.client_ca = issue("client-ca", ca=True)
        self.client = issue("presage", self.client_ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
        self.stranger = issue("stranger", issue("stranger-ca", ca=True), usage=[ExtendedKeyUsageOID.CLIENT_AUTH])


class Servers:
    """The four ways in, each serving the same recent demand."""

    def __init__(self, factory: PrometheusFactory, pki: Pki) -> None:
        series = Series("app_demand", {"job": "web"}, recent_samples())
        self.basic = factory(series, web=WebConfig(users={USER: PASSWORD}))
        self.tls = factory(series, web=WebConfig(server=pki.server))
        self.mtls = factory(series, web=WebConfig(server=pki.server, client_ca=pki.client_ca))
        self.plain = factory(series)


@pytest.fixture(scope="module")
def pki() -> Pki:
    return Pki()


@pytest.fixture(scope="module")
def servers(module_prometheus_factory: PrometheusFactory, pki: Pki) -> Servers:
    return Servers(module_prometheus_factory, pki)


@pytest.fixture(scope="module")
def gateway(servers: Servers) -> Iterator[TenantProxy]:
    with TenantProxy(servers.plain.url, TENANT) as proxy:
        yield proxy


def _secret(name: str, **data: bytes) -> dict[str, Any]:
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}


def _secrets(pki: Pki) -> list[dict[str, Any]]:
    return [
        _secret("prom-basic", username=USER.encode(), password=PASSWORD.encode() + b"\n"),
        _secret("prom-basic-old", username=USER.encode(), password=b"last month's password"),
        _secret("prom-ca", **{"ca.crt": pki.ca.cert}),
        _secret("prom-client", **{"ca.crt": pki.ca.cert, "tls.crt": pki.client.cert, "tls.key": pki.client.key}),
        _secret("prom-stranger", **{"ca.crt": pki.ca.cert, "tls.crt": pki.stranger.cert, "tls.key": pki.stranger.key}),
        _secret("prom-mismatch", **{"ca.crt": pki.ca.cert, "tls.crt": pki.client.cert, "tls.key": pki.stranger.key}),
        _secret("prom-tenant", org=TENANT.encode()),
    ]


CLIENT_TLS = {"name": "prom-client", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"}


def _connections(servers: Servers, gateway: TenantProxy) -> dict[str, dict[str, Any]]:
    """Scaler name -> its signal's prometheus block: the ones that read, then the ones that must fail."""
    return {
        "basic": {"address": servers.basic.url, "basicAuthSecretRef": {"name": "prom-basic"}},
        "tls": {"address": servers.tls.url, "tlsSecretRef": {"name": "prom-ca", "caKey": "ca.crt"}},
        "mtls": {"address": servers.mtls.url, "tlsSecretRef": CLIENT_TLS},
        "tenant": {"address": gateway.url, "headers": [{"name": "X-Scope-OrgID", "value": TENANT}]},
        "tenant-secret": {
            "address": gateway.url,
            "headers": [
                {"name": "x-scope-orgid", "valueFrom": {"secretKeyRef": {"name": "prom-tenant", "key": "org"}}}
            ],
        },
        "old-password": {"address": servers.basic.url, "basicAuthSecretRef": {"name": "prom-basic-old"}},
        "no-client-cert": {"address": servers.mtls.url, "tlsSecretRef": {"name": "prom-ca", "caKey": "ca.crt"}},
        "stranger-cert": {"address": servers.mtls.url, "tlsSecretRef": {**CLIENT_TLS, "name": "prom-stranger"}},
        "system-cas": {"address": servers.tls.url},
        "mismatched-key": {"address": servers.mtls.url, "tlsSecretRef": {**CLIENT_TLS, "name": "prom-mismatch"}},
        "no-tenant": {"address": gateway.url},
    }


FAILURES = {
    # scaler: (reason, what the message must say)
    "old-password": ("QueryFailed", ["HTTP 401", "the username and password in Secret", "/prom-basic-old"]),
    # Refused in the handshake: a TLS alert, or just a reset connection (then the hint is for any https).
    "no-client-cert": ("PrometheusUnreachable", ["the client certificate"]),
    "stranger-cert": ("PrometheusUnreachable", ["the client certificate"]),
    "system-cas": ("PrometheusUnreachable", ["certificate verify failed", "CA bundle"]),
    "mismatched-key": ("SecretInvalid", ["/prom-mismatch keys 'tls.crt' and 'tls.key'", "KEY_VALUES_MISMATCH"]),
    "no-tenant": ("QueryFailed", ["HTTP 401", "no org id", "X-Scope-OrgID"]),
}


async def test_the_controller_reads_each_prometheus_with_its_secrets_and_says_what_is_wrong(
    cluster: KubeControlPlane, kube_namespace: str, backend_name: str, servers: Servers, gateway: TenantProxy, pki: Pki
) -> None:
    for secret in _secrets(pki):
        apply(cluster, secret, kube_namespace)
    apply(cluster, deployment("web", 3), kube_namespace)
    connections = _connections(servers, gateway)
    for name, prometheus in connections.items():
        scaler = predictive_scaler(name, "web", prometheus["address"], QUERY, backend_name)
        scaler["spec"]["signal"]["prometheus"].update(prometheus)
        apply(cluster, scaler, kube_namespace)

    async with running(options(cluster, kube_namespace)):
        for name in connections.keys() - FAILURES.keys():
            scaler = await eventually(
                lambda name=name: get(cluster, "predictivescaler", name, kube_namespace),
                lambda o: (o.get("status") or {}).get("recommendedReplicas") is not None,
                what=f"{name} to read its Prometheus and recommend",
            )
            assert condition(scaler, "Degraded")["status"] == "False", condition(scaler, "Degraded")
        for name, (reason, says) in FAILURES.items():
            scaler = await eventually(
                lambda name=name: get(cluster, "predictivescaler", name, kube_namespace),
                lambda o: (condition(o, "Degraded") or {}).get("reason") is not None,
                what=f"{name} to be Degraded",
            )
            degraded = condition(scaler, "Degraded")
            assert (degraded["status"], degraded["reason"]) == ("True", reason), (name, degraded)
            assert all(part in degraded["message"] for part in says), (name, degraded["message"])
            assert PASSWORD not in degraded["message"] and "PRIVATE KEY" not in degraded["message"]
    # Both tenant scalers' requests carried the tenant; the one without a header was refused.
    assert {TENANT, None} == set(gateway.seen)


@pytest.fixture
async def kube(cluster: KubeControlPlane) -> Any:
    async with KubeClient(kube_config.from_kubeconfig(cluster.kubeconfig)) as client:
        yield client


def _query(prometheus: dict[str, Any]) -> PrometheusQuery:
    return parse(PrometheusQuery, {"query": QUERY, **prometheus}, path="prometheus")


async def test_a_signal_source_reads_through_real_secrets_and_a_rotated_password_is_used_within_the_ttl(
    cluster: KubeControlPlane, kube_namespace: str, kube: KubeClient, servers: Servers, pki: Pki
) -> None:
    """PrometheusSignalSource, as the controller makes it per namespace: basic auth and mutual TLS read, a
    password changed in the Secret is sent once the cached one expires, and a rotated client certificate
    opens an endpoint of its own while the password's rotation opens none."""
    for secret in _secrets(pki):
        apply(cluster, secret, kube_namespace)
    clock = [0.0]
    pool = PrometheusClientPool()
    source = PrometheusSignalSource(pool, Secrets(kube, clock=lambda: clock[0]).for_namespace(kube_namespace))
    now = datetime.now(UTC)
    try:
        basic = _query({"address": servers.basic.url, "basicAuthSecretRef": {"name": "prom-basic"}})
        assert await source.instant(basic, now) > 0
        mtls = _query({"address": servers.mtls.url, "tlsSecretRef": CLIENT_TLS})
        assert await source.instant(mtls, now) > 0
        assert pool.sessions == 2

        apply(cluster, _secret("prom-basic", username=USER.encode(), password=b"rotated"), kube_namespace)
        assert await source.instant(basic, now) > 0  # still the cached password
        clock[0] += 61
        with pytest.raises(QueryFailed, match="HTTP 401") as refused:
            await source.instant(basic, now)
        assert f"Secret {kube_namespace}/prom-basic" in str(refused.value)
        assert pool.sessions == 2  # a password travels per request

        renewed = issue("presage-renewed", pki.client_ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
        rotated = {"ca.crt": pki.ca.cert, "tls.crt": renewed.cert, "tls.key": renewed.key}
        apply(cluster, _secret("prom-client", **rotated), kube_namespace)
        clock[0] += 61
        assert await source.instant(mtls, now) > 0
        assert pool.sessions == 3  # another certificate, another session: TLS material is never shared
    finally:
        await pool.aclose()


async def test_secret_errors_name_the_secret_and_key(
    cluster: KubeControlPlane, kube_namespace: str, kube: KubeClient, pki: Pki
) -> None:
    apply(cluster, _secret("prom-basic", username=USER.encode(), password=PASSWORD.encode()), kube_namespace)
    apply(cluster, _secret("not-text", token=b"\xff\xfe"), kube_namespace)
    secrets = Secrets(kube)
    read = secrets.for_namespace(kube_namespace)
    assert await read("prom-basic", ["username", "password"]) == {"username": b"presage", "password": PASSWORD.encode()}
    with pytest.raises(SecretError) as missing:
        await read("nope", ["token"])
    assert missing.value.reason == "SecretNotFound" and f"Secret {kube_namespace}/nope does not exist" in str(
        missing.value
    )
    with pytest.raises(SecretError) as no_key:
        await read("prom-basic", ["username", "pass"])
    assert no_key.value.reason == "SecretKeyNotFound"
    assert f"Secret {kube_namespace}/prom-basic has no key 'pass' (its keys: 'password', 'username')" in str(
        no_key.value
    )
    pool = PrometheusClientPool()
    try:
        bearer = _query({"address": "http://127.0.0.1:1", "bearerTokenSecretRef": {"name": "not-text", "key": "token"}})
        with pytest.raises(EvaluationError) as not_text:
            await PrometheusSignalSource(pool, read).instant(bearer, datetime.now(UTC))
        assert not_text.value.reason == "SecretInvalid"
        assert f"Secret {kube_namespace}/not-text key 'token' (bearerTokenSecretRef) is not UTF-8 text" in str(
            not_text.value
        )
    finally:
        await pool.aclose()

    # A ServiceAccount granted nothing: the Secret exists, presage may not read it.
    token = cluster.service_account_token(kube_namespace, "default")
    config = kube_config.from_kubeconfig(cluster.kubeconfig_for_token(token))
    async with KubeClient(config) as unprivileged:
        with pytest.raises(SecretError) as forbidden:
            await Secrets(unprivileged).read(kube_namespace, "prom-basic", ["password"])
    assert forbidden.value.reason == "SecretForbidden"
    assert "secret-reader-role.yaml" in str(forbidden.value)


def _backtest(tmp_path: Path, address: str, *flags: str) -> int:
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    return main(
        [
            "backtest",
            "--out",
            str(tmp_path / "out"),
            "--prometheus",
            address,
            "--query",
            QUERY,
            "--start",
            (end - timedelta(hours=3)).isoformat(),
            "--end",
            end.isoformat(),
            "--per-replica",
            "10",
            "--lead-time",
            "2m",
            "--season",
            "1h",
            "--cycles",
            "1",
            "--warmup",
            "1h",
            "--no-progress",
            *flags,
        ]
    )


def test_backtest_sends_the_tenant_header_to_the_gateway(
    servers: Servers, gateway: TenantProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = len(gateway.seen)
    assert _backtest(tmp_path, gateway.url, "--header", f"X-Scope-OrgID={TENANT}") == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "summary.json").read_text())
    assert gateway.seen[before:] and set(gateway.seen[before:]) == {TENANT}

    assert _backtest(tmp_path, gateway.url) == 2
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "no org id" in err and "X-Scope-OrgID" in err
    assert gateway.seen[-1] is None


def test_backtest_reads_behind_basic_auth_and_mutual_tls(
    servers: Servers, pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    assert (
        _backtest(tmp_path, servers.basic.url, "--basic-auth", USER, "--basic-auth-password-file", str(password)) == 0
    )
    monkeypatch.setenv("PRESAGE_PROMETHEUS_PASSWORD", "wrong")
    assert _backtest(tmp_path, servers.basic.url, "--basic-auth", USER) == 2
    assert "HTTP 401" in (err := capsys.readouterr().err) and "--basic-auth presage" in err

    files = _write_pems(tmp_path, ca=pki.ca.cert, cert=pki.client.cert, key=pki.client.key, stray=pki.stranger.key)
    tls = ("--ca-file", str(files["ca"]), "--cert-file", str(files["cert"]))
    assert _backtest(tmp_path, servers.mtls.url, *tls, "--key-file", str(files["key"])) == 0, capsys.readouterr().err
    assert _backtest(tmp_path, servers.mtls.url, "--ca-file", str(files["ca"])) == 2
    assert "client certificate" in capsys.readouterr().err
    assert _backtest(tmp_path, servers.mtls.url, *tls, "--key-file", str(files["stray"])) == 2
    err = capsys.readouterr().err
    assert f"--cert-file {files['cert']} and --key-file {files['stray']}" in err and "KEY_VALUES_MISMATCH" in err


def _write_pems(folder: Path, **pems: bytes) -> dict[str, Path]:
    paths = {name: folder / f"{name}.pem" for name in pems}
    for name, content in pems.items():
        paths[name].write_bytes(content)
    return paths


def test_the_harness_prometheus_refuses_what_it_should(servers: Servers) -> None:
    """The servers above are what they claim: without credentials, or without a client certificate,
    Prometheus itself refuses (so the tests that pass through them prove presage sent what they need)."""
    assert httpx.get(f"{servers.basic.url}/api/v1/query?query=1").status_code == 401
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{servers.mtls.url}/api/v1/query?query=1", verify=False)
    assert httpx.get(f"{servers.tls.url}/api/v1/query?query=1", verify=False).status_code == 200

"""How a PrometheusQuery's connection is declared, resolved and used, without a cluster: the declaration's
rules (the CRD's CEL, checked again when parsing), the Secrets' values made into headers and TLS, the
TLS material loaded, the pool's sessions, the 401/403 hints, the Secret cache and the CLI's flags.

The same rules on the real API server are in tests/integration/test_crds_apiserver.py; real Secrets and
real Prometheus servers behind basic auth, TLS and a tenant gateway in
tests/integration/test_prometheus_connection.py.
"""

from __future__ import annotations

import argparse
import base64
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.prometheus_query import RESERVED_HEADERS, PrometheusQuery
from presage_scaler.api.reasons import Reason
from presage_scaler.backtest.connection import connection_of
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.cli.main import main
from presage_scaler.cli.trace_flags import add_connection_arguments, connection_options
from presage_scaler.clients import prometheus
from presage_scaler.clients.kube.client import NotFound
from presage_scaler.clients.kube.secrets import SecretError, Secrets
from presage_scaler.clients.prometheus import (
    Connection,
    InvalidTLSMaterial,
    PrometheusClient,
    PrometheusClientPool,
    QueryFailed,
    TLSSettings,
)
from presage_scaler.clients.prometheus_connection import basic_authorization, resolve_connection
from tests.harness.certs import Pem, issue
from tests.harness.in_memory_secrets import InMemorySecrets
from tests.harness.local_http import serving

SPEC = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "signal": {"prometheus": {"address": "https://mimir:8080/prometheus", "query": "q"}},
    "capacity": {"perReplica": 10},
    "policy": {"maxReplicas": 10},
}
TENANT = {"name": "X-Scope-OrgID", "value": "team-a"}
FROM_SECRET = {"name": "X-Api-Key", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "api"}}}


def _spec(**prometheus: Any) -> dict[str, Any]:
    return {**SPEC, "signal": {"prometheus": {**SPEC["signal"]["prometheus"], **prometheus}}}


# --- the declaration -----------------------------------------------------------------------


def test_a_query_with_every_connection_field_parses_with_the_defaults_keda_uses():
    spec = parse(
        PredictiveScalerSpec,
        _spec(
            basicAuthSecretRef={"name": "prom"},
            tlsSecretRef={"name": "prom-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"},
            headers=[TENANT, FROM_SECRET],
        ),
    )
    query = spec.signal.prometheus
    assert (query.basic_auth_secret_ref.username_key, query.basic_auth_secret_ref.password_key) == (
        "username",
        "password",
    )
    assert [h.name for h in query.headers] == ["X-Scope-OrgID", "X-Api-Key"]
    assert parse(PredictiveScalerSpec, spec.to_wire()) == spec


@pytest.mark.parametrize(
    ("prometheus", "message"),
    [
        (
            {"bearerTokenSecretRef": {"name": "t", "key": "token"}, "basicAuthSecretRef": {"name": "b"}},
            "spec.signal.prometheus: set at most one of bearerTokenSecretRef and basicAuthSecretRef",
        ),
        (
            {"headers": [TENANT, {"name": "x-scope-orgid", "value": "team-b"}]},
            "spec.signal.prometheus: header names must be unique (in any case)",
        ),
        (
            {"basicAuthSecretRef": {"name": "b"}, "headers": [{"name": "authorization", "value": "Basic eA=="}]},
            "spec.signal.prometheus: headers may not set Authorization when bearerTokenSecretRef or "
            "basicAuthSecretRef sets it",
        ),
        ({"headers": [{"name": "Host", "value": "other"}]}, "spec.signal.prometheus.headers[0]: name is a header"),
        ({"headers": [{"name": "X-A"}]}, "spec.signal.prometheus.headers[0]: exactly one of value or valueFrom"),
        (
            {"headers": [{**TENANT, "valueFrom": FROM_SECRET["valueFrom"]}]},
            "spec.signal.prometheus.headers[0]: exactly one of value or valueFrom",
        ),
        ({"headers": [{"name": "X Tenant", "value": "a"}]}, "spec.signal.prometheus.headers[0].name:"),
        ({"headers": [{"name": "X-A", "value": "a\r\nX-B: b"}]}, "spec.signal.prometheus.headers[0].value:"),
        ({"headers": [TENANT] * 17}, "spec.signal.prometheus.headers:"),
        (
            {"tlsSecretRef": {"name": "t", "certKey": "tls.crt"}},
            "spec.signal.prometheus.tlsSecretRef: certKey and keyKey go together",
        ),
        ({"tlsSecretRef": {"name": "t"}}, "spec.signal.prometheus.tlsSecretRef: tlsSecretRef needs caKey"),
        ({"basicAuthSecretRef": {"name": "b", "passwordKey": ""}}, "spec.signal.prometheus.basicAuthSecretRef"),
    ],
)
def test_connection_rules_name_the_field(prometheus, message):
    with pytest.raises(SpecError) as caught:
        parse(PredictiveScalerSpec, _spec(**prometheus))
    assert any(p.startswith(message) for p in caught.value.problems), caught.value.problems


@pytest.mark.parametrize("name", ["authorization", "Authorization"])
def test_authorization_is_just_a_header_when_no_secret_ref_sets_it(name):
    spec = parse(PredictiveScalerSpec, _spec(headers=[{"name": name, "value": "Token abc"}]))
    assert spec.signal.prometheus.headers[0].name == name


def test_every_reserved_header_is_refused_in_any_case():
    for reserved in RESERVED_HEADERS:
        with pytest.raises(SpecError, match="name is a header presage sets itself"):
            parse(PredictiveScalerSpec, _spec(headers=[{"name": reserved.upper(), "value": "x"}]))


# --- resolving a query's Secrets -----------------------------------------------------------


def _query(**fields: Any) -> PrometheusQuery:
    return parse(PrometheusQuery, {"address": "https://prom:9090", "query": "q", **fields}, path="prometheus")


SECRETS = {
    "token": {"token": b"s3cret\n"},
    "basic": {"username": b"presage\n", "password": b"p\xc3\xa4ss word "},
    "keys": {"api": b"k-123"},
    "tls": {"ca.crt": b"CA", "tls.crt": b"CERT", "tls.key": b"KEY"},
}


async def test_headers_carry_the_secrets_values_trimmed_and_tls_the_pem_bytes():
    bearer = await resolve_connection(
        _query(bearerTokenSecretRef={"name": "token", "key": "token"}, headers=[TENANT]), InMemorySecrets(SECRETS)
    )
    assert bearer.headers == (("Authorization", "Bearer s3cret"), ("X-Scope-OrgID", "team-a"))
    assert bearer.credentials == "the bearer token in Secret shop/token key 'token'"
    secrets = InMemorySecrets(SECRETS)
    basic = await resolve_connection(
        _query(
            basicAuthSecretRef={"name": "basic"},
            headers=[FROM_SECRET],
            tlsSecretRef={"name": "tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"},
            insecureSkipVerify=True,
        ),
        secrets,
    )
    expected = "Basic " + base64.b64encode("presage:päss word".encode()).decode()
    assert basic.headers == (("Authorization", expected), ("X-Api-Key", "k-123"))
    assert basic.credentials == "the username and password in Secret shop/basic"
    assert (basic.tls.ca, basic.tls.cert, basic.tls.key, basic.tls.insecure_skip_verify) == (
        b"CA",
        b"CERT",
        b"KEY",
        True,
    )
    assert basic.tls.ca_from == "Secret shop/tls key 'ca.crt' (tlsSecretRef.caKey)"
    assert secrets.reads == 3  # one read of each Secret, whatever the keys
    plain = await resolve_connection(_query(), None)
    assert plain == Connection()


@pytest.mark.parametrize(
    ("secrets", "fields", "reason", "message"),
    [
        (
            {"t": {"token": b"\xff"}},
            {"bearerTokenSecretRef": {"name": "t", "key": "token"}},
            Reason.SECRET_INVALID,
            "Secret shop/t key 'token' (bearerTokenSecretRef) is not UTF-8 text",
        ),
        (
            {"t": {"token": b" \n"}},
            {"bearerTokenSecretRef": {"name": "t", "key": "token"}},
            Reason.SECRET_INVALID,
            "Secret shop/t key 'token' (bearerTokenSecretRef) is empty",
        ),
        (
            {"b": {"username": b"a:b", "password": b"p"}},
            {"basicAuthSecretRef": {"name": "b"}},
            Reason.SECRET_INVALID,
            "Secret shop/b key 'username' (basicAuthSecretRef.usernameKey) holds a colon",
        ),
        (
            {"keys": {"api": b"one\r\nX-Injected: 1"}},
            {"headers": [FROM_SECRET]},
            Reason.SECRET_INVALID,
            "Secret shop/keys key 'api' (header X-Api-Key) holds a line break",
        ),
        ({}, {"basicAuthSecretRef": {"name": "b"}}, Reason.SECRET_NOT_FOUND, "Secret shop/b does not exist"),
        (
            {"b": {"user": b"a", "password": b"p"}},
            {"basicAuthSecretRef": {"name": "b"}},
            Reason.SECRET_KEY_NOT_FOUND,
            "Secret shop/b has no key ['username']",
        ),
    ],
)
async def test_a_secret_value_presage_cannot_use_names_the_secret_and_key(secrets, fields, reason, message):
    with pytest.raises(SecretError) as caught:
        await resolve_connection(_query(**fields), InMemorySecrets(secrets))
    assert caught.value.reason == reason
    assert message in str(caught.value)
    assert "X-Injected" not in str(caught.value)


async def test_without_a_secret_reader_a_query_naming_a_secret_is_unavailable():
    with pytest.raises(SecretError) as caught:
        await resolve_connection(_query(tlsSecretRef={"name": "tls", "caKey": "ca.crt"}), None)
    assert caught.value.reason == Reason.SECRET_UNAVAILABLE
    assert "tlsSecretRef names Secret tls, but no Secret reader is configured" in str(caught.value)


# --- TLS material --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki() -> dict[str, Pem]:
    ca = issue("ca", ca=True)
    return {"ca": ca, "client": issue("client", ca), "other": issue("other", ca)}


def test_tls_fingerprints_tell_material_apart_and_ignore_where_it_came_from(pki):
    a = TLSSettings(ca=pki["ca"].cert, ca_from="Secret shop/a key 'ca.crt'")
    assert a.fingerprint == TLSSettings(ca=pki["ca"].cert, ca_from="--ca-file ca.pem").fingerprint
    others = [
        TLSSettings(),
        TLSSettings(insecure_skip_verify=True),
        TLSSettings(ca=pki["ca"].cert, insecure_skip_verify=True),
        TLSSettings(ca=pki["ca"].cert, cert=pki["client"].cert, key=pki["client"].key),
        TLSSettings(ca=pki["ca"].cert, cert=pki["other"].cert, key=pki["other"].key),
        # The same bytes split differently between the parts are another setting.
        TLSSettings(ca=pki["ca"].cert + pki["client"].cert),
    ]
    assert len({a.fingerprint, *(o.fingerprint for o in others)}) == 1 + len(others)
    assert TLSSettings().context() is True


def _encrypted(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )


@pytest.mark.parametrize(
    ("material", "message"),
    [
        ({"ca": b"not a certificate"}, "the CA is not a PEM CA bundle"),
        ({"ca": "client.key"}, "the CA is not a PEM CA bundle"),
        ({"cert": "client.cert", "key": "other.key"}, "the pair cannot be used (KEY_VALUES_MISMATCH)"),
        ({"cert": b"junk", "key": "client.key"}, "the pair: the certificate is not PEM"),
        ({"cert": "client.cert", "key": b"junk"}, "the pair: the key is not a PEM private key"),
        ({"cert": "client.cert", "key": "encrypted"}, "the pair: the key is encrypted"),
        ({"cert": "client.cert"}, "the pair: a client certificate needs its key"),
    ],
)
def test_unusable_tls_material_says_which_part_and_where_from(pki, material, message):
    def pem(value: bytes | str) -> bytes:
        if isinstance(value, bytes):
            return value
        if value == "encrypted":
            return _encrypted(pki["client"].key)
        name, part = value.split(".")
        return getattr(pki[name], part)

    settings = TLSSettings(**{k: pem(v) for k, v in material.items()}, ca_from="the CA", cert_from="the pair")
    with pytest.raises(InvalidTLSMaterial) as caught:
        settings.context()
    assert message in str(caught.value)
    assert caught.value.reason == Reason.SECRET_INVALID
    assert "-----" not in str(caught.value)  # no PEM content in a message


def test_a_ca_bundle_may_carry_text_around_its_certificates(pki):
    """As ``openssl x509 -text`` writes it, with a name that is not ASCII."""
    text = "Subject: CN=Zürich private CA\n".encode() + pki["ca"].cert + b"\n# end of bundle\n"
    assert TLSSettings(ca=text).context() is not True


def test_a_client_certificate_loads_without_touching_a_disk_where_linux_allows(pki, monkeypatch):
    """memfd where the OS has it; elsewhere a private temporary file, removed at once."""
    good = TLSSettings(ca=pki["ca"].cert, cert=pki["client"].cert, key=pki["client"].key)
    assert good.context() is not True
    monkeypatch.delattr(prometheus.os, "memfd_create", raising=False)
    assert TLSSettings(cert=pki["client"].cert, key=pki["client"].key).context() is not True


# --- the pool and the hints ----------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _answer(status: int = 200, text: str | None = None) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        if text is not None:
            return web.Response(status=status, text=text)
        return web.json_response({"status": "success", "data": {"resultType": "scalar", "result": [0, "1"]}})

    return handle


async def test_credentials_travel_per_request_and_tls_keys_the_session(pki):
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.headers))
        return await _answer()(request)

    pool = PrometheusClientPool()
    async with serving(handle) as url:
        try:
            for password in ("one", "two"):
                auth = (("Authorization", basic_authorization("u", password)), ("X-Scope-OrgID", "a"))
                assert await pool.get(url, Connection(auth)).query_instant("q") == 1.0
            assert pool.sessions == 1
            for material in (pki["client"], pki["other"]):
                pool.get(url, Connection(tls=TLSSettings(cert=material.cert, key=material.key)))
            assert pool.sessions == 3
        finally:
            await pool.aclose()
    assert [h["Authorization"] for h in seen] == [basic_authorization("u", p) for p in ("one", "two")]
    assert all(h["X-Scope-OrgID"] == "a" and h["Accept"] == "application/json" for h in seen)


async def test_a_full_pool_closes_the_endpoints_idle_longest_and_never_one_in_use(monkeypatch):
    monkeypatch.setattr(prometheus, "MAX_ENDPOINTS", 2)
    now = [0.0]
    pool = PrometheusClientPool(clock=lambda: now[0])
    try:
        busy = pool.get("http://busy:9090")
        busy._endpoint.in_flight = 1  # a request under way
        pool.get("http://a:9090")
        now[0] += prometheus.ENDPOINT_IDLE_SECONDS + 1
        pool.get("http://b:9090")  # a and busy are idle long enough; a is closed, busy is in use
        assert pool.sessions == 2
        assert {key[0] for key in pool._endpoints} == {"http://busy:9090", "http://b:9090"}
        pool.get("http://c:9090")  # b was used just now: nothing idle enough, the bound gives way
        assert pool.sessions == 3
        busy._endpoint.in_flight = 0
    finally:
        await pool.aclose()


@pytest.mark.parametrize(
    ("status", "credentials", "hint"),
    [
        (401, None, "the server asks for credentials (basic auth or a bearer token) or, for a multi-tenant"),
        (401, "the username and password in Secret shop/b", "the server refused the username and password in"),
        (403, None, "the server refuses this request: check the headers sent (a tenant header)"),
        (403, "--basic-auth presage", "--basic-auth presage may not run this query"),
    ],
)
async def test_a_refusal_names_the_credentials_sent_even_with_a_plain_text_body(status, credentials, hint):
    headers = (("Authorization", "Basic eA=="),) if credentials else ()
    async with (
        serving(_answer(status, "Unauthorized\n")) as url,
        PrometheusClient(url, connection=Connection(headers, credentials=credentials)) as client,
    ):
        with pytest.raises(QueryFailed) as caught:
            await client.query_instant("q")
    assert caught.value.status_code == status
    assert f"HTTP {status} (Unauthorized); {hint}" in str(caught.value)


# --- the Secret cache ----------------------------------------------------------------------


class _Api:
    """The API server's answer to a Secret read (the real one is in tests/integration)."""

    def __init__(self, data: dict[str, bytes] | None) -> None:
        self.data = data
        self.gets = 0

    async def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any]:
        self.gets += 1
        if self.data is None:
            raise NotFound(404, "not found")
        return {"data": {k: base64.b64encode(v).decode() for k, v in self.data.items()}}


async def test_one_read_serves_every_key_until_the_ttl_and_a_rotation_is_read_after_it():
    api, now = _Api({"username": b"u", "password": b"one", "other": b"x"}), [0.0]
    secrets = Secrets(api, ttl_seconds=60, clock=lambda: now[0])  # type: ignore[arg-type]
    read = secrets.for_namespace("shop")
    assert await read("basic", ["username", "password"]) == {"username": b"u", "password": b"one"}
    api.data["password"] = b"two"
    now[0] = 59
    assert (await read("basic", ["password"]))["password"] == b"one"
    assert api.gets == 1
    now[0] = 61
    assert (await read("basic", ["password", "username"]))["password"] == b"two"
    assert api.gets == 2
    assert ("shop", "basic", "other") not in secrets._cache  # only the keys asked for are kept


async def test_a_full_cache_drops_the_values_past_their_ttl(monkeypatch):
    monkeypatch.setattr("presage_scaler.clients.kube.secrets.MAX_CACHED_VALUES", 4)
    api, now = _Api({"k": b"v"}), [0.0]
    secrets = Secrets(api, ttl_seconds=60, clock=lambda: now[0])  # type: ignore[arg-type]
    for name in ("a", "b", "c", "d"):
        await secrets.read("shop", name, ["k"])
    now[0] = 100
    await secrets.read("shop", "e", ["k"])
    assert set(secrets._cache) == {("shop", "e", "k")}


# --- the CLI's flags -----------------------------------------------------------------------


def _flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_connection_arguments(parser.add_argument_group("connection"))
    return parser.parse_args(list(argv))


def test_flags_make_the_same_connection_a_scaler_would(tmp_path: Path, pki, monkeypatch):
    (tmp_path / "password").write_text("päss\n")
    for name, content in {"ca": pki["ca"].cert, "cert": pki["client"].cert, "key": pki["client"].key}.items():
        (tmp_path / name).write_bytes(content)
    args = _flags(
        "--header",
        "X-Scope-OrgID=team-a",
        "--header",
        "X-Extra = two words ",
        "--basic-auth",
        "presage",
        "--basic-auth-password-file",
        str(tmp_path / "password"),
        "--ca-file",
        str(tmp_path / "ca"),
        "--cert-file",
        str(tmp_path / "cert"),
        "--key-file",
        str(tmp_path / "key"),
    )
    connection = connection_of(connection_options(args))
    assert connection.headers == (
        ("Authorization", basic_authorization("presage", "päss")),
        ("X-Scope-OrgID", "team-a"),
        ("X-Extra", "two words"),
    )
    assert connection.credentials == "--basic-auth presage"
    assert connection.tls == TLSSettings(ca=pki["ca"].cert, cert=pki["client"].cert, key=pki["client"].key)
    assert connection.tls.context() is not True
    assert connection_options(args).given() == [
        "--header",
        "--basic-auth",
        "--basic-auth-password-file",
        "--ca-file",
        "--cert-file",
        "--key-file",
    ]
    monkeypatch.setenv("PRESAGE_PROMETHEUS_PASSWORD", "from-env")
    from_env = connection_of(connection_options(_flags("--basic-auth", "presage")))
    assert from_env.headers == (("Authorization", basic_authorization("presage", "from-env")),)
    assert connection_of(connection_options(_flags())) == Connection()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--header", "X-Scope-OrgID"], "--header 'X-Scope-OrgID': write it NAME=VALUE"),
        (["--header", "Host=x"], "--header 'Host=x': name is a header presage sets itself"),
        (["--header", "A=1", "--header", "a=2"], "--header: each header name may be given once"),
        (["--header", "Authorization=x", "--basic-auth", "u"], "--header Authorization and --basic-auth both set"),
        (["--basic-auth", "u"], "--basic-auth needs a password: --basic-auth-password-file FILE, or the PRESAGE_"),
        (["--basic-auth", "a:b"], "--basic-auth: give a username without a colon"),
        (["--basic-auth-password-file", "p"], "--basic-auth-password-file needs --basic-auth USER"),
        (["--cert-file", "c"], "--cert-file and --key-file go together"),
        (["--ca-file", "/nonexistent/ca.pem"], "--ca-file /nonexistent/ca.pem: cannot read it (No such file"),
    ],
)
def test_flags_that_cannot_work_are_refused_naming_the_flag(argv, message, monkeypatch):
    monkeypatch.delenv("PRESAGE_PROMETHEUS_PASSWORD", raising=False)
    with pytest.raises(BacktestError) as caught:
        connection_of(connection_options(_flags(*argv)))
    assert str(caught.value).startswith(message), str(caught.value)


def test_connection_flags_with_a_trace_file_are_refused(tmp_path: Path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp,value\n2026-01-01T00:00:00Z,1\n")
    assert main(["backtest", str(trace), "--out", str(tmp_path / "out"), "--header", "X-Scope-OrgID=a"]) == 2
    assert "--header apply to --prometheus, not to a TRACE file" in capsys.readouterr().err

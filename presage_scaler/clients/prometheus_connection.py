"""How a :class:`~presage_scaler.api.prometheus_query.PrometheusQuery` becomes the connection it
declares (:func:`resolve_connection`): its headers and TLS settings, its Secrets read through a
:class:`SecretSource`. Every value that cannot be used is a :class:`SecretError` naming the Secret and key."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.secrets import SecretError
from presage_scaler.clients.prometheus import Connection, TLSSettings

# What a header value may not hold: control characters other than a tab (a line break would end the header).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class SecretSource(Protocol):
    """Reads keys of a Secret by name, in the scaler's own namespace (the controller binds it), raising
    :class:`SecretError` (SecretNotFound, SecretKeyNotFound, SecretForbidden, ...) naming it."""

    namespace: str

    async def __call__(self, name: str, keys: Sequence[str]) -> Mapping[str, bytes]: ...


class _Secrets:
    """A query's reads of its Secrets, with the messages that name them."""

    def __init__(self, read: SecretSource | None) -> None:
        self._read = read

    def where(self, name: str) -> str:
        return f"Secret {self._read.namespace}/{name}" if self._read is not None else f"Secret {name}"

    async def values(self, name: str, keys: Sequence[str], field: str) -> Mapping[str, bytes]:
        if self._read is None:
            raise SecretError(
                Reason.SECRET_UNAVAILABLE, f"{field} names {self.where(name)}, but no Secret reader is configured"
            )
        return await self._read(name, keys)

    async def text(self, name: str, key: str, field: str, *, allow_empty: bool = True) -> str:
        """The text value of one key (see :meth:`decode`)."""
        return self.decode(name, key, field, (await self.values(name, (key,), field))[key], allow_empty=allow_empty)

    def decode(self, name: str, key: str, field: str, raw: bytes, *, allow_empty: bool = True) -> str:
        """A text value: UTF-8, its surrounding whitespace (a file's trailing newline) dropped, and no
        control character that would break the header it goes into."""
        problem = None
        try:
            value = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            value, problem = "", "is not UTF-8 text"
        if problem is None and _CONTROL.search(value):
            problem = "holds a line break or another control character"
        if problem is None and not value and not allow_empty:
            problem = "is empty"
        if problem is not None:
            raise SecretError(Reason.SECRET_INVALID, f"{self.where(name)} key {key!r} ({field}) {problem}")
        return value


async def resolve_connection(query: PrometheusQuery, read: SecretSource | None) -> Connection:
    """The headers and TLS settings ``query`` declares, its Secrets read with ``read`` (None: a query that
    names a Secret fails with SecretUnavailable). Raises :class:`SecretError` naming the Secret and key
    whose value cannot be used; TLS material is checked when a connection is made from it
    (:class:`~presage_scaler.clients.prometheus.InvalidTLSMaterial`)."""
    secrets = _Secrets(read)
    headers: list[tuple[str, str]] = []
    credentials = None
    if (bearer := query.bearer_token_secret_ref) is not None:
        token = await secrets.text(bearer.name, bearer.key, "bearerTokenSecretRef", allow_empty=False)
        headers.append(("Authorization", f"Bearer {token}"))
        credentials = f"the bearer token in {secrets.where(bearer.name)} key {bearer.key!r}"
    if (basic := query.basic_auth_secret_ref) is not None:
        keys = (basic.username_key, basic.password_key)
        raw = await secrets.values(basic.name, keys, "basicAuthSecretRef")
        user = secrets.decode(basic.name, keys[0], "basicAuthSecretRef.usernameKey", raw[keys[0]], allow_empty=False)
        password = secrets.decode(basic.name, keys[1], "basicAuthSecretRef.passwordKey", raw[keys[1]])
        if ":" in user:
            raise SecretError(
                Reason.SECRET_INVALID,
                f"{secrets.where(basic.name)} key {basic.username_key!r} (basicAuthSecretRef.usernameKey) holds a "
                "colon, which basic authentication cannot send in a username",
            )
        headers.append(("Authorization", basic_authorization(user, password)))
        credentials = f"the username and password in {secrets.where(basic.name)}"
    for header in query.headers or ():
        if header.value is not None:
            headers.append((header.name, header.value))
        elif header.value_from is not None:
            ref = header.value_from.secret_key_ref
            headers.append((header.name, await secrets.text(ref.name, ref.key, f"header {header.name}")))
    return Connection(tuple(headers), await _tls(query, secrets), credentials)


async def _tls(query: PrometheusQuery, secrets: _Secrets) -> TLSSettings:
    insecure = bool(query.insecure_skip_verify)
    ref = query.tls_secret_ref
    if ref is None:
        return TLSSettings(insecure_skip_verify=insecure)
    keys = [key for key in (ref.ca_key, ref.cert_key, ref.key_key) if key is not None]
    values = await secrets.values(ref.name, keys, "tlsSecretRef")
    where = secrets.where(ref.name)
    return TLSSettings(
        ca=values[ref.ca_key] if ref.ca_key is not None else None,
        cert=values[ref.cert_key] if ref.cert_key is not None else None,
        key=values[ref.key_key] if ref.key_key is not None else None,
        insecure_skip_verify=insecure,
        ca_from=f"{where} key {ref.ca_key!r} (tlsSecretRef.caKey)",
        cert_from=f"{where} keys {ref.cert_key!r} and {ref.key_key!r} (tlsSecretRef.certKey and keyKey)",
    )


def basic_authorization(user: str, password: str) -> str:
    """The Authorization header value of HTTP basic authentication (RFC 7617, UTF-8)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")

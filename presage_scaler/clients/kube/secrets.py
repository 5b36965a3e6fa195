"""Secret values from the PredictiveScaler's own namespace, and nowhere else: the bearer tokens, basic auth
credentials, header values and TLS material a Prometheus query names.

A scaler can only name a Secret (no reference in the API has a namespace field) and the reader is bound to
the scaler's namespace when it is created, so one tenant's scaler can never make presage read another
tenant's Secret. Values are cached briefly so a thousand scalers sharing a Secret do not read it a
thousand times a minute, yet a rotated password, token or certificate is picked up within the TTL. One read
of a Secret serves every key asked for at once (a username and a password, a CA, a certificate and a key).
Only the keys asked for are kept, as bytes; what they mean (text, PEM) is
:func:`presage_scaler.clients.prometheus_connection.resolve_connection`'s to check. Every failure is a
:class:`SecretError` whose reason is the condition reason to report (the controller reports it as the
evaluation's).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Sequence

from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import ApiError, Forbidden, KubeClient, NotFound, Resource

SECRETS = Resource("", "v1", "secrets", True, "Secret")


class SecretError(Exception):
    """A Secret value that cannot be read or used; ``reason`` is its condition reason (SecretNotFound, ...)."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = Reason(reason)  # a reason outside the vocabulary fails here, where it is written
        self.message = message


MAX_CACHED_VALUES = 4096
"""Past this many cached values, adding one first drops those past their TTL (deleted scalers' Secrets)."""


class Secrets:
    """Reads and caches Secret values; :meth:`for_namespace` hands out namespace-bound readers."""

    def __init__(
        self, client: KubeClient, ttl_seconds: float = 60.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._ttl = ttl_seconds
        self._clock = clock
        self._cache: dict[tuple[str, str, str], tuple[float, bytes]] = {}

    def for_namespace(self, namespace: str) -> NamespaceSecrets:
        return NamespaceSecrets(self, namespace)

    async def read(self, namespace: str, name: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of ``keys`` of Secret ``namespace/name``; raises :class:`SecretError` with
        SecretNotFound, SecretForbidden, SecretUnavailable or SecretKeyNotFound, naming the Secret and key."""
        now = self._clock()
        cached = {key: self._cache.get((namespace, name, key)) for key in keys}
        if all(entry is not None and now - entry[0] < self._ttl for entry in cached.values()):
            return {key: entry[1] for key, entry in cached.items() if entry is not None}
        data = await self._data(namespace, name)
        missing = [key for key in keys if key not in data]
        if missing:
            present = ", ".join(sorted(repr(key) for key in data)) or "none"
            raise SecretError(
                Reason.SECRET_KEY_NOT_FOUND,
                f"Secret {namespace}/{name} has no key {', '.join(map(repr, missing))} (its keys: {present})",
            )
        values = {key: _decoded(data[key], namespace, name, key) for key in keys}
        if len(self._cache) + len(values) > MAX_CACHED_VALUES:
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < self._ttl}
        for key, value in values.items():
            self._cache[(namespace, name, key)] = (now, value)
        return values

    async def _data(self, namespace: str, name: str) -> dict[str, str]:
        where = f"Secret {namespace}/{name}"
        try:
            secret = await self._client.get(SECRETS, namespace, name)
        except NotFound as exc:
            raise SecretError(Reason.SECRET_NOT_FOUND, f"{where} does not exist") from exc
        except Forbidden as exc:
            raise SecretError(
                Reason.SECRET_FORBIDDEN,
                f"presage may not read {where}; grant its ServiceAccount get on that Secret "
                "(a Role with resourceNames, see manifests/examples/secret-reader-role.yaml)",
            ) from exc
        except ApiError as exc:
            raise SecretError(Reason.SECRET_UNAVAILABLE, f"reading {where}: {exc}") from exc
        data = secret.get("data")
        return data if isinstance(data, dict) else {}


def _decoded(encoded: object, namespace: str, name: str, key: str) -> bytes:
    try:
        if not isinstance(encoded, str):
            raise ValueError(f"not a string but {type(encoded).__name__}")
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SecretError(
            Reason.SECRET_INVALID, f"Secret {namespace}/{name} key {key!r} is not base64 data: {exc}"
        ) from exc


class NamespaceSecrets:
    """A :class:`~presage_scaler.clients.prometheus_connection.SecretSource` fixed to one namespace."""

    def __init__(self, secrets: Secrets, namespace: str) -> None:
        self._secrets = secrets
        self.namespace = namespace

    async def __call__(self, name: str, keys: Sequence[str]) -> dict[str, bytes]:
        return await self._secrets.read(self.namespace, name, keys)

"""Bearer tokens from Secrets in the PredictiveScaler's own namespace, and nowhere else.

A scaler can only name a Secret (``bearerTokenSecretRef`` has no namespace field) and the reader
is bound to the scaler's namespace when it is created, so one tenant's scaler can never make
presage read another tenant's Secret. Tokens are cached briefly so a thousand scalers sharing a
Secret do not read it a thousand times a minute, yet a rotated token is picked up within the TTL.
"""

from __future__ import annotations

import base64
import binascii
import time

from presage_scaler.api.predictive_scaler import SecretKeyRef
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import ApiError, Forbidden, KubeClient, NotFound, Resource
from presage_scaler.engine.evaluator import EvaluationError

SECRETS = Resource("", "v1", "secrets", True, "Secret")


class SecretTokens:
    """Reads and caches token values; :meth:`for_namespace` hands out namespace-bound resolvers."""

    def __init__(self, client: KubeClient, ttl_seconds: float = 60.0) -> None:
        self._client = client
        self._ttl = ttl_seconds
        self._cache: dict[tuple[str, str, str], tuple[float, str]] = {}

    def for_namespace(self, namespace: str) -> NamespaceTokens:
        return NamespaceTokens(self, namespace)

    async def read(self, namespace: str, ref: SecretKeyRef) -> str:
        key = (namespace, ref.name, ref.key)
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < self._ttl:
            return cached[1]
        where = f"Secret {namespace}/{ref.name}"
        try:
            secret = await self._client.get(SECRETS, namespace, ref.name)
        except NotFound as exc:
            raise EvaluationError(Reason.SECRET_NOT_FOUND, f"{where} does not exist") from exc
        except Forbidden as exc:
            raise EvaluationError(
                Reason.SECRET_FORBIDDEN,
                f"presage may not read {where}; grant its ServiceAccount get on that Secret "
                "(a Role with resourceNames, see manifests/examples/secret-reader-role.yaml)",
            ) from exc
        except ApiError as exc:
            raise EvaluationError(Reason.SECRET_UNAVAILABLE, f"reading {where}: {exc}") from exc
        encoded = (secret.get("data") or {}).get(ref.key)
        if encoded is None:
            raise EvaluationError(Reason.SECRET_KEY_NOT_FOUND, f"{where} has no key {ref.key!r}")
        try:
            token = base64.b64decode(encoded).decode().strip()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise EvaluationError(Reason.SECRET_KEY_NOT_FOUND, f"{where} key {ref.key!r} is not a text token") from exc
        self._cache[key] = (time.monotonic(), token)
        return token


class NamespaceTokens:
    """A :data:`~presage_scaler.engine.signals.TokenResolver` fixed to one namespace."""

    def __init__(self, tokens: SecretTokens, namespace: str) -> None:
        self._tokens = tokens
        self._namespace = namespace

    async def __call__(self, ref: SecretKeyRef) -> str:
        return await self._tokens.read(self._namespace, ref)

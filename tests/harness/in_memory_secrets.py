"""Secrets held in memory, for unit tests of what presage makes of their values: a
:class:`~presage_scaler.clients.prometheus_connection.SecretSource` answering as the controller's reader does (the
same error for a missing Secret or key). Reading them from a real API server is tested in
tests/integration/test_prometheus_connection.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.secrets import SecretError


class InMemorySecrets:
    """Secrets by name, each a mapping of key to bytes, in ``namespace``; ``reads`` counts the reads."""

    def __init__(self, secrets: Mapping[str, Mapping[str, bytes]], namespace: str = "shop") -> None:
        self.secrets = {name: dict(data) for name, data in secrets.items()}
        self.namespace = namespace
        self.reads = 0

    async def __call__(self, name: str, keys: Sequence[str]) -> Mapping[str, bytes]:
        self.reads += 1
        if name not in self.secrets:
            raise SecretError(Reason.SECRET_NOT_FOUND, f"Secret {self.namespace}/{name} does not exist")
        data = self.secrets[name]
        missing = [key for key in keys if key not in data]
        if missing:
            raise SecretError(Reason.SECRET_KEY_NOT_FOUND, f"Secret {self.namespace}/{name} has no key {missing}")
        return {key: data[key] for key in keys}

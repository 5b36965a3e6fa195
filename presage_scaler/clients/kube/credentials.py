"""Where the API server is and how to authenticate, as the ``kubernetes`` package's loaders read it.

The loaders understand every kubeconfig a cluster vendor hands out: exec credential plugins (EKS,
GKE, AKS), auth providers, inline ``*-data``, ``KUBECONFIG`` lists merged in order, and the
in-cluster service account. They also own expiry: their refresh hook re-runs an exec plugin whose
token has expired and re-reads the rotating service-account token, and :meth:`KubeConfig.authorization`
calls it before every request. Only the credentials come from there; requests stay on presage's
aiohttp client (:mod:`presage_scaler.clients.kube.client`), a seventh of the CPU per request of the
package's own client (docs/controller.md). Inline certificates are written to temp files by the
package, which removes them when the process exits.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.client import Configuration
from kubernetes.config import ConfigException, list_kube_config_contexts, load_incluster_config, load_kube_config

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeConfigError(Exception):
    """No usable cluster configuration; the message says what was looked for."""


@dataclass(frozen=True)
class KubeConfig:
    """API server address, TLS settings and a source of credentials."""

    server: str
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure_skip_verify: bool = False
    tls_server_name: str | None = None
    namespace: str = "default"
    loaded: Configuration | None = field(default=None, repr=False, compare=False)
    """The loader's configuration, whose refresh hook renews expiring credentials."""

    def authorization(self) -> str | None:
        """The ``Authorization`` header's value, renewed first when the credential has expired."""
        if self.loaded is None:
            return None
        if self.loaded.refresh_api_key_hook is not None:
            self.loaded.refresh_api_key_hook(self.loaded)
        value = self.loaded.api_key.get("BearerToken") or self.loaded.api_key.get("authorization")
        if not value:
            return None
        scheme, _, token = value.partition(" ")
        return f"Bearer {token}" if scheme.lower() == "bearer" else value

    def ssl_context(self) -> ssl.SSLContext:
        if self.insecure_skip_verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        if self.client_cert is not None:
            context.load_cert_chain(str(self.client_cert), str(self.client_key) if self.client_key else None)
        return context


def _path(value: object) -> Path | None:
    return Path(value) if isinstance(value, str) and value else None


def _from_loaded(loaded: Configuration, namespace: str) -> KubeConfig:
    return KubeConfig(
        server=str(loaded.host).rstrip("/"),
        ca_file=_path(loaded.ssl_ca_cert),
        client_cert=_path(loaded.cert_file),
        client_key=_path(loaded.key_file),
        insecure_skip_verify=not loaded.verify_ssl,
        tls_server_name=getattr(loaded, "tls_server_name", None) or None,
        namespace=namespace,
        loaded=loaded,
    )


def from_kubeconfig(files: str | Path, context: str | None = None) -> KubeConfig:
    """One context (the current one unless named) of a kubeconfig, or of a ``KUBECONFIG``-style list
    of files (``a:b``) merged as kubectl merges them."""
    loaded = Configuration()
    try:
        load_kube_config(config_file=str(files), context=context, client_configuration=loaded, persist_config=False)
        contexts, current = list_kube_config_contexts(config_file=str(files))
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
        raise KubeConfigError(f"cannot use kubeconfig {files}: {exc}") from exc
    except RecursionError:  # the loader's YAML parser recurses once per level of nesting
        raise KubeConfigError(f"cannot use kubeconfig {files}: nested too deeply to be a kubeconfig") from None
    chosen = next((c for c in contexts if c.get("name") == context), current) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    return _from_loaded(loaded, str(namespace))


def in_cluster() -> KubeConfig:
    """The pod's own service account, its token re-read as the kubelet rotates it."""
    loaded = Configuration()
    try:
        load_incluster_config(client_configuration=loaded)
    except ConfigException as exc:
        raise KubeConfigError(f"not running in a cluster ({exc}); pass --kubeconfig") from exc
    namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip() if SERVICE_ACCOUNT_NAMESPACE.exists() else "default"
    return _from_loaded(loaded, namespace or "default")


def load(kubeconfig: Path | None = None, context: str | None = None) -> KubeConfig:
    """``kubeconfig`` if given, else $KUBECONFIG (a list is merged), else in-cluster, else ~/.kube/config."""
    if kubeconfig is not None:
        return from_kubeconfig(kubeconfig, context)
    if os.environ.get("KUBECONFIG"):
        return from_kubeconfig(os.environ["KUBECONFIG"], context)
    try:
        return in_cluster()
    except KubeConfigError:
        home = Path.home() / ".kube" / "config"
        if home.exists():
            return from_kubeconfig(home, context)
        raise

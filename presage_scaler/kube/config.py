"""Where the API server is and how to authenticate: in-cluster service account, or a kubeconfig.

The in-cluster token is a projected, rotating token, so it is re-read from disk on every request
(the kubelet refreshes the file well before expiry); a kubeconfig token or client certificate is
static.
"""

from __future__ import annotations

import argparse
import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeConfigError(Exception):
    """No usable cluster configuration; the message says what was looked for."""


@dataclass(frozen=True)
class KubeConfig:
    """API server address plus credentials: a bearer token (literal or file) or a client certificate."""

    server: str
    ca_file: Path | None = None
    token: str | None = None
    token_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure_skip_verify: bool = False
    namespace: str = "default"

    def bearer_token(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()
        return self.token

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


def in_cluster(directory: Path = SERVICE_ACCOUNT_DIR) -> KubeConfig:
    """The pod's own service account, as every in-cluster client finds it."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (directory / "token").exists():
        raise KubeConfigError(
            "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset or no service account token "
            f"in {directory}); pass --kubeconfig"
        )
    namespace_file = directory / "namespace"
    return KubeConfig(
        server=f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}",
        ca_file=directory / "ca.crt",
        token_file=directory / "token",
        namespace=namespace_file.read_text().strip() if namespace_file.exists() else "default",
    )


def _materialise(data: str, suffix: str) -> Path:
    """Write inline ``*-data`` (base64 PEM) to a private temp file; ssl wants paths."""
    handle = tempfile.NamedTemporaryFile(prefix="presage-kube-", suffix=suffix, delete=False)  # noqa: SIM115
    with handle:
        handle.write(base64.b64decode(data))
    os.chmod(handle.name, 0o600)
    return Path(handle.name)


def _path_or_data(section: dict[str, object], key: str, base: Path, suffix: str) -> Path | None:
    if isinstance(section.get(f"{key}-data"), str):
        return _materialise(str(section[f"{key}-data"]), suffix)
    value = section.get(key)
    if isinstance(value, str):
        path = Path(value)
        return path if path.is_absolute() else base / path
    return None


def _named(items: object, name: str, what: str, path: Path) -> dict[str, object]:
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(what)
            return body if isinstance(body, dict) else {}
    raise KubeConfigError(f"{path}: no {what} named {name!r}")


def from_kubeconfig(path: Path, context: str | None = None) -> KubeConfig:
    """Read one context of a kubeconfig file (the current one unless named)."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    context_name = context or document.get("current-context")
    if not context_name:
        raise KubeConfigError(f"{path}: no current-context and no --context given")
    ctx = _named(document.get("contexts"), context_name, "context", path)
    cluster = _named(document.get("clusters"), str(ctx.get("cluster")), "cluster", path)
    user = _named(document.get("users"), str(ctx.get("user")), "user", path)
    if not isinstance(cluster.get("server"), str):
        raise KubeConfigError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
    base = path.parent
    token_file = user.get("tokenFile")
    return KubeConfig(
        server=str(cluster["server"]).rstrip("/"),
        ca_file=_path_or_data(cluster, "certificate-authority", base, ".crt"),
        token=str(user["token"]) if isinstance(user.get("token"), str) else None,
        token_file=Path(token_file) if isinstance(token_file, str) else None,
        client_cert=_path_or_data(user, "client-certificate", base, ".crt"),
        client_key=_path_or_data(user, "client-key", base, ".key"),
        insecure_skip_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        namespace=str(ctx.get("namespace") or "default"),
    )


def add_kubeconfig_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context``, the flags that :func:`load` takes."""
    parser.add_argument(
        "--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: its current-context)")


def load(kubeconfig: Path | None = None, context: str | None = None) -> KubeConfig:
    """``kubeconfig`` if given, else $KUBECONFIG, else in-cluster, else ~/.kube/config."""
    if kubeconfig is not None:
        return from_kubeconfig(kubeconfig, context)
    if os.environ.get("KUBECONFIG"):
        return from_kubeconfig(Path(os.environ["KUBECONFIG"].split(os.pathsep)[0]), context)
    try:
        return in_cluster()
    except KubeConfigError:
        home = Path.home() / ".kube" / "config"
        if home.exists():
            return from_kubeconfig(home, context)
        raise

"""A real Kubernetes control plane (etcd + kube-apiserver + kubectl) for integration tests.

The binaries are built from the Go module in ``tests/k8s`` (pinned there) and cached
outside the clone, keyed by the Kubernetes version; see ``tests/k8s/README.md``.
Only the API server runs: no controller-manager, scheduler or kubelet, so objects are
stored and served (RBAC, admission, CRDs, TokenRequest all work) but never reconciled;
:mod:`tests.harness.kube_controllers` adds the controllers where a test needs them. The
aggregation layer is configured (front-proxy CA and client certificate), so extension API
servers such as KEDA's metrics adapter can be registered with an APIService.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.harness.certs import issue, private_pem
from tests.harness.gobuild import RECIPE_VERSION, GoBuild, ensure_built
from tests.harness.process import ServerProcess, free_ports

K8S_MODULE_DIR = Path(__file__).resolve().parents[1] / "k8s"

# Packages built from tests/k8s/go.mod for the control plane, and the file names they are cached under.
_COMMANDS = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "go.etcd.io/etcd/server/v3",
}

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
FRONT_PROXY_CLIENT = "front-proxy-client"


class KubeHarnessError(RuntimeError):
    """The control plane could not be built or started; the message says why."""


def _log(message: str) -> None:
    print(f"[kube-harness] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- binaries


@dataclass(frozen=True)
class KubeBinaries:
    kube_apiserver: Path
    kubectl: Path
    etcd: Path
    kubernetes_version: str
    etcd_version: str


def _required_version(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE)
    if match is None:
        raise KubeHarnessError(f"{module} is not required in {K8S_MODULE_DIR / 'go.mod'}")
    return match.group(1)


def kubernetes_build(what: str, cache: str, commands: Mapping[str, str]) -> GoBuild:
    """Commands of the ``tests/k8s`` module, cached in ``$PRESAGE_CACHE/<cache>/<k8s-version>-<digest>``.

    The digest covers go.mod, go.sum and the build recipe, so changing a pin never reuses a stale
    build. Kubernetes commands are stamped with the real version: kubectl's version-skew check and
    the API server's compatibility-version logic read it (unstamped, they report v0.0.0-master).
    """
    go_mod = (K8S_MODULE_DIR / "go.mod").read_text()
    go_sum = (K8S_MODULE_DIR / "go.sum").read_bytes()
    k8s_version = _required_version(go_mod, "k8s.io/kubernetes")
    digest = hashlib.sha256(go_mod.encode() + go_sum + RECIPE_VERSION.encode()).hexdigest()[:12]
    major, minor = k8s_version.removeprefix("v").split(".")[:2]
    version_pkg = "k8s.io/component-base/version"
    stamped = " ".join(
        [
            "-s -w",
            f"-X {version_pkg}.gitVersion={k8s_version}",
            f"-X {version_pkg}.gitMajor={major}",
            f"-X {version_pkg}.gitMinor={minor}",
            f"-X {version_pkg}.gitTreeState=clean",
            f"-X {version_pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    )
    return GoBuild(
        what=f"{what} {k8s_version}",
        cache=cache,
        key=f"{k8s_version}-{digest}",
        source=lambda: K8S_MODULE_DIR,
        commands=commands,
        ldflags={name: stamped for name, package in commands.items() if package.startswith("k8s.io/")},
    )


def ensure_kube_binaries() -> KubeBinaries:
    """Return the cached kube-apiserver, kubectl and etcd, building them first if needed."""
    go_mod = (K8S_MODULE_DIR / "go.mod").read_text()
    build = kubernetes_build("Kubernetes control plane", "kube", _COMMANDS)
    final = ensure_built(build, KubeHarnessError)
    return KubeBinaries(
        kube_apiserver=final / "kube-apiserver",
        kubectl=final / "kubectl",
        etcd=final / "etcd",
        kubernetes_version=_required_version(go_mod, "k8s.io/kubernetes"),
        etcd_version=_required_version(go_mod, "go.etcd.io/etcd/server/v3"),
    )


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class _Pki:
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_public: Path
    sa_private: Path
    front_proxy_ca: Path
    proxy_client_cert: Path
    proxy_client_key: Path


def _generate_pki(directory: Path) -> _Pki:
    directory.mkdir(parents=True, exist_ok=True)
    pki = _Pki(
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_public=directory / "sa.pub",
        sa_private=directory / "sa.key",
        front_proxy_ca=directory / "front-proxy-ca.crt",
        proxy_client_cert=directory / "front-proxy-client.crt",
        proxy_client_key=directory / "front-proxy-client.key",
    )
    ca = issue("presage-test-ca", ca=True)
    pki.ca_cert.write_bytes(ca.cert)

    # The first address of the service range is the in-cluster `kubernetes` Service IP.
    service_ip = next(ipaddress.ip_network(SERVICE_CLUSTER_IP_RANGE).hosts())
    hosts = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "127.0.0.1",
        str(service_ip),
    ]
    serving = issue("kube-apiserver", ca, usage=[ExtendedKeyUsageOID.SERVER_AUTH], hosts=hosts)
    serving.write(pki.serving_cert, pki.serving_key)

    # O=system:masters is bound to cluster-admin and bypasses RBAC entirely.
    admin_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
        ]
    )
    admin = issue(admin_name, ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    admin.write(pki.admin_cert, pki.admin_key)

    sa_key = ec.generate_private_key(ec.SECP256R1())
    pki.sa_private.write_bytes(private_pem(sa_key))
    pki.sa_private.chmod(0o600)
    pki.sa_public.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

    # The aggregation layer: the API server proxies to extension API servers (KEDA's metrics adapter)
    # with this client certificate, which they trust through the front-proxy CA it publishes in
    # kube-system/extension-apiserver-authentication. A CA of its own, as kubeadm does: a certificate
    # of the main CA must not be able to assert a user in request headers.
    front_proxy_ca = issue("presage-test-front-proxy-ca", ca=True)
    pki.front_proxy_ca.write_bytes(front_proxy_ca.cert)
    proxy_client = issue(FRONT_PROXY_CLIENT, front_proxy_ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    proxy_client.write(pki.proxy_client_cert, pki.proxy_client_key)
    return pki


# --------------------------------------------------------------------------- control plane


class KubeControlPlane:
    """etcd + kube-apiserver on loopback with RBAC on; usable as a context manager.

    Attributes after ``start()``: ``server`` (https URL), ``kubeconfig`` (admin kubeconfig
    path), ``ca_path``, ``admin_cert``, ``admin_key``, ``workdir``, ``binaries``.
    """

    READY_TIMEOUT_S = 120.0
    STOP_TIMEOUT_S = 20.0

    def __init__(
        self, binaries: KubeBinaries | None = None, workdir: Path | None = None, apiserver_args: Sequence[str] = ()
    ) -> None:
        """``apiserver_args``: more kube-apiserver flags (an audit log, say), kept across restarts."""
        self.binaries = binaries or ensure_kube_binaries()
        self.apiserver_args = list(apiserver_args)
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="presage-kube-"))
        self._pki = _generate_pki(self.workdir / "pki")
        self.ca_path = self._pki.ca_cert
        self.admin_cert = self._pki.admin_cert
        self.admin_key = self._pki.admin_key
        self.etcd_port, self.etcd_peer_port, self.port = free_ports(3)
        self.server = f"https://127.0.0.1:{self.port}"
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.kubeconfig = self._write_kubeconfig(
            self.workdir / "admin.kubeconfig",
            {"client-certificate": str(self.admin_cert), "client-key": str(self.admin_key)},
        )
        self.start_seconds: float | None = None  # start-to-ready time of the last start()
        self._etcd: ServerProcess | None = None
        self._apiserver: ServerProcess | None = None
        self._failed = False
        self._counter = itertools.count()
        self._lock = threading.Lock()

    # -- lifecycle

    def start(self) -> KubeControlPlane:
        started = time.monotonic()
        try:
            self._start_etcd()
            self._start_apiserver()
        except BaseException:
            self._failed = True
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        _log(
            f"control plane {self.binaries.kubernetes_version} ready at {self.server} "
            f"in {self.start_seconds:.1f}s (workdir {self.workdir})"
        )
        return self

    @property
    def pids(self) -> dict[str, int]:
        """The running servers' process ids by name (``etcd``, ``kube-apiserver``), for benchmarks
        that measure what they cost."""
        return {p.name: p.pid for p in (self._etcd, self._apiserver) if p is not None and p.running}

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver on the same port, certs and etcd (data survives)."""
        if self._apiserver is not None:
            self._apiserver.stop(self.STOP_TIMEOUT_S)
        try:
            self._start_apiserver()
        except BaseException:
            self._failed = True
            raise

    def stop(self) -> None:
        """Stop everything; on failure print log tails and keep the workdir for inspection."""
        died = [p for p in (self._apiserver, self._etcd) if p is not None and not p.running]
        if died:
            self._failed = True
        for proc in (self._apiserver, self._etcd):
            if proc is not None:
                proc.stop(self.STOP_TIMEOUT_S)
        if self._failed:
            for proc in (self._apiserver, self._etcd):
                if proc is not None and not proc.reported:
                    _log(f"{proc.name} exit code {proc.returncode}; log tail ({proc.log_path}):\n{proc.log_tail()}")
            _log(f"keeping {self.workdir} for inspection")
        elif self._own_workdir and not os.environ.get("PRESAGE_KEEP_KUBE_DIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        self._apiserver = self._etcd = None

    def __enter__(self) -> KubeControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._failed = True
        self.stop()

    def mark_failed(self) -> None:
        """Make stop() print the logs and keep the workdir (e.g. after a failed test)."""
        self._failed = True

    # -- process start-up

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        cmd = [
            str(self.binaries.etcd),
            "--name=presage-test",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=presage-test={peer}",
            # Test data is throwaway: skipping fsync makes every write much faster.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        self._etcd = self._spawn("etcd", cmd)
        self._etcd.wait_http(f"{self.etcd_url}/health", time.monotonic() + self.READY_TIMEOUT_S)

    def _start_apiserver(self) -> None:
        pki = self._pki
        cmd = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The default reconciler publishes the advertise address as the `kubernetes`
            # Service endpoint and refuses loopback; nothing in-cluster needs that endpoint.
            "--endpoint-reconciler-type=none",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.sa_public}",
            f"--service-account-signing-key-file={pki.sa_private}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # The aggregation layer, for extension API servers such as KEDA's metrics adapter.
            f"--requestheader-client-ca-file={pki.front_proxy_ca}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.proxy_client_cert}",
            f"--proxy-client-key-file={pki.proxy_client_key}",
            # Self-signed loopback certs would otherwise be written to /var/run/kubernetes.
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *self.apiserver_args,
        ]
        self._apiserver = self._spawn("kube-apiserver", cmd)
        self._apiserver.wait_http(
            f"{self.server}/readyz", time.monotonic() + self.READY_TIMEOUT_S, verify=self._ssl_context()
        )

    def _spawn(self, name: str, cmd: list[str]) -> ServerProcess:
        log_path = self.workdir / f"{name}.log"
        # Appended, so the log of a restarted API server keeps the earlier run above it.
        with log_path.open("a") as log:
            log.write(f"\n===== {time.strftime('%H:%M:%S')} starting: {' '.join(cmd)}\n")
        return ServerProcess(name, cmd, log_path, error=KubeHarnessError)

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_path))
        ctx.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        return ctx

    # -- clients

    def _write_kubeconfig(self, path: Path, user: dict[str, str]) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "presage-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_path)},
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "presage-test", "context": {"cluster": "presage-test", "user": "user"}}],
            "current-context": "presage-test",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def kubeconfig_for_token(self, token: str) -> Path:
        """Write a kubeconfig that authenticates with a bearer token; return its path."""
        with self._lock:
            n = next(self._counter)
        return self._write_kubeconfig(self.workdir / f"token-{n}.kubeconfig", {"token": token})

    def kubectl_argv(self, *args: str, kubeconfig: Path | None = None) -> list[str]:
        """The command line that runs the built kubectl with ``args`` (admin kubeconfig unless given)."""
        return [
            str(self.binaries.kubectl),
            f"--kubeconfig={kubeconfig or self.kubeconfig}",
            # Discovery is cached per host:port; a port reused by a later session must not
            # see this one's CRDs (and ~/.kube stays untouched).
            f"--cache-dir={self.workdir / 'kubectl-cache'}",
            *args,
        ]

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        kubeconfig: Path | None = None,
        check: bool = True,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl (admin kubeconfig unless given); raise on failure if check."""
        argv = self.kubectl_argv(*args, kubeconfig=kubeconfig)
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise KubeHarnessError(
                f"kubectl {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr}{result.stdout}"
            )
        return result

    def wait_established(self, *targets: str, timeout: float = 60.0) -> None:
        """Wait until the CRDs ``targets`` name (``crd/NAME``, or ``-f FILE``) are Established. ``kubectl
        wait`` fails at once, rather than waiting, on a CRD whose ``status.conditions`` the API server has
        not written yet (an accessor error on nil); that answer is retried until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(1, round(deadline - time.monotonic()))
            result = self.kubectl(
                "wait", "--for=condition=Established", *targets, f"--timeout={left}s", check=False, timeout=left + 30
            )
            if result.returncode == 0:
                return
            if "accessor error" not in result.stderr or time.monotonic() >= deadline:
                raise KubeHarnessError(
                    f"kubectl wait --for=condition=Established {' '.join(targets)} failed "
                    f"(exit {result.returncode}):\n{result.stderr}{result.stdout}"
                )
            time.sleep(0.2)

    def service_account_token(
        self, namespace: str, name: str, audience: str | None = None, duration: str = "1h"
    ) -> str:
        """Mint a token for an existing ServiceAccount through the TokenRequest API."""
        args = ["create", "token", name, "-n", namespace, f"--duration={duration}"]
        if audience is not None:
            args.append(f"--audience={audience}")
        return self.kubectl(*args).stdout.strip()

    def http_client(self, token: str | None = None) -> httpx.Client:
        """An httpx client for the API server: admin client cert, or the bearer token if given."""
        if token is None:
            return httpx.Client(base_url=self.server, verify=self._ssl_context(), timeout=30.0)
        verify = ssl.create_default_context(cafile=str(self.ca_path))
        return httpx.Client(
            base_url=self.server,
            verify=verify,
            timeout=30.0,
            headers={"Authorization": f"Bearer {token}"},
        )

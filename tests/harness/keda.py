"""A real KEDA for tests: its CRDs, and its operator and metrics adapter as processes.

Everything comes from KEDA's own Go module at :data:`KEDA_VERSION`, as the Go module proxy serves
it: the CRDs from ``config/crd/bases`` (no build needed), the operator and the metrics adapter built
inside the module (its go.mod has ``replace`` directives, so ``go install …@version`` refuses) and
cached in ``$PRESAGE_CACHE/keda/<version>-<digest>`` (see :mod:`tests.harness.gobuild`).

:class:`Keda` runs both beside a :class:`~tests.harness.kube.KubeControlPlane` as its admin. There
is no kubelet and no kube-proxy, so the two Services KEDA's processes are known by cannot route;
instead the operator's metrics service listens on loopback and the adapter is told its address,
and the ``v1beta1.external.metrics.k8s.io`` APIService points at an ``ExternalName`` Service whose
name is ``127.0.0.1`` (the API server's aggregation layer dials an ExternalName Service's name at the
APIService's port). TLS is real throughout: one test CA signs the certificate that the operator's
gRPC server, the adapter's client and the adapter's API server present, and the APIService carries
that CA.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.harness.certs import issue
from tests.harness.gobuild import ensure_built, module_build, module_source
from tests.harness.kube import KubeControlPlane, KubeHarnessError
from tests.harness.process import ServerProcess, free_ports

KEDA_MODULE = "github.com/kedacore/keda/v2"
KEDA_VERSION = "v2.21.0"
NAMESPACE = "keda"
ADAPTER_SERVICE = "keda-metrics-apiserver"
EXTERNAL_METRICS_API = "v1beta1.external.metrics.k8s.io"


class KedaHarnessError(KubeHarnessError):
    """KEDA could not be downloaded, built or started; the message says why."""


def keda_crds() -> list[Path]:
    """KEDA's CRD files at :data:`KEDA_VERSION` (ScaledObject, TriggerAuthentication, ... and eventing's)."""
    crds = sorted(
        (module_source(KEDA_MODULE, KEDA_VERSION, KedaHarnessError) / "config" / "crd" / "bases").glob("*.yaml")
    )
    if not crds:
        raise KedaHarnessError(f"no CRDs in {KEDA_MODULE}@{KEDA_VERSION}'s config/crd/bases")
    return crds


def _crd_args() -> list[str]:
    return [arg for crd in keda_crds() for arg in ("-f", str(crd))]


def install_keda_crds(plane: KubeControlPlane) -> None:
    """Apply KEDA's CRDs and wait until the API server serves them."""
    # Server-side: ScaledObject's CRD is too large for client-side apply's last-applied annotation.
    plane.kubectl("apply", "--server-side", "--force-conflicts", *_crd_args())
    plane.wait_established(*_crd_args())


CRD_DELETION_TIMEOUT_SECONDS = 120.0
CRD_NUDGE_SECONDS = 5.0
"""How long a deleted CRD may stay before it is handed to the API server's CRD finalizer again."""


def uninstall_keda_crds(plane: KubeControlPlane) -> None:
    """Delete them (and with them every ScaledObject), waiting until the API server stops serving them.

    A CRD deleted soon after it was created can stay Terminating for minutes on v1.37: the API server's
    CRD finalizer lists its instances while the resource's storage is still initializing, fails with
    "storage is (re)initializing" and does not try again soon. Any change to a terminating CRD queues
    it for the finalizer again, so one still there after CRD_NUDGE_SECONDS gets a new annotation."""
    plane.kubectl("delete", *_crd_args(), "--ignore-not-found", "--wait=false")
    started = time.monotonic()
    nudges = 0
    while left := plane.kubectl("get", *_crd_args(), "--ignore-not-found", "-o", "name").stdout.split():
        waited = time.monotonic() - started
        if waited > CRD_DELETION_TIMEOUT_SECONDS:
            raise KedaHarnessError(f"KEDA's CRDs still there {waited:.0f} s after their deletion: {', '.join(left)}")
        if waited > CRD_NUDGE_SECONDS * (nudges + 1):
            nudges += 1
            plane.kubectl("annotate", *left, f"presage.test/finalize-again={nudges}", "--overwrite", check=False)
        time.sleep(0.5)


@dataclass(frozen=True)
class KedaBinaries:
    operator: Path
    adapter: Path


def ensure_keda_binaries() -> KedaBinaries:
    """The cached KEDA operator and metrics adapter, built first if needed (9-10 minutes cold on 2 shared cores)."""
    stamp = f"-s -w -X github.com/kedacore/keda/v2/version.Version={KEDA_VERSION.removeprefix('v')}"
    commands = {"keda-operator": "./cmd/operator", "keda-adapter": "./cmd/adapter"}
    build = module_build(
        "KEDA", "keda", KEDA_MODULE, KEDA_VERSION, commands, dict.fromkeys(commands, stamp), KedaHarnessError
    )
    final = ensure_built(build, KedaHarnessError)
    return KedaBinaries(operator=final / "keda-operator", adapter=final / "keda-adapter")


class Keda:
    """KEDA's operator and metrics adapter for ``plane``, serving ``external.metrics.k8s.io``."""

    READY_TIMEOUT_S = 120.0

    def __init__(self, plane: KubeControlPlane, binaries: KedaBinaries) -> None:
        self.plane = plane
        self.binaries = binaries
        self.workdir = plane.workdir / "keda"
        self.cert_dir = self.workdir / "certs"
        (
            self.operator_metrics_port,
            self.operator_probe_port,
            self.metrics_service_port,
            self.adapter_port,
            self.adapter_metrics_port,
        ) = free_ports(5)
        self.operator: ServerProcess | None = None
        self.adapter: ServerProcess | None = None

    def start(self) -> Keda:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ca = self._write_certificates()
        install_keda_crds(self.plane)
        if self.plane.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
            self.plane.kubectl("create", "namespace", NAMESPACE)
        try:
            self._start_operator()
            self._start_adapter()
            self._register_adapter(ca)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in (self.adapter, self.operator):
            if process is not None:
                process.stop()
        self.adapter = self.operator = None

    @property
    def running(self) -> bool:
        return all(p is not None and p.running for p in (self.operator, self.adapter))

    def operator_log(self) -> str:
        """Everything the operator logged so far (KEDA reports a scaler's errors only there)."""
        return self.operator.log_path.read_text(errors="replace") if self.operator is not None else ""

    def log_tails(self, chars: int = 4000) -> str:
        """The end of both processes' logs, for a failed test's report."""
        return "\n".join(
            f"--- {p.name} ({p.log_path}):\n{p.log_tail(chars)}" for p in (self.operator, self.adapter) if p is not None
        )

    # -- start-up

    def _write_certificates(self) -> bytes:
        """One CA; one certificate for the operator's gRPC server, the adapter's client and API server."""
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        ca = issue("presage-test-keda-ca", ca=True)
        hosts = ["127.0.0.1", "localhost", f"keda-operator.{NAMESPACE}.svc", f"{ADAPTER_SERVICE}.{NAMESPACE}.svc"]
        usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        issue("keda", ca, usage=usage, hosts=hosts).write(self.cert_dir / "tls.crt", self.cert_dir / "tls.key")
        (self.cert_dir / "ca.crt").write_bytes(ca.cert)
        return ca.cert

    def _env(self) -> dict[str, str]:
        return os.environ | {
            "KUBECONFIG": str(self.plane.kubeconfig),
            "WATCH_NAMESPACE": "",  # all namespaces
            "POD_NAMESPACE": NAMESPACE,  # what the Downward API sets in a cluster
            "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
        }

    def _start_operator(self) -> None:
        cmd = [
            str(self.binaries.operator),
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{self.operator_metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.operator_probe_port}",
            f"--metrics-service-bind-address=127.0.0.1:{self.metrics_service_port}",
            f"--cert-dir={self.cert_dir}",
            f"--ca-dir={self.cert_dir}",
            "--enable-cert-rotation=false",
            "--zap-log-level=info",
        ]
        self.operator = ServerProcess(
            "keda-operator", cmd, self.workdir / "keda-operator.log", error=KedaHarnessError, env=self._env()
        )
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        self.operator.wait_http(f"http://127.0.0.1:{self.operator_probe_port}/readyz", deadline)

    def _start_adapter(self) -> None:
        kubeconfig = str(self.plane.kubeconfig)
        cmd = [
            str(self.binaries.adapter),
            "--bind-address=127.0.0.1",
            f"--secure-port={self.adapter_port}",
            f"--cert-dir={self.cert_dir}",
            f"--tls-cert-file={self.cert_dir / 'tls.crt'}",
            f"--tls-private-key-file={self.cert_dir / 'tls.key'}",
            f"--metrics-service-address=127.0.0.1:{self.metrics_service_port}",
            f"--port={self.adapter_metrics_port}",
            f"--lister-kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
        ]
        self.adapter = ServerProcess(
            "keda-adapter", cmd, self.workdir / "keda-adapter.log", error=KedaHarnessError, env=self._env()
        )
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        self.adapter.wait_http(f"https://127.0.0.1:{self.adapter_port}/readyz", deadline)

    def _register_adapter(self, ca: bytes) -> None:
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": ADAPTER_SERVICE, "namespace": NAMESPACE},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "https", "port": self.adapter_port}],
            },
        }
        api_service = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": EXTERNAL_METRICS_API},
            "spec": {
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "service": {"name": ADAPTER_SERVICE, "namespace": NAMESPACE, "port": self.adapter_port},
                "caBundle": base64.b64encode(ca).decode(),
            },
        }
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, api_service]})
        self.plane.kubectl("apply", "-f", "-", input=body)
        self.plane.kubectl(
            "wait",
            "--for=condition=Available",
            f"apiservice/{EXTERNAL_METRICS_API}",
            f"--timeout={self.READY_TIMEOUT_S:.0f}s",
            timeout=self.READY_TIMEOUT_S + 10,
        )

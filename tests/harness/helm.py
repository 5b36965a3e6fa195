"""A real ``helm``, built from the Go module proxy at :data:`HELM_VERSION` and cached by version.

helm's module has no ``replace`` directives, but it is built the same way as KEDA (inside the module,
see :mod:`tests.harness.gobuild`), into ``$PRESAGE_CACHE/helm/<version>-<digest>``. v4.3 requires
the same ``k8s.io`` modules (v0.37.2) as ``tests/k8s``, so it reuses much of the API server's build
cache. :class:`Helm` runs it with its own configuration, cache and data directories, so no test
reads or writes ``~/.config/helm``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.gobuild import ensure_built, module_build
from tests.harness.kube import KubeHarnessError

HELM_MODULE = "helm.sh/helm/v4"
HELM_VERSION = "v4.3.2"
CHART = Path(__file__).resolve().parents[2] / "charts" / "presage"
IMAGES = {
    "scaler.image.repository": "registry.example.com/presage-scaler",
    "forecaster.image.repository": "registry.example.com/presage-forecaster",
}
"""The image repositories the chart requires (no registry publishes presage's images), as the docs
write them: every render and install passes them."""
IMAGE_FLAGS = [f"--set={value}={repository}" for value, repository in IMAGES.items()]


class HelmHarnessError(KubeHarnessError):
    """helm could not be built, or a helm command failed; the message says why."""


def ensure_helm() -> Path:
    """The cached ``helm`` binary, built first if needed."""
    version_pkg = "helm.sh/helm/v4/internal/version"
    stamp = f"-s -w -X {version_pkg}.version={HELM_VERSION} -X {version_pkg}.gitTreeState=clean"
    build = module_build(
        "helm", "helm", HELM_MODULE, HELM_VERSION, {"helm": "./cmd/helm"}, {"helm": stamp}, HelmHarnessError
    )
    return ensure_built(build, HelmHarnessError) / "helm"


class Helm:
    """``helm`` with a private home under ``workdir``, talking to ``kubeconfig``'s cluster when given."""

    def __init__(self, binary: Path, workdir: Path, kubeconfig: Path | None = None) -> None:
        self.binary = binary
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        workdir.mkdir(parents=True, exist_ok=True)

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``helm args...``; raise :class:`HelmHarnessError` with its output when it fails and ``check``."""
        env = {
            "HOME": str(self.workdir),
            "PATH": "/usr/bin:/bin",
            "HELM_CACHE_HOME": str(self.workdir / "cache"),
            "HELM_CONFIG_HOME": str(self.workdir / "config"),
            "HELM_DATA_HOME": str(self.workdir / "data"),
        }
        cluster = [f"--kubeconfig={self.kubeconfig}"] if self.kubeconfig else []
        result = subprocess.run(
            [str(self.binary), *args, *cluster],
            env=env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise HelmHarnessError(
                f"helm {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr}{result.stdout}"
            )
        return result

"""The real presage-forecaster, started over HTTP for integration tests.

The forecaster needs torch and ``timesfm``, which the scaler's ``.venv`` must never hold, so it
runs from its own virtual environment: ``$PRESAGE_CACHE/forecaster-venv/<key>`` (default cache
``~/.cache/presage``), where ``<key>`` hashes ``forecaster/pyproject.toml``, the Python version and
this recipe. The venv is built on first use under a file lock (parallel test processes wait for
one build) and holds only the package's *dependencies*: the package itself is imported from the
checkout through ``PYTHONPATH``, so code changes take effect without a rebuild and one cached venv
serves every clone.

Weights are never downloaded: :func:`build_checkpoint` writes a TimesFM 2.5 checkpoint with
random weights, by default with shrunk dimensions (``presage_forecaster.testing_checkpoint``), which
the server loads through its real loading path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.cache import cache_dir, exclusive
from tests.harness.process import LoopbackServer, run_checked

REPO = Path(__file__).resolve().parents[2]
FORECASTER_DIR = REPO / "forecaster"

# Bump to invalidate every cached venv when the recipe below changes.
_RECIPE_VERSION = "1"
_PIP_TIMEOUT = 3600  # the first torch install downloads a few GB


class ForecasterUnavailable(RuntimeError):
    """The forecaster's venv could not be built, or the server could not start."""


def _log(message: str) -> None:
    print(f"[forecaster-harness] {message}", file=sys.stderr, flush=True)


def venv_key() -> str:
    """The cache key: forecaster/pyproject.toml, the Python version and the recipe version."""
    digest = hashlib.sha256()
    digest.update((FORECASTER_DIR / "pyproject.toml").read_bytes())
    digest.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())
    digest.update(_RECIPE_VERSION.encode())
    return digest.hexdigest()[:16]


def dependencies() -> list[str]:
    """The requirement strings of ``forecaster/pyproject.toml``'s ``[project] dependencies``."""
    with (FORECASTER_DIR / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


_ensured: Path | str | None = None  # the venv's python, or the error message of a failed build


def ensure_forecaster_venv() -> Path:
    """The python of the cached forecaster venv, building the venv first when needed.

    The outcome, success or failure, is remembered for the rest of the process so a failed build
    is not retried by every test. Raises :class:`ForecasterUnavailable` with pip's output.
    """
    global _ensured
    if _ensured is None:
        try:
            _ensured = _ensure_venv()
        except ForecasterUnavailable as exc:
            _ensured = str(exc)
    if isinstance(_ensured, str):
        raise ForecasterUnavailable(_ensured)
    return _ensured


def _ensure_venv() -> Path:
    root = cache_dir("forecaster-venv")
    target = root / venv_key()
    python = target / "bin" / "python"
    marker = target / ".complete"
    if marker.exists():
        return python
    with exclusive(root / ".build.lock", f"building {target}"):
        if marker.exists():
            return python
        # A venv is not relocatable, so it is built in place; a leftover without the marker is
        # a build that was killed, and only the lock holder gets here.
        shutil.rmtree(target, ignore_errors=True)
        began = time.monotonic()
        _log(f"building the forecaster venv in {target} (torch and timesfm: several GB on first use)")
        _checked([sys.executable, "-m", "venv", str(target)], "creating the forecaster venv")
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
        _checked([*pip, "--upgrade", "pip"], "upgrading pip in the forecaster venv")
        _checked([*pip, *dependencies()], "installing forecaster/pyproject.toml's dependencies")
        marker.write_text(f"built in {time.monotonic() - began:.0f}s\n")
        _log(f"forecaster venv ready in {time.monotonic() - began:.0f}s")
    return python


def _checked(argv: list[str], what: str) -> None:
    run_checked(argv, error=ForecasterUnavailable, what=what, timeout=_PIP_TIMEOUT)


def forecaster_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for running the forecaster from the checkout: offline hub, package on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        PYTHONPATH=str(FORECASTER_DIR),
        HF_HUB_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra or {})
    return env


def build_checkpoint(python: Path, directory: Path, *, seed: int = 0, full_size: bool = False) -> Path:
    """Write a random TimesFM 2.5 checkpoint into ``directory``: small, or the 200M architecture
    with ``full_size`` (see testing_checkpoint)."""
    argv = [str(python), "-m", "presage_forecaster.testing_checkpoint", str(directory), "--seed", str(seed)]
    run_checked(
        [*argv, "--full-size"] if full_size else argv,
        error=ForecasterUnavailable,
        what=f"building the {'full-size' if full_size else 'tiny'} TimesFM checkpoint",
        timeout=900 if full_size else 300,
        env=forecaster_env(),
    )
    return directory


# --- the server ----------------------------------------------------------------------------


class ForecasterServer(LoopbackServer):
    """A ``presage-forecaster`` process on ``127.0.0.1:<port>``, loading ``model``.

    ``options`` are extra command-line flags (``--max-batch-size 8`` ...), ``env`` extra environment
    variables, ``cwd`` the working directory. :meth:`start` waits for ``/readyz`` unless
    ``wait_ready=False`` (to watch a slow load). Usable as a context manager.
    """

    name = "presage-forecaster"
    error = ForecasterUnavailable

    def __init__(
        self,
        python: Path,
        model: Path | str,
        *options: str,
        workdir: Path | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        super().__init__(workdir)
        self.python = python
        self.cwd = cwd
        self.model = model
        self.options = list(options)
        self.env = env or {}

    def command(self) -> list[str]:
        return [
            str(self.python),
            "-m",
            "presage_forecaster",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--model",
            str(self.model),
            *self.options,
        ]

    def start(self, timeout: float = 120.0, *, wait_ready: bool = True) -> ForecasterServer:
        """Start the server; with ``wait_ready`` return once ``/readyz`` answers 200."""
        began = time.monotonic()
        ready = ["/healthz", "/readyz"] if wait_ready else ["/healthz"]
        self.launch(self.command(), ready, began + timeout, env=forecaster_env(self.env), cwd=self.cwd)
        self.startup_seconds = time.monotonic() - began
        return self


def seasonal(n: int, *, level: float = 100.0, seed: int = 0) -> list[float]:
    """A noisy daily-ish pattern (period 48 points) around ``level``, reproducible by ``seed``."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return (level + 0.3 * level * np.sin(2 * np.pi * t / 48) + rng.normal(0, 0.02 * level, n)).tolist()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of the first sample ``name`` carrying ``labels``, in Prometheus text format (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return 0.0

"""The real presage-forecaster, started over HTTP for integration tests.

The forecaster needs torch and ``timesfm``, which the scaler's ``.venv`` must never hold, so it
runs from its own virtual environment: ``$PRESAGE_CACHE/forecaster-venv/<key>`` (default cache
``~/.cache/presage``), where ``<key>`` hashes ``forecaster/pyproject.toml``, the Python version and
this recipe. The venv is built on first use under a file lock (parallel test processes wait for
one build) and holds only the package's *dependencies*: the package itself is imported from the
checkout through ``PYTHONPATH``, so code changes take effect without a rebuild and one cached venv
serves every clone.

Weights are never downloaded: :func:`build_tiny_checkpoint` writes a TimesFM 2.5 checkpoint with
random weights and shrunk dimensions (``presage_forecaster.testing_checkpoint``), which the server
loads through its real loading path.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from types import TracebackType

import httpx

REPO = Path(__file__).resolve().parents[2]
FORECASTER_DIR = REPO / "forecaster"

# Bump to invalidate every cached venv when the recipe below changes.
_RECIPE_VERSION = "1"
_PIP_TIMEOUT = 3600  # the first torch install downloads a few GB


class ForecasterUnavailable(RuntimeError):
    """The forecaster's venv could not be built, or the server could not start."""


def _log(message: str) -> None:
    print(f"[forecaster-harness] {message}", file=sys.stderr, flush=True)


def _cache_root() -> Path:
    base = os.environ.get("PRESAGE_CACHE") or str(Path.home() / ".cache" / "presage")
    return Path(base) / "forecaster-venv"


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
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / venv_key()
    python = target / "bin" / "python"
    marker = target / ".complete"
    if marker.exists():
        return python
    with (root / ".build.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another process is building {target}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return python
        # A venv is not relocatable, so it is built in place; a leftover without the marker is
        # a build that was killed, and only the lock holder gets here.
        shutil.rmtree(target, ignore_errors=True)
        began = time.monotonic()
        _log(f"building the forecaster venv in {target} (torch and timesfm: several GB on first use)")
        _checked([sys.executable, "-m", "venv", str(target)], "creating the venv")
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
        _checked([*pip, "--upgrade", "pip"], "upgrading pip")
        _checked([*pip, *dependencies()], "installing forecaster/pyproject.toml's dependencies")
        marker.write_text(f"built in {time.monotonic() - began:.0f}s\n")
        _log(f"forecaster venv ready in {time.monotonic() - began:.0f}s")
    return python


def _checked(argv: list[str], what: str) -> None:
    result = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=_PIP_TIMEOUT, check=False
    )
    if result.returncode != 0:
        raise ForecasterUnavailable(
            f"{what} for the forecaster venv failed (exit {result.returncode}): {' '.join(argv)}\n"
            f"{result.stdout[-4000:]}"
        )


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


def build_tiny_checkpoint(python: Path, directory: Path, *, seed: int = 0) -> Path:
    """Write a small random TimesFM 2.5 checkpoint into ``directory`` (see testing_checkpoint)."""
    result = subprocess.run(
        [str(python), "-m", "presage_forecaster.testing_checkpoint", str(directory), "--seed", str(seed)],
        env=forecaster_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise ForecasterUnavailable(f"building the tiny TimesFM checkpoint failed:\n{result.stdout[-4000:]}")
    return directory


# --- the server ----------------------------------------------------------------------------

_running: set[ForecasterServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()


class ForecasterServer:
    """A ``presage-forecaster`` process on ``127.0.0.1:<port>``, loading ``model``.

    ``options`` are extra command-line flags (``--max-batch-size 8`` ...), ``env`` extra environment
    variables, ``cwd`` the working directory. :meth:`start` waits for ``/readyz`` unless
    ``wait_ready=False`` (to watch a slow load). Usable as a context manager.
    """

    def __init__(
        self,
        python: Path,
        model: Path | str,
        *options: str,
        workdir: Path | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.python = python
        self.cwd = cwd
        self.model = model
        self.options = list(options)
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="presage-forecaster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = env or {}
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._launches = 0
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

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
        if self.running:
            self.stop()
        began = time.monotonic()
        self._launches += 1
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.command(),
                env=forecaster_env(self.env),
                cwd=self.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # PDEATHSIG fires when the *thread* that forked exits, so only use it from the main one.
                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
            )
        _running.add(self)
        try:
            self.wait("/healthz", began + timeout)
            if wait_ready:
                self.wait("/readyz", began + timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def wait(self, path: str, deadline: float) -> None:
        """Poll ``path`` until it answers 200; fail when the process exits or the deadline passes."""
        while True:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise ForecasterUnavailable(f"presage-forecaster exited with {code}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}{path}", timeout=2.0).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise ForecasterUnavailable(f"presage-forecaster {path} not 200 in time:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); a no-op when not running."""
        process, self._process = self._process, None
        _running.discard(self)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def log_path(self) -> Path:
        return self.workdir / f"forecaster-{self._launches}.log"

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the latest server process's log."""
        path = self.log_path
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def __enter__(self) -> ForecasterServer:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def free_port() -> int:
    """A free loopback port (closed again: a server can take it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the child when the test process dies, so no server outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

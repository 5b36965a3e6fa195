"""Processes for integration tests: commands run to completion, and servers with a log file each,
a wait for HTTP 200 and a sure stop.

Every server started here is stopped when the interpreter exits, and Linux's PR_SET_PDEATHSIG
stops it when the test process is killed outright (no teardown, no atexit), so no server outlives
the test run.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

import httpx


def run_checked(
    argv: Sequence[str | PathLike[str]],
    *,
    error: type[Exception],
    what: str,
    timeout: float,
    env: dict[str, str] | None = None,
) -> str:
    """Run ``argv`` to completion and return its output (stdout and stderr together); raise
    ``error`` with the command and the output's tail when it fails."""
    result = subprocess.run(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        command = " ".join(str(arg) for arg in argv)
        raise error(f"{what} failed (exit {result.returncode}): {command}\n{result.stdout[-4000:]}")
    return result.stdout


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports.

    All sockets stay open until every port is picked, so the ports are distinct. They are released
    before the servers bind them: a collision with another process is possible but rare, and shows
    up as a start failure with the log tail.
    """
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """A free loopback port (closed again: a server can take it, and until then nothing listens)."""
    return free_ports(1)[0]


def tail(path: Path, chars: int = 4000) -> str:
    """The end of a log file; empty when there is none."""
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the child when the test process dies, so no server outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_running: set[ServerProcess] = set()


@atexit.register
def _stop_all() -> None:
    for process in list(_running):
        process.stop()


class ServerProcess:
    """One server process, its output appended to ``log_path``.

    ``name`` names it in messages; ``error`` is the exception :meth:`wait_http` raises when the
    process exits or does not come up in time.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str | PathLike[str]],
        log_path: Path,
        *,
        error: type[Exception],
        env: dict[str, str] | None = None,
        cwd: str | PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self.error = error
        self.reported = False  # the log tail was shown in an exception already
        with log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # PDEATHSIG fires when the *thread* that forked exits, so only use it from the main one.
                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
            )
        _running.add(self)

    @property
    def running(self) -> bool:
        return self._popen.poll() is None

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the process's log."""
        return tail(self.log_path, chars)

    def wait_http(
        self,
        url: str,
        deadline: float,
        *,
        verify: ssl.SSLContext | bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Poll ``url`` (with ``headers``) until it answers 200; raise ``error`` with the log tail when the
        process exits or the ``deadline`` (``time.monotonic()``) passes."""
        last = "no answer yet"
        with httpx.Client(verify=verify, timeout=5.0, headers=headers) as client:
            while True:
                if not self.running:
                    self.reported = True
                    raise self.error(f"{self.name} exited with {self.returncode} during start-up:\n{self.log_tail()}")
                try:
                    response = client.get(url)
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}: {response.text[-500:]}"
                except httpx.HTTPError as exc:
                    last = repr(exc)
                if time.monotonic() > deadline:
                    self.reported = True
                    raise self.error(f"{self.name}: {url} not 200 in time ({last}):\n{self.log_tail()}")
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; a no-op once the process has exited."""
        _running.discard(self)
        if self._popen.poll() is not None:
            return
        self._popen.terminate()
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait()


class LoopbackServer(ABC):
    """A server on ``127.0.0.1:<port>``, one process at a time, with a log per launch in ``workdir``.

    Restarts keep the port, so ``url`` stays valid. Subclasses set ``name`` (the program, in
    messages and file names) and ``error``, and :meth:`start` it through :meth:`launch`. Usable as
    a context manager.
    """

    name: ClassVar[str]
    error: ClassVar[type[Exception]]

    def __init__(self, workdir: Path | None = None, *, port: int | None = None) -> None:
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.startup_seconds: float | None = None
        self._process: ServerProcess | None = None
        self._launches = 0

    @abstractmethod
    def start(self) -> object:
        """Start the server and wait until it is ready."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def memory_kib(self, field: str) -> int:
        """A ``/proc/<pid>/status`` memory field of the running server: ``VmRSS`` now, ``VmHWM`` the
        peak so far."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith(f"{field}:"))
        return int(line.split()[1])

    @property
    def log_path(self) -> Path:
        """The latest launch's log."""
        return self.workdir / f"{self.name}-{self._launches}.log"

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the latest launch's log."""
        return tail(self.log_path, chars)

    def launch(
        self,
        argv: Sequence[str | PathLike[str]],
        ready: Sequence[str],
        deadline: float,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        """Start ``argv`` with a fresh log and :meth:`wait` for each path in ``ready``; stopped on failure."""
        self.stop()
        self._launches += 1
        self._process = ServerProcess(self.name, argv, self.log_path, error=self.error, env=env, cwd=cwd)
        try:
            for path in ready:
                self.wait(path, deadline)
        except BaseException:
            self.stop()
            raise

    def wait(self, path: str, deadline: float) -> None:
        """Poll ``path`` until it answers 200; fail when the process exits or the deadline passes."""
        if self._process is None:
            raise self.error(f"{self.name} is not running")
        self._process.wait_http(f"{self.url}{path}", deadline)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); a no-op when not running."""
        process, self._process = self._process, None
        if process is not None:
            process.stop(timeout)

    def __enter__(self) -> Self:
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

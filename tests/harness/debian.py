"""Debian packages the tests run (Prometheus, Chromium): found on PATH, else installed with apt-get.

One test process installs while the others wait on a lock. The outcome, the binaries or the error,
is remembered for the rest of the process, so a failed install is not retried by every test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.harness.cache import exclusive

_ensured: dict[str, tuple[str, ...] | str] = {}  # package -> its binaries, or why it could not be installed


class PackageUnavailable(RuntimeError):
    """A Debian package could not be installed, or installed without the binaries expected of it."""


def ensure_binaries(package: str, binaries: Sequence[str]) -> tuple[str, ...]:
    """Paths of ``binaries``, in order: from PATH (or /usr/bin), else after installing Debian's
    ``package`` with apt-get (as root, or with ``sudo -n``)."""
    if package not in _ensured:
        try:
            _ensured[package] = _find(binaries) or _apt_install(package, binaries)
        except PackageUnavailable as exc:
            _ensured[package] = str(exc)
    found = _ensured[package]
    if isinstance(found, str):
        raise PackageUnavailable(found)
    return found


def _find(binaries: Sequence[str]) -> tuple[str, ...] | None:
    found = [shutil.which(name) or shutil.which(name, path="/usr/bin") for name in binaries]
    return tuple(path for path in found if path) if all(found) else None


def _apt_install(package: str, binaries: Sequence[str]) -> tuple[str, ...]:
    names = "/".join(binaries)
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if (sudo and not shutil.which("sudo")) or not shutil.which("apt-get"):
        raise PackageUnavailable(
            f"{names} not on PATH and cannot be installed here (needs apt-get as root); "
            f"install Debian's {package!r} package or put {names} on PATH"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*sudo, "apt-get", "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300", package]
    lock = Path(tempfile.gettempdir()) / f"presage-apt-{package}.lock"
    with exclusive(lock, f"installing Debian's {package} package"):
        if found := _find(binaries):
            return found
        result = _run(install, env)
        if result.returncode != 0:
            update = _run([*sudo, "apt-get", "update", "-o", "DPkg::Lock::Timeout=300"], env)
            result = _run(install, env) if update.returncode == 0 else update
        if result.returncode != 0:
            raise PackageUnavailable(
                f"installing Debian's {package} package failed (exit {result.returncode}):\n{result.stdout[-3000:]}"
            )
    found = _find(binaries)
    if not found:
        raise PackageUnavailable(f"the {package} package installed, but {names} not on PATH")
    return found


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False
    )

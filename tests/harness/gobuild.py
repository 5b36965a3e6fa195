"""Go commands built from the Go module proxy and cached outside the clone, keyed by version.

A :class:`GoBuild` names a main module's source directory (``tests/k8s``, or a released module as
the proxy serves it: :func:`module_build`), the commands to build from it and a cache key (version
plus digest). :func:`ensure_built` returns ``$PRESAGE_CACHE/<cache>/<key>/`` holding the
binaries, building them first when missing: into a ``.tmp-*`` directory renamed into place (an
interrupted build leaves no half cache), under an exclusive lock, so that a second test process
waits for the first one's build instead of compiling the same thing twice.

Builds run inside the main module, so its ``replace`` directives apply (``go install m@v`` refuses a
module that has them, e.g. KEDA's), with ``-mod=readonly`` (the module's go.sum is complete: nothing
is resolved at build time), ``-trimpath`` and ``CGO_ENABLED=0`` (static binaries, no C compiler).
Go's own caches (``GOCACHE``, ``GOMODCACHE``) are the usual shared ones, so builds that share
dependencies at the same versions share compiled packages.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.cache import cache_dir, exclusive
from tests.harness.process import tail

# Bump to invalidate every cached build when the recipe below changes (kept at the value the
# Kubernetes cache was keyed with before this module existed, so that cache stays valid).
RECIPE_VERSION = "1"


def log(message: str) -> None:
    """One progress line on stderr, prefixed like the rest of the harness."""
    print(f"[go-build] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class GoBuild:
    """What to build and where it is cached.

    ``source`` returns the main module's directory (the one holding go.mod); it is called only when
    a build is needed, so a cached build never touches the network. ``commands`` maps output file
    names to packages; ``ldflags`` maps a file name to its linker flags (default ``-s -w``).
    """

    what: str  # for messages: "KEDA v2.21.0"
    cache: str  # a folder of $PRESAGE_CACHE
    key: str  # one build in that folder, e.g. "v2.21.0-<digest>"
    source: Callable[[], Path]
    commands: Mapping[str, str]
    ldflags: Mapping[str, str] = field(default_factory=dict)


def module_build(
    what: str,
    cache: str,
    module: str,
    version: str,
    commands: Mapping[str, str],
    ldflags: Mapping[str, str],
    error: type[Exception],
) -> GoBuild:
    """Commands of the released ``module@version``, built inside it as the proxy serves it.

    The key is ``<version>-<digest>``; the digest covers the module, the commands, their linker flags
    and the recipe, so a changed flag never reuses a stale build. ``ldflags`` are by file name;
    ``error`` is raised when the module cannot be downloaded.
    """
    recipe = json.dumps([module, version, sorted(commands.items()), sorted(ldflags.items()), RECIPE_VERSION])
    return GoBuild(
        what=f"{what} {version}",
        cache=cache,
        key=f"{version}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}",
        source=lambda: module_source(module, version, error),
        commands=commands,
        ldflags=ldflags,
    )


def find_go(error: type[Exception]) -> str:
    """The ``go`` command; ``error`` with what to do when there is none."""
    go = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(p, os.X_OK)), None
    )
    if go is None:
        raise error(
            "the `go` toolchain (>= 1.26) is not on PATH: the test harness builds its Kubernetes, KEDA and "
            "helm binaries from the Go module proxy. Install Go, or set PRESAGE_SKIP_KUBE=1 to skip the tests "
            "that need them."
        )
    return go


def module_source(module: str, version: str, error: type[Exception]) -> Path:
    """The directory of ``module@version`` in Go's module cache, downloaded from the proxy first if needed.

    The directory is read-only; builds run in it as the main module without writing to it.
    """
    go = find_go(error)
    env = dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off")
    # In an empty directory, outside any module: no go.mod of ours is consulted or changed.
    with tempfile.TemporaryDirectory(prefix="presage-go-download-") as empty:
        result = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    if result.returncode != 0 or "Dir" not in info:
        problem = info.get("Error") or result.stderr.strip() or result.stdout.strip()
        raise error(f"cannot download {module}@{version} from the Go module proxy: {problem}")
    return Path(info["Dir"])


def ensure_built(build: GoBuild, error: type[Exception]) -> Path:
    """The cache entry of ``build``, building it first when missing; ``error`` when the build fails."""
    root = cache_dir(build.cache)
    final = root / build.key
    if final.is_dir():
        return final
    # Another test process may be building the same thing: wait for it, then re-check.
    with exclusive(root / ".build.lock", f"building {build.what} into {root}"):
        if final.is_dir():
            return final
        # Leftovers of builds that were killed outright; only the lock holder builds.
        for stale in root.glob(".tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{build.key}-", dir=root))
        try:
            _build(find_go(error), build, tmp, error)
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared by users
            # rename() is atomic: readers see either no directory or a complete one.
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _build(go: str, build: GoBuild, out: Path, error: type[Exception]) -> None:
    env = dict(os.environ)
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly -buildvcs=false").strip()
    env["CGO_ENABLED"] = "0"
    print(file=sys.stderr)  # pytest prints the test name without a newline before this
    log(f"building {build.what} into {out.parent} (first time: many minutes)")
    started = time.monotonic()
    source = build.source()
    for name, package in build.commands.items():
        ldflags = build.ldflags.get(name, "-s -w")
        cmd = [go, "build", "-trimpath", f"-ldflags={ldflags}", "-o", str(out / name), package]
        _run_with_heartbeat(cmd, source, env, f"go build {name}", out / f"build-{name}.log", error)
    log(f"built {build.what} in {time.monotonic() - started:.0f}s")


def _run_with_heartbeat(
    cmd: list[str], cwd: Path, env: dict[str, str], what: str, log_path: Path, error: type[Exception]
) -> None:
    started = time.monotonic()
    with open(log_path, "w") as output:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
        while True:
            try:
                proc.wait(timeout=30)
                break
            except subprocess.TimeoutExpired:
                log(f"{what}: still compiling ({time.monotonic() - started:.0f}s)")
            except BaseException:
                proc.kill()
                proc.wait()
                raise
    if proc.returncode != 0:
        raise error(f"{what} failed (exit {proc.returncode}):\n{tail(log_path)}")
    log(f"{what}: done in {time.monotonic() - started:.0f}s")

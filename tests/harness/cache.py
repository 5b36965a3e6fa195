"""Builds the tests share across processes and clones: where they are cached, and who builds them.

The cache is ``$PRESAGE_CACHE`` (default ``~/.cache/presage``), outside the clone, so every clone
and every parallel test process reuses one build; an exclusive file lock makes one process build
while the others wait for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def cache_dir(name: str) -> Path:
    """``$PRESAGE_CACHE/<name>``, created when missing."""
    base = os.environ.get("PRESAGE_CACHE") or str(Path.home() / ".cache" / "presage")
    path = Path(base) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def exclusive(lock: Path, doing: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock``; while another test process holds it, say that
    it is ``doing`` (e.g. "building the forecaster venv in ...") and wait for it."""
    with lock.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[presage-harness] another test process is {doing}; waiting for it", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield

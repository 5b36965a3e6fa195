"""The ``--out`` directory the results go into: refused before a run spends any time when it cannot
hold them, created when missing, and any failure to write there said in one line naming the path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from presage_scaler.backtest.errors import BacktestError


def out_problem(out: Path) -> str | None:
    """Why ``--out`` cannot be the directory the results go into (created if missing), or None: a file
    where the directory or one above it would be, or a directory the user may not write in."""
    try:
        existing = next(path for path in (out, *out.parents) if path.exists())
    except OSError as err:
        return f"--out {out}: cannot look at {err.filename} ({err.strerror}); give a directory you can write to"
    if not existing.is_dir():
        if existing == out:
            return f"--out {out} is a file; give a directory (it is created if missing)"
        return f"--out {out}: {existing} is a file, not a directory; give a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out}: no permission to write in {existing}; give a directory you can write to"
    return None


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that cannot hold the results before the run spends any time."""
    problem = out_problem(out)
    if problem is not None:
        raise BacktestError(problem)


@contextmanager
def writing_into(out: Path) -> Iterator[None]:
    """Create ``--out`` and write into it; a failure to do either is a :class:`BacktestError` naming
    the flag and the path (never a bare ``[Errno 17] File exists``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        yield
    except OSError as err:
        reason = "no permission" if isinstance(err, PermissionError) else err.strerror
        raise BacktestError(
            out_problem(out)
            or f"--out {out}: cannot write {err.filename or out} ({reason}); give a directory you can write to"
        ) from None

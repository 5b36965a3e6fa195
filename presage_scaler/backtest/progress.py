"""A progress bar on stderr for long backtests: silent for short runs, one line per phase."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Self, TextIO

WIDTH = 30
DELAY_S = 0.5
"""A phase shorter than this prints nothing."""
REFRESH_S = 0.1


class ProgressBar:
    """Renders ``runner.Progress`` callbacks: ``phase [#####.....]  52%  22464/43200  4.1s``."""

    def __init__(self, stream: TextIO = sys.stderr, *, enabled: bool = True) -> None:
        self._stream = stream
        self._enabled = enabled
        self._phase: str | None = None
        self._began = 0.0
        self._drawn = 0.0
        self._visible = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.perf_counter()
        if phase != self._phase:
            self.close()
            self._phase, self._began, self._drawn = phase, now, 0.0
        if now - self._began < DELAY_S or (now - self._drawn < REFRESH_S and done < total):
            return
        self._drawn, self._visible = now, True
        share = min(done / total, 1.0) if total else 1.0
        filled = round(WIDTH * share)
        bar = "#" * filled + "." * (WIDTH - filled)
        self._stream.write(f"\r{phase:<14} [{bar}] {100 * share:3.0f}%  {done}/{total}  {now - self._began:.1f}s")
        self._stream.flush()

    def close(self) -> None:
        """End the current line, if one was drawn."""
        if self._visible:
            self._stream.write("\n")
            self._stream.flush()
        self._visible = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

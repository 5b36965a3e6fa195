"""How often the controller process runs CPython's cycle collector.

Every evaluation builds and drops JSON dicts, pydantic models and numpy arrays; nearly all of them
are freed by reference counting at once, but the cycle collector counts container allocations, not
garbage, so at CPython's default a busy controller runs it many times a second, walking objects that
are still alive. With YOUNG_THRESHOLD what reference counting frees never reaches it, and cycles
(rare here) wait a little longer. ``benchmarks/bench_controller.py`` reports the collector's CPU
per evaluation.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 20_000
"""Container allocations (net of those freed) between young-generation collections; CPython's
default is 700. The older generations keep their defaults (every 10 of the one below)."""


@contextlib.contextmanager
def collecting_less_often() -> Iterator[None]:
    """Raise the young generation's threshold to YOUNG_THRESHOLD while the block runs."""
    previous = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, previous[0]), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)

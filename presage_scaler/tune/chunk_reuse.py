"""One forecasting pass of a tuning run cut into chunks along the clock's days, each taken from a
:class:`~presage_scaler.tune.forecast_cache.ForecastStore` when it holds the chunk and forecast otherwise.

A chunk's numbers are a function of what its key digests (:func:`chunk_key`):

* the code that makes them (:func:`code_digest`, every source file of presage), the pass's spec but
  its signal's ``history`` and its ``advice`` (neither is read by a forecast: the history only sets
  how far back each decision reads, which the spans below say exactly), the lead time it resolved
  to, the backend's settings, the levels, the trace's step, the signal's ratio to it and the chunk
  size;
* the decisions' times on the clock and, per decision, the trace steps its history reads (its span);
* the trace's values and gaps over those steps (:meth:`presage_scaler.tune.days.Days.digest`).

So two passes that differ only in their history share every chunk whose decisions read the same
spans, as :func:`presage_scaler.tune.prepared.shared_decisions` counts for a run without a store, and
a later run takes every chunk whose decisions lie where it read the same history: every one but the
new day's where it reads before its lookback as :mod:`presage_scaler.tune.read_window` says. A
decision whose history is cut short by the trace's start reads a span that starts there, so a later
run takes its chunk when its trace starts there too (a scaler younger than what an advice reads,
whose history starts at its first sample) and forecasts it again otherwise. Chunks are counted from
each day's first decision (:meth:`~presage_scaler.tune.days.Days.chunks`), so a chunk holds the same
decisions in every run that makes all of them, and a run with an empty store makes exactly what a
run with a full one takes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from presage_scaler.backtest.replay import decisions_per_chunk
from presage_scaler.backtest.runner import Plan
from presage_scaler.tune.days import DIGEST_BYTES, Chunk, Days, chunk_size
from presage_scaler.tune.forecast_cache import Chunk as Stored
from presage_scaler.tune.forecast_cache import ForecastStore
from presage_scaler.tune.prepared import Forecasts, forecast, levels_for, points_read


@functools.cache
def code_digest() -> bytes:
    """A digest of every source file of the installed presage: a cache written by other code is never read."""
    root = Path(__file__).resolve().parents[1]  # presage_scaler/
    made = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for path in sorted(root.rglob("*.py")):
        made.update(str(path.relative_to(root)).encode())
        made.update(path.read_bytes())
    return made.digest()


def _identity(plan: Plan, backend: dict[str, object], levels: Sequence[float], size: int) -> bytes:
    wire = plan.spec.to_wire()
    wire.pop("advice", None)
    signal = dict(wire.get("signal") or {})
    signal.pop("history", None)
    wire["signal"] = signal
    named = {
        "spec": wire,
        "backend": backend,
        "levels": list(levels_for(plan, levels)),
        "asked": sorted(levels),
        "step": plan.trace.step.total_seconds(),
        "ratio": plan.ratio,
        "lead": plan.lead.value.total_seconds(),  # an Observed lead time is the setup's, not the spec's
        "chunk": size,
    }
    made = hashlib.blake2b(code_digest(), digest_size=DIGEST_BYTES)
    made.update(json.dumps(named, sort_keys=True, default=str).encode())
    return made.digest()


def chunk_key(identity: bytes, days: Days, plan: Plan, steps: range, points: int) -> bytes:
    """The key of the chunk of decisions at trace ``steps`` of a pass named ``identity`` whose decisions
    read at most ``points`` signal points (module docstring)."""
    ends = np.arange(steps.start, steps.stop, steps.step) // plan.ratio
    begins = np.maximum(ends - points, 0)
    made = hashlib.blake2b(identity, digest_size=DIGEST_BYTES)
    made.update(np.array([days.absolute(steps.start), len(steps), steps.step], dtype=np.int64).tobytes())
    made.update((begins * plan.ratio + days.origin).astype(np.int64).tobytes())
    made.update((ends * plan.ratio + days.origin).astype(np.int64).tobytes())
    made.update(days.digest(int(begins[0]) * plan.ratio, int(ends[-1]) * plan.ratio))
    return made.digest()


@dataclass(frozen=True)
class ChunkedPass:
    """A pass's decisions as chunks along the clock's days, with their keys."""

    plan: Plan
    levels: tuple[float, ...]
    size: int
    chunks: tuple[Chunk, ...]
    keys: tuple[bytes, ...]
    keep: tuple[bool, ...]

    @classmethod
    def of(cls, plan: Plan, backend: dict[str, object], levels: Sequence[float], days: Days) -> ChunkedPass:
        """``plan``'s decisions (a pass with the ForecastBackend spec ``backend``, wire form) forecast at
        ``levels``, cut along ``days``."""
        most = decisions_per_chunk(plan.spec, plan.signal_spec, plan.lead.value, plan.backend.max_horizon, levels)
        decisions = plan.schedule.decisions(len(plan.trace))
        size = chunk_size(max(1, days.per_day // decisions.step), most)
        identity = _identity(plan, backend, levels, size)
        chunks = tuple(days.chunks(decisions, size, earliest=plan.ratio))  # the decisions' grid starts there
        points = points_read(plan)
        return cls(
            plan=plan,
            levels=tuple(levels),
            size=size,
            chunks=chunks,
            keys=tuple(chunk_key(identity, days, plan, chunk.steps, points) for chunk in chunks),
            keep=tuple(chunk.complete for chunk in chunks),
        )

    def missing(self, store: ForecastStore) -> list[range]:
        """The decisions ``store`` does not hold, as runs that one forecasting call makes chunk by chunk
        alike: consecutive chunks, each but the last of them whole."""
        runs: list[list[Chunk]] = []
        for chunk, key in zip(self.chunks, self.keys, strict=True):
            if key in store.chunks:
                continue
            last = runs[-1][-1] if runs else None
            if last is not None and len(last.steps) == self.size and last.steps.stop == chunk.steps.start:
                runs[-1].append(chunk)
            else:
                runs.append([chunk])
        return [range(run[0].steps.start, run[-1].steps.stop, run[0].steps.step) for run in runs]

    def forecast(self, decisions: range, on_progress: Callable[[int], None] | None = None) -> Forecasts:
        """The forecasts of a run of :meth:`missing`, made here."""
        return forecast(self.plan, self.levels, on_progress=on_progress, decisions=decisions, chunk=self.size)

    def fill(self, store: ForecastStore, decisions: range, made: Forecasts) -> None:
        """Put the chunks of ``made``, the forecasts of the run ``decisions``, into ``store``."""
        row = 0
        for chunk, key, keep in zip(self.chunks, self.keys, self.keep, strict=True):
            if chunk.steps.start < decisions.start or chunk.steps.start >= decisions.stop:
                continue
            rows = slice(row, row + len(chunk.steps))
            store.put(key, Stored(made.windows[rows], made.bands[rows]), keep=keep)
            row = rows.stop

    def assemble(self, store: ForecastStore) -> Forecasts:
        """The pass's forecasts, every chunk from ``store`` (after :meth:`fill`), from its first decision
        on (a first chunk made whole holds earlier ones, :meth:`~presage_scaler.tune.days.Days.chunks`)."""
        found = []
        for key in self.keys:
            chunk = store.get(key)
            if chunk is None:
                raise KeyError("a chunk was neither in the store nor forecast")
            found.append(chunk)
        ordered = levels_for(self.plan, self.levels)
        width = len(ordered)
        windows = np.concatenate([c.windows for c in found]) if found else np.empty((0, width))
        bands = np.concatenate([c.bands for c in found]) if found else np.empty((0, width))
        if windows.shape[1] != width:
            raise ValueError(f"stored chunks hold {windows.shape[1]} levels, not {width}")
        decisions = self.plan.schedule.decisions(len(self.plan.trace))
        before = len(range(self.chunks[0].steps.start, decisions.start, decisions.step)) if self.chunks else 0
        return Forecasts(ordered, windows[before:], bands[before:])

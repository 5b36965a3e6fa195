"""What a tuning run keeps of its forecasts for the next run of the same scaler, and where.

A run forecasts its decisions chunk by chunk along the clock's days (:mod:`presage_scaler.tune.days`,
:mod:`presage_scaler.tune.chunk_reuse`); each chunk's numbers are named by a key that digests
everything they are made from (the code, the forecaster's settings, the decisions' times and the
history each reads, :func:`presage_scaler.tune.chunk_reuse.chunk_key`). Equal keys, equal numbers: a
later run takes a chunk whose key it finds and forecasts every other, so a spec change, a gap that
was filled since or a changed point only costs the chunks it touches, and a run with no cache makes
the same numbers.

:class:`ForecastStore` is one run's chunks in memory; :class:`ForecastCache` keeps one file per
scaler in a directory, the chunks its last run made that a later run can take again, and nothing
else:

* **bounded**: a file larger than ``max_bytes`` or FILE_BYTES is neither written nor read (nor
  inflated past that), so a run holds at most about twice that in memory; and after each write the
  oldest files go until the directory's files take at most ``max_bytes``;
* **safe**: a file is written whole (a temporary file renamed over it), holds no pickled object, and
  carries the digest of its contents and the scaler it belongs to; a file that is unreadable,
  foreign, truncated, for another scaler or that fails its digest is ignored (the run forecasts
  again) and replaced by the run's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from presage_scaler.tune.days import DIGEST_BYTES

LOG = logging.getLogger(__name__)

FORMAT = b"presage-forecast-cache/1"
"""Written first in every file; a file with any other is not read."""

DEFAULT_MAX_BYTES = 2 * 1024**3
"""The cache directory's size by default (``presage advise --cache-size``)."""

FILE_BYTES = 256 * 1024**2
"""The largest file read or written: one scaler's forecasts at a 28-day lookback and a one-minute
interval take about 21 MiB (``benchmarks/results/bench_readvice.md``), 85 MiB at 15 seconds."""

SUFFIX = ".npz"

_MEMBERS = ("format", "owner", "keys", "rows", "windows", "bands", "digest")


@dataclass(frozen=True)
class Chunk:
    """One chunk's forecasts (:class:`presage_scaler.tune.prepared.Forecasts`' arrays, its rows)."""

    windows: np.ndarray
    bands: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.windows.nbytes + self.bands.nbytes)


@dataclass
class ForecastStore:
    """Chunks by key: those read from the cache and those made by this run. What :meth:`ForecastCache.save`
    writes is :attr:`kept`: the chunks this run used that a later run can take again, so a file never holds
    more than one run's."""

    chunks: dict[bytes, Chunk] = field(default_factory=dict)
    used: int = 0
    """Chunks a run took from here (:meth:`get`), those it made itself included."""
    made: int = 0
    """Chunks made by this run (:meth:`put`)."""
    _keepable: set[bytes] = field(default_factory=set, repr=False)
    _kept: dict[bytes, None] = field(default_factory=dict, repr=False)

    @classmethod
    def holding(cls, chunks: dict[bytes, Chunk]) -> ForecastStore:
        """A store of chunks a later run can take again (read from the cache)."""
        return cls(chunks=dict(chunks), _keepable=set(chunks))

    @property
    def kept(self) -> list[bytes]:
        return list(self._kept)

    def keep_all(self) -> None:
        """Keep every chunk a later run can take, used by this run or not (a run that stopped early)."""
        self._kept.update(dict.fromkeys(key for key in self.chunks if key in self._keepable))

    def get(self, key: bytes) -> Chunk | None:
        found = self.chunks.get(key)
        if found is not None:
            self.used += 1
            if key in self._keepable:
                self._kept[key] = None
        return found

    def put(self, key: bytes, chunk: Chunk, *, keep: bool) -> None:
        """Hold ``chunk`` under ``key``; ``keep``: a later run can take it again (it is written)."""
        self.made += 1
        self.chunks[key] = chunk
        if keep:
            self._keepable.add(key)
            self._kept[key] = None


def _digest(keys: np.ndarray, rows: np.ndarray, windows: np.ndarray, bands: np.ndarray, owner: bytes) -> bytes:
    made = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for part in (FORMAT, owner, keys.tobytes(), rows.tobytes(), windows.tobytes(), bands.tobytes()):
        made.update(len(part).to_bytes(8, "little"))
        made.update(part)
    return made.digest()


def _encode(store: ForecastStore, owner: bytes) -> bytes:
    kept = [key for key in store.kept if key in store.chunks]
    chunks = [store.chunks[key] for key in kept]
    levels = {c.windows.shape[1] for c in chunks}
    if len(levels) > 1:  # one run forecasts every setting at the same levels
        raise ValueError(f"chunks at different numbers of levels: {sorted(levels)}")
    width = levels.pop() if levels else 0
    keys = np.frombuffer(b"".join(kept), dtype=np.uint8).reshape(len(kept), DIGEST_BYTES)
    rows = np.array([len(c.windows) for c in chunks], dtype=np.int64)
    windows = np.concatenate([c.windows for c in chunks]) if chunks else np.empty((0, width))
    bands = np.concatenate([c.bands for c in chunks]) if chunks else np.empty((0, width))
    windows, bands = windows.astype(np.float64), bands.astype(np.float64)
    buffer = io.BytesIO()
    np.savez(
        buffer,
        format=np.frombuffer(FORMAT, dtype=np.uint8),
        owner=np.frombuffer(owner, dtype=np.uint8),
        keys=keys,
        rows=rows,
        windows=windows,
        bands=bands,
        digest=np.frombuffer(_digest(keys, rows, windows, bands, owner), dtype=np.uint8),
    )
    return buffer.getvalue()


def _decode(data: bytes, owner: bytes, max_bytes: int) -> ForecastStore | None:
    """The store a file holds; None when it is not one of ours for ``owner``, whole and intact."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        names = sorted(info.filename for info in infos)
        if names != sorted(f"{name}.npy" for name in _MEMBERS):
            return None
        if sum(info.file_size for info in infos) > max_bytes:  # never inflate more than the bound
            return None
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        arrays = {name: loaded[name] for name in _MEMBERS}
    if arrays["format"].tobytes() != FORMAT or arrays["owner"].tobytes() != owner:
        return None
    keys, rows, windows, bands = arrays["keys"], arrays["rows"], arrays["windows"], arrays["bands"]
    well_formed = (
        keys.dtype == np.uint8
        and keys.ndim == 2
        and keys.shape[1] == DIGEST_BYTES
        and rows.dtype == np.int64
        and rows.shape == (len(keys),)
        and bool((rows > 0).all())
        and windows.dtype == np.float64
        and windows.ndim == 2
        and bands.shape == windows.shape
        and bands.dtype == np.float64
        and int(rows.sum()) == len(windows)
    )
    if not well_formed or arrays["digest"].tobytes() != _digest(keys, rows, windows, bands, owner):
        return None
    chunks = {}
    begin = 0
    for key, count in zip(keys, rows.tolist(), strict=True):
        end = begin + count
        chunks[key.tobytes()] = Chunk(windows[begin:end], bands[begin:end])
        begin = end
    return ForecastStore.holding(chunks)


@contextlib.contextmanager
def reusing(cache: ForecastCache | None, scaler: str) -> Iterator[ForecastStore | None]:
    """The store of ``scaler``'s last run (None without a cache), kept for its next run when the block
    ends: what a run that finished used, and after one that failed (a deadline passed) and made chunks,
    those besides all it read, so that a run that stops early never keeps less than the one before."""
    if cache is None:
        yield None
        return
    store = cache.load(scaler)
    finished = False
    try:
        yield store
        finished = True
    finally:
        if not finished and store.made:
            store.keep_all()
        if finished or store.made:
            cache.save(scaler, store)


def cache_name(metadata: Mapping[str, Any]) -> str:
    """The name a scaler's forecasts are kept under: its uid (a scaler deleted and created again starts
    afresh), or its namespace/name where it has none."""
    uid = metadata.get("uid")
    return f"uid:{uid}" if uid else f"name:{metadata.get('namespace')}/{metadata.get('name')}"


@dataclass(frozen=True)
class ForecastCache:
    """One file per scaler under ``directory``, all of them at most ``max_bytes``."""

    directory: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def _file_bytes(self) -> int:
        return min(self.max_bytes, FILE_BYTES)

    def _path(self, owner: bytes) -> Path:
        return self.directory / f"{hashlib.blake2b(owner, digest_size=DIGEST_BYTES).hexdigest()}{SUFFIX}"

    def load(self, scaler: str) -> ForecastStore:
        """What the last run for ``scaler`` (a name that stays the scaler's, e.g. its uid) kept; an empty
        store when there is none or it cannot be trusted (module docstring)."""
        owner = scaler.encode()
        path = self._path(owner)
        try:
            if path.stat().st_size > self._file_bytes:
                LOG.warning("forecast cache: ignoring %s: larger than %d bytes", path, self._file_bytes)
                return ForecastStore()
            found = _decode(path.read_bytes(), owner, self._file_bytes)
        except FileNotFoundError:
            return ForecastStore()
        except Exception as exc:  # any file that cannot be read as ours means: forecast again
            LOG.warning("forecast cache: ignoring %s: %s: %s", path, type(exc).__name__, exc)
            return ForecastStore()
        if found is None:
            LOG.warning("forecast cache: ignoring %s: not a cache file for this scaler", path)
            return ForecastStore()
        return found

    def save(self, scaler: str, store: ForecastStore) -> None:
        """Keep ``store``'s kept chunks for ``scaler``'s next run (replacing what was kept before), then
        bound the directory. A failure to write is logged, never raised: the next run forecasts again."""
        owner = scaler.encode()
        path = self._path(owner)
        try:
            data = _encode(store, owner)
            self.directory.mkdir(parents=True, exist_ok=True)
            if len(data) > self._file_bytes:
                path.unlink(missing_ok=True)
                return
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".writing-", suffix=SUFFIX)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.replace(temporary, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
            self._bound(keep=path)
            LOG.info(
                "forecast cache: %s: made %d of the %d forecast chunks used, kept %d",
                scaler,
                store.made,
                store.used,
                len(store.kept),
            )
        except OSError as exc:
            LOG.warning("forecast cache: cannot write %s: %s", path, exc)

    def _bound(self, keep: Path) -> None:
        """Remove the least recently written files until the directory's take at most ``max_bytes``."""
        files = []
        for each in self.directory.glob(f"*{SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):
                stat = each.stat()
                files.append((stat.st_mtime_ns, stat.st_size, each))
        total = sum(size for _, size, _ in files)
        for _, size, each in sorted(files, key=lambda f: (f[2] == keep, f[0])):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                each.unlink()
            total -= size

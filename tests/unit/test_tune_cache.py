"""A re-advice that reuses the previous run's forecasts chooses exactly as a run from nothing: a day
later, after a restart (a new process reading the cache), after a spec change and after the data
changed; and the cache file is bounded and never trusted when it is not whole and ours."""

from __future__ import annotations

import csv
import itertools
import multiprocessing
import zipfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from presage_scaler.backtest.config import Overrides, backend_spec, scaler_spec
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune import forecast_cache
from presage_scaler.tune.forecast_cache import Chunk, ForecastCache, ForecastStore, reusing
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import TuneResult, TuneSetup, tune
from tests.unit.test_tune_parts import DAY, daily_trace

OVERRIDES = Overrides(per_replica=20.0, lead_time=timedelta(minutes=10), max_replicas=200)
REAL_TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "nab_nyc_taxi_30m.csv"
"""A real trace (the repository's benchmarks' traces), for the test that needs one."""


def read_real(path: Path) -> Trace:
    """The real trace as it is: a regular series, its first time on a whole day of the clock."""
    with path.open() as lines:
        rows = list(csv.reader(lines))[1:]
    times = [datetime.fromisoformat(row[0]).replace(tzinfo=UTC) for row in rows]
    step = times[1] - times[0]
    assert all(later - earlier == step for earlier, later in itertools.pairwise(times))
    values = np.array([float(row[1]) for row in rows])
    return Trace(values, step, times[0], np.zeros(len(values), dtype=bool), path.name)


LATER = 7
"""Steps past a whole day between yesterday's run and today's, as a CronJob's runs drift."""


def window(trace: Trace, first_day: int, days: int) -> Trace:
    """``days`` of ``trace`` from the start of its ``first_day``-th day (LATER steps later after the
    first day)."""
    begin = first_day * DAY + (LATER if first_day else 0)
    end = begin + days * DAY
    return replace(
        trace, values=trace.values[begin:end], gaps=trace.gaps[begin:end], start=trace.start + begin * trace.step
    )


def setup_for(trace: Trace, **changes: object) -> TuneSetup:
    """The scaler's stored spec is fixed (as in the cluster), not derived from each run's trace."""
    spec = scaler_spec(trace, None, OVERRIDES).to_wire()
    spec["forecast"] = {"horizon": "30m"}
    spec["signal"]["history"] = "48h"  # decisions that read all of theirs within both days' traces
    made = TuneSetup(
        spec=spec, overrides=Overrides(), backend=backend_spec(None), slo=Slo(1.0), warmup=timedelta(days=2)
    )
    return replace(made, **changes)


def same_choices(warm: TuneResult, cold: TuneResult) -> None:
    assert warm.trials == cold.trials  # every candidate's figures, in-sample and held out
    assert warm.chosen == cold.chosen
    assert warm.trigger == cold.trigger
    assert warm.split == cold.split


@pytest.fixture(scope="module")
def trace() -> Trace:
    return daily_trace(11, seed=5)


@pytest.fixture(scope="module")
def yesterday(trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> ForecastCache:
    """Yesterday's run from nothing, its forecasts kept in a cache directory."""
    cache = ForecastCache(tmp_path_factory.mktemp("cache"))
    store = ForecastStore()
    tune(window(trace, 0, 9), setup_for(trace), store=store)
    assert 0 < store.made <= store.used and store.kept  # made (a chunk two passes share, once); some kept
    cache.save("shop/web", store)
    return cache


@pytest.fixture(scope="module")
def cold_today(trace: Trace) -> tuple[TuneResult, ForecastStore]:
    """Today's run, a day later, from nothing."""
    store = ForecastStore()
    return tune(window(trace, 1, 9), setup_for(trace), store=store), store


@pytest.fixture(scope="module")
def warm_today(trace: Trace, yesterday: ForecastCache) -> tuple[TuneResult, ForecastStore]:
    """Today's run, a day later, from what yesterday's kept."""
    store = yesterday.load("shop/web")
    return tune(window(trace, 1, 9), setup_for(trace), store=store), store


def test_a_day_later_the_run_takes_the_unchanged_days_and_chooses_as_from_nothing(cold_today, warm_today):
    (warm, warm_store), (cold, cold_store) = warm_today, cold_today
    same_choices(warm, cold)
    assert 0 < warm_store.made < cold_store.made  # the days read alike were taken, the new ones made


def test_passes_forecast_in_workers_choose_as_those_forecast_here(trace, cold_today):
    """With two jobs every pass after the first is forecast in a worker process, from its wire form,
    chunk by chunk into the store: the run chooses as the one forecast here."""
    store = ForecastStore()
    same_choices(tune(window(trace, 1, 9), setup_for(trace, jobs=2), store=store), cold_today[0])
    assert store.made > 0


def _tune_in_a_new_process(directory: Path, today: Trace, setup: TuneSetup) -> tuple[TuneResult, int, int]:
    store = ForecastCache(directory).load("shop/web")
    result = tune(today, setup, store=store)
    return result, store.made, store.used


def test_a_new_process_reads_the_cache_and_chooses_as_from_nothing(trace, yesterday, cold_today, warm_today):
    today = window(trace, 1, 9)
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        warm, made, _ = pool.apply(_tune_in_a_new_process, (yesterday.directory, today, setup_for(trace)))
    same_choices(warm, cold_today[0])
    assert made == warm_today[1].made < cold_today[1].made


def test_a_spec_change_forecasts_again(trace, yesterday):
    setup = setup_for(trace)
    assert setup.spec is not None
    changed = replace(setup, spec={**setup.spec, "forecast": {"horizon": "40m"}})
    today = window(trace, 1, 9)
    store = yesterday.load("shop/web")
    tune(today, changed, store=store)
    # None of yesterday's chunks taken (so the run is one from nothing): all it holds besides are its own.
    assert store.made == len(store.chunks) - len(yesterday.load("shop/web").chunks)


def test_changed_data_and_a_gap_are_forecast_again(trace, yesterday, warm_today):
    today = window(trace, 1, 9)
    values, gaps = today.values.copy(), today.gaps.copy()
    values[5 * DAY + 17] += 500.0  # a point that changed since yesterday's run read it
    gaps[6 * DAY + 40 : 6 * DAY + 52] = True  # and a gap, filled as the trace reader fills one
    values[6 * DAY + 40 : 6 * DAY + 52] = values[6 * DAY + 39]
    changed = replace(today, values=values, gaps=gaps)
    store = yesterday.load("shop/web")
    warm = tune(changed, setup_for(trace), store=store)
    assert store.made > warm_today[1].made  # the chunks that read the changed days were made again
    same_choices(warm, tune(changed, setup_for(trace), store=ForecastStore()))


@pytest.mark.skipif(not REAL_TRACE.exists(), reason=f"the benchmarks' traces are not at {REAL_TRACE.parent}")
def test_a_day_later_on_a_real_trace_slice(tmp_path):
    real = read_real(REAL_TRACE)
    day = int(timedelta(days=1) / real.step)
    start = (-(real.start - real.start.replace(hour=0, minute=0, second=0))) % timedelta(days=1) // real.step
    spec = scaler_spec(
        real, None, Overrides(per_replica=float(np.percentile(real.values, 99)) / 20, lead_time=timedelta(minutes=5))
    )
    setup = TuneSetup(
        spec=spec.to_wire(), overrides=Overrides(), backend=backend_spec(None), slo=Slo(1.0), warmup=timedelta(days=2)
    )

    def days(first: int, count: int) -> Trace:
        begin, end = start + first * day, start + (first + count) * day
        return replace(
            real, values=real.values[begin:end], gaps=real.gaps[begin:end], start=real.start + begin * real.step
        )

    cache = ForecastCache(tmp_path)
    store = ForecastStore()
    tune(days(0, 25), setup, store=store)
    cache.save("taxi", store)
    warm_store = cache.load("taxi")
    warm = tune(days(1, 25), setup, store=warm_store)
    cold_store = ForecastStore()
    same_choices(warm, tune(days(1, 25), setup, store=cold_store))
    assert warm_store.made < cold_store.made


# --- the file --------------------------------------------------------------------------------------


def a_store(rows: int = 6, levels: int = 3, keys: int = 2, zeros: bool = False) -> ForecastStore:
    store = ForecastStore()
    rng = np.random.default_rng(1)
    for index in range(keys):
        key = bytes([index]) * 16
        made = (np.zeros if zeros else rng.random)((rows, levels))
        store.put(key, Chunk(made, made + 1.0), keep=True)
    store.put(b"\xff" * 16, Chunk(np.zeros((rows, levels)), np.zeros((rows, levels))), keep=False)
    return store


def test_the_file_holds_the_kept_chunks_exactly(tmp_path):
    store = a_store()
    cache = ForecastCache(tmp_path)
    cache.save("a", store)
    loaded = cache.load("a")
    assert set(loaded.chunks) == set(store.kept) and b"\xff" * 16 not in loaded.chunks
    for key in store.kept:
        assert np.array_equal(loaded.chunks[key].windows, store.chunks[key].windows)
        assert np.array_equal(loaded.chunks[key].bands, store.chunks[key].bands)
    assert cache.load("b").chunks == {}  # another scaler's file name; none there


def cache_file(cache: ForecastCache) -> Path:
    (found,) = cache.directory.glob("*.npz")
    return found


@pytest.mark.parametrize(
    "spoil",
    [
        lambda data: b"not a zip at all",
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: data[:200] + bytes([data[200] ^ 0xFF]) + data[201:],  # a flipped byte
        lambda data: b"",
    ],
)
def test_a_corrupt_file_is_ignored(tmp_path, spoil, caplog):
    cache = ForecastCache(tmp_path)
    cache.save("a", a_store())
    path = cache_file(cache)
    path.write_bytes(spoil(path.read_bytes()))
    assert cache.load("a").chunks == {}
    assert "ignoring" in caplog.text


def saved_arrays(cache: ForecastCache) -> tuple[Path, dict[str, np.ndarray]]:
    """Scaler "a"'s store saved in ``cache``: its file, and the arrays in it."""
    cache.save("a", a_store())
    path = cache_file(cache)
    with np.load(path) as loaded:
        return path, {name: loaded[name] for name in loaded.files}


def rewrite(path: Path, **arrays: np.ndarray) -> None:
    """Replace the file at ``path`` with an npz of ``arrays``."""
    np.savez(path.with_suffix(".tmp.npz"), **arrays)
    path.with_suffix(".tmp.npz").replace(path)


def test_a_foreign_or_tampered_file_is_ignored(tmp_path):
    cache = ForecastCache(tmp_path)
    path, arrays = saved_arrays(cache)
    rewrite(path, other=np.arange(3))
    assert cache.load("a").chunks == {}  # an npz that is not ours
    arrays["windows"] = arrays["windows"] + 1.0  # numbers changed, digest kept
    rewrite(path, **arrays)
    assert cache.load("a").chunks == {}
    arrays["owner"] = np.frombuffer(b"b", dtype=np.uint8)  # another scaler's file under this name
    rewrite(path, **arrays)
    assert cache.load("a").chunks == {}


def test_a_pickle_is_never_loaded(tmp_path):
    cache = ForecastCache(tmp_path)
    path, arrays = saved_arrays(cache)
    arrays["keys"] = np.array([object()], dtype=object)
    rewrite(path, **arrays)
    assert cache.load("a").chunks == {}


def test_a_file_that_would_inflate_past_the_bound_is_not_read(tmp_path):
    cache = ForecastCache(tmp_path)
    cache.save("a", a_store(rows=2000, zeros=True))
    small = ForecastCache(tmp_path, max_bytes=20_000)
    path = cache_file(cache)
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:  # small on disk, large inflated
        for name, data in members.items():
            archive.writestr(name, data)
    assert path.stat().st_size < 20_000  # what a bound on the file's size alone would let through
    assert small.load("a").chunks == {}
    assert cache.load("a").chunks  # within its own bound it is read


def test_the_directory_stays_within_its_bound(tmp_path):
    cache = ForecastCache(tmp_path, max_bytes=60_000)
    for name in "abcdef":
        cache.save(name, a_store(rows=400))  # about 38 kB a file
        total = sum(p.stat().st_size for p in tmp_path.iterdir())
        assert total <= 60_000
    assert cache.load("f").chunks  # the newest stays
    assert not cache.load("a").chunks  # the oldest went
    too_big = ForecastCache(tmp_path, max_bytes=10_000)
    too_big.save("g", a_store(rows=400))
    assert not too_big.load("g").chunks
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 60_000


def test_an_unwritable_directory_is_not_an_error(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("")
    cache = ForecastCache(blocked / "cache")
    cache.save("a", a_store())  # logged, not raised: the next run forecasts again
    assert "cannot write" in caplog.text
    assert cache.load("a").chunks == {}


def test_no_file_beyond_the_largest_one_scaler_needs(tmp_path, monkeypatch):
    cache = ForecastCache(tmp_path)
    cache.save("a", a_store(rows=400))
    monkeypatch.setattr(forecast_cache, "FILE_BYTES", 10_000)  # below the file: never read into memory
    assert cache.load("a").chunks == {}
    cache.save("b", a_store(rows=400))
    assert not cache.load("b").chunks and len(list(tmp_path.glob("*.npz"))) == 1


class Stopped(Exception):
    """What a deadline passing mid-run raises from the progress report."""


def test_a_run_stopped_early_keeps_what_it_made_and_what_it_read(trace, tmp_path):
    cache = ForecastCache(tmp_path)
    with reusing(cache, "a") as store:
        assert store is not None
        tune(window(trace, 0, 9), setup_for(trace), store=store)
    before = set(cache.load("a").chunks)
    reports = []

    def stop_at_the_second_pass(step: str, done: int, total: int) -> None:
        reports.append(step)
        if len(set(reports)) > 1:  # a deadline passing once the first setting is forecast
            raise Stopped

    with pytest.raises(Stopped), reusing(cache, "a") as store:
        assert store is not None
        tune(window(trace, 1, 9), setup_for(trace), stop_at_the_second_pass, store=store)
    assert store.made > 0
    after = set(cache.load("a").chunks)
    assert before < after  # nothing it read lost, what it made kept
    with pytest.raises(Stopped), reusing(cache, "a") as store:
        raise Stopped  # stopped before making anything: the file stays as it was
    assert set(cache.load("a").chunks) == after
    assert ForecastCache(tmp_path / "none").load("a").chunks == {}
    with reusing(None, "a") as nothing:
        assert nothing is None

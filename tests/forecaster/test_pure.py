"""Table and property tests of the forecaster's torch-free parts: quantile treatment, request format, settings."""

from __future__ import annotations

import asyncio
import itertools
import threading
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from presage_forecaster import protocol, quantiles
from presage_forecaster.batching import MicroBatcher, Overloaded
from presage_forecaster.metrics import Metrics
from presage_forecaster.settings import Settings, parse_settings

SETTINGS = Settings(model="/weights", max_context=16, max_horizon=8, max_series_per_request=3)


def normal_deciles(mu: float, sigma: float, steps: int = 3) -> np.ndarray:
    row = [NormalDist(mu, sigma).inv_cdf(q) for q in quantiles.MODEL_LEVELS]
    return np.tile(row, (steps, 1))


@pytest.mark.parametrize(
    ("level", "source", "lower", "upper"),
    [
        (0.1, "model", 0.1, 0.1),
        (0.5, "model", 0.5, 0.5),
        (0.9, "model", 0.9, 0.9),
        (0.25, "interpolated", 0.2, 0.3),
        (0.75, "interpolated", 0.7, 0.8),
        (0.95, "extrapolated", 0.8, 0.9),
        (0.99, "extrapolated", 0.8, 0.9),
        (0.05, "extrapolated", 0.1, 0.2),
        (0.01, "extrapolated", 0.1, 0.2),
    ],
)
def test_treatment_table(level, source, lower, upper):
    [t] = quantiles.plan([level])
    assert (t.source, t.lower, t.upper) == (source, lower, upper)
    assert t.key == format(level, "g")


@pytest.mark.parametrize("level", [0.01, 0.05, 0.15, 0.25, 0.5, 0.62, 0.75, 0.9, 0.95, 0.975, 0.99])
def test_treatment_is_exact_for_a_normal_forecast(level):
    """Interpolating and extrapolating linearly in z recovers a normal distribution's quantiles."""
    deciles = normal_deciles(100.0, 15.0)
    [t] = quantiles.plan([level])
    values = quantiles.apply(t, deciles, deciles[:, 4])
    assert values == pytest.approx(NormalDist(100.0, 15.0).inv_cdf(level), rel=1e-9)


@given(
    levels=st.lists(st.floats(min_value=0.01, max_value=0.99), min_size=2, max_size=10),
    widths=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=9, max_size=9),
)
def test_treated_levels_are_non_decreasing(levels, widths):
    deciles = np.cumsum(widths)[np.newaxis, :]  # any non-decreasing deciles
    treatments = sorted(quantiles.plan(levels), key=lambda t: t.level)
    values = [quantiles.apply(t, deciles, deciles[:, 4])[0] for t in treatments]
    assert all(a <= b + 1e-9 * max(1.0, abs(b)) for a, b in itertools.pairwise(values))


def test_point_only_serves_the_point_for_every_level():
    deciles = normal_deciles(10.0, 2.0)
    point = deciles[:, 4]
    for t in quantiles.plan([0.1, 0.9, 0.99], use_quantile_head=False):
        assert t.source == "point"
        assert np.array_equal(quantiles.apply(t, deciles, point), point)


def test_duplicate_levels_collapse_in_request_order():
    assert [t.key for t in quantiles.plan([0.9, 0.5, 0.9, 0.50])] == ["0.9", "0.5"]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("p95", "UnknownQuantileFormat"),
        ("95%", "UnknownQuantileFormat"),
        (True, "UnknownQuantileFormat"),
        (None, "UnknownQuantileFormat"),
        ([0.5], "UnknownQuantileFormat"),
        (0, "QuantileOutOfRange"),
        (1, "QuantileOutOfRange"),
        (1.5, "QuantileOutOfRange"),
        ("nan", "QuantileOutOfRange"),
        (0.005, "QuantileOutOfRange"),
        (0.995, "QuantileOutOfRange"),
    ],
)
def test_bad_levels(raw, code):
    with pytest.raises(quantiles.QuantileLevelError) as caught:
        quantiles.parse_level(raw)
    assert caught.value.code == code and repr(raw) in str(caught.value)


def test_level_strings_are_decimal_numbers():
    assert quantiles.parse_level("0.95") == 0.95
    assert quantiles.parse_level(" 0.5 ") == 0.5


def request(**overrides):
    body = {"horizon": 4, "quantiles": [0.5], "series": [{"values": [1.0, 2.0, 3.0]}]}
    body.update(overrides)
    return body


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ([], 400, "InvalidRequest", None),
        (request(extra=1), 400, "UnknownField", None),
        (request(horizon=None), 422, "InvalidHorizon", "horizon"),
        (request(horizon=2.5), 422, "InvalidHorizon", "horizon"),
        (request(horizon=0), 422, "InvalidHorizon", "horizon"),
        (request(horizon=9), 422, "HorizonTooLong", "horizon"),
        (request(quantiles="0.5"), 422, "UnknownQuantileFormat", None),
        (request(quantiles=[0.5, "q9"]), 422, "UnknownQuantileFormat", "quantiles[1]"),
        (request(series=[]), 422, "NoSeries", "series"),
        (request(series=[{"values": [1]}] * 4), 413, "TooManySeries", "series"),
        (request(series=[{"values": []}]), 422, "EmptySeries", "series[0].values"),
        (request(series=[{"values": [None, None]}]), 422, "AllMissing", "series[0].values"),
        (request(series=[{"values": [1, float("nan")]}, {"values": [float("nan")]}]), 422, "AllMissing", None),
        (request(series=[{"values": [1, "2"]}]), 422, "InvalidValue", "series[0].values[1]"),
        (request(series=[{"values": [1, True]}]), 422, "InvalidValue", "series[0].values[1]"),
        (request(series=[{"values": [1, float("inf")]}]), 422, "InvalidValue", "series[0].values[1]"),
        (request(series=[{"values": [1, 2], "timestamps": [0]}]), 422, "InvalidTimestamps", None),
        (request(series=[{"values": [1, 2], "timestamps": [5, 5]}]), 422, "InvalidTimestamps", None),
        (request(series=[{"values": [1, 2, 3], "timestamps": [0, 60, 300]}]), 422, "InvalidTimestamps", None),
        (request(series=[{"values": [1], "step": 60}]), 400, "UnknownField", None),
        (request(useQuantileHead="yes"), 400, "InvalidRequest", None),
    ],
)
def test_bad_requests(body, status, code, field):
    with pytest.raises(protocol.RequestError) as caught:
        protocol.parse_request(body, SETTINGS)
    assert (caught.value.status, caught.value.code) == (status, code)
    if field:
        assert caught.value.field == field
        assert field.split("[")[0] in caught.value.message


def test_missing_points_and_context_cut():
    values = [None, None, 1.0, None, 3.0, *range(4, 20), None]
    call = protocol.parse_request(request(series=[{"id": "web", "values": values}]), SETTINGS)
    [s] = call.series
    assert s.id == "web" and s.received == len(values) and s.leading_missing == 2 and s.filled == 2
    filled = [1.0, 2.0, 3.0, *range(4, 20), 19.0]  # interior interpolated, the end holds the last value
    assert s.truncated == len(filled) - 16
    assert s.values.tolist() == filled[-16:]


def test_timestamps_give_forecast_times():
    call = protocol.parse_request(request(series=[{"values": [1, 2, 3], "timestamps": [600, 660, 720]}]), SETTINGS)
    result = protocol.series_result(call.series[0], call, np.ones((4, 10)))
    assert result["timestamps"] == [780.0, 840.0, 900.0, 960.0]


def test_null_timestamps_are_the_same_as_none():
    call = protocol.parse_request(request(series=[{"values": [1, 2, 3], "timestamps": None}]), SETTINGS)
    assert "timestamps" not in protocol.series_result(call.series[0], call, np.ones((4, 10)))


def test_settings_from_flags_and_environment():
    env = {"PRESAGE_FORECASTER_MAX_CONTEXT": "2048", "PRESAGE_FORECASTER_FLIP_INVARIANCE": "false"}
    settings = parse_settings(["--model", "/w", "--max-context", "1000"], env)
    assert settings.max_context == 1000 and settings.flip_invariance is False
    assert settings.compiled_context == 1024 and settings.compiled_horizon == 128
    settings = parse_settings(["--max-horizon", "200"], {"PRESAGE_FORECASTER_MODEL": "google/x"})
    assert settings.model == "google/x" and settings.compiled_horizon == 256


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--model"),
        (["--model", "/w", "--max-horizon", "2000"], "--max-horizon"),
        (["--model", "/w", "--max-context", "16384"], "exceeds"),
        (["--model", "/w", "--max-batch-size", "0"], "--max-batch-size"),
    ],
)
def test_bad_settings_exit_with_usage(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        parse_settings(argv, {})
    assert caught.value.code == 2 and message in capsys.readouterr().err


async def test_batcher_refuses_beyond_the_queue_bound_and_recovers():
    """Series waiting for the forward pass are bounded: beyond it a request is refused at once."""
    release, running = threading.Event(), threading.Event()

    def run(series, horizon):
        running.set()
        release.wait(10)  # hold the forward pass so the queue fills behind it
        return np.zeros((len(series), horizon, 10))

    batcher = MicroBatcher(run, window=0.0, max_batch=1, max_queued=3, metrics=Metrics())
    batcher.start()
    try:
        first = asyncio.create_task(batcher.forecast([np.ones(8)], 4))
        assert await asyncio.to_thread(running.wait, 10)  # the first series is in the held pass
        waiting = asyncio.create_task(batcher.forecast([np.ones(8)] * 3, 4))
        await asyncio.sleep(0)  # one turn of the loop: the task queues its three series, no await between
        assert not waiting.done()
        with pytest.raises(Overloaded, match=r"3 series are already waiting .* the limit is 3"):
            await batcher.forecast([np.ones(8)], 4)
        release.set()
        assert len(await first) == 1 and len(await waiting) == 3
        assert len(await batcher.forecast([np.ones(8)], 4)) == 1  # accepted again once drained
    finally:
        release.set()
        await batcher.stop()

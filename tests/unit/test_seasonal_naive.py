"""SeasonalNaive: known answers, cold start, and the definitions in its module docstring as properties."""

from __future__ import annotations

import itertools
import math
import re
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.forecast_backend import SeasonalNaiveBackend
from presage_scaler.backends.base import (
    BackendRejected,
    ForecastRequest,
    HindcastRequest,
    History,
    ModelIdentity,
    band_spread,
)
from presage_scaler.backends.seasonal_naive import (
    LEVEL_CLIP,
    LEVEL_WINDOW,
    MAX_RESIDUALS,
    MIN_RESIDUALS,
    PEAK_WINDOW,
    SeasonalNaive,
)

FIVE_MIN = timedelta(minutes=5)
HOUR = timedelta(hours=1)
LEVELS = (0.1, 0.5, 0.9)


def history(values: np.ndarray | list[float], step: timedelta = FIVE_MIN) -> History:
    return History(values=np.asarray(values, dtype=np.float64), step=step)


def pattern(season_steps: int) -> np.ndarray:
    """A non-negative daily-shaped pattern with a distinct value at every phase."""
    phase = np.arange(season_steps) / season_steps
    return 100.0 + 50.0 * np.sin(2 * np.pi * phase) + 10.0 * phase


def _steps(span: timedelta, step: timedelta) -> int:
    return max(1, math.ceil(span / step))


def reference(
    values: np.ndarray,
    season_steps: int,
    cycles: int,
    horizon: int,
    levels: tuple[float, ...],
    step: timedelta = timedelta(minutes=1),
):
    """The seasonal path written out loop by loop from the module docstring (needs S + MIN points)."""
    n, s = len(values), season_steps
    used = min(cycles, n // s)
    span, peak_span = min(_steps(LEVEL_WINDOW, step), n), min(_steps(PEAK_WINDOW, step), n)
    recent = sum(values[n - span : n])
    past = [sum(values[n - span - k * s : n - k * s]) for k in range(1, used + 1) if n - span - k * s >= 0]
    ratio = 1.0
    if past and np.mean(past) > 0 and recent >= 0:
        ratio = min(max(recent / np.mean(past), LEVEL_CLIP[0]), LEVEL_CLIP[1])
    peak = max(values[n - peak_span : n])
    means = [
        np.mean([values[n - 1 + h - (math.ceil(h / s) + k) * s] for k in range(used)]) for h in range(1, horizon + 1)
    ]
    point = np.array([max(ratio * mean, peak) for mean in means])
    window = min(max(used * s, MIN_RESIDUALS), MAX_RESIDUALS)
    residuals = [
        values[t] - np.mean([values[t - k * s] for k in range(1, min(used, t // s) + 1)])
        for t in range(n - window, n)
        if t >= s
    ]
    widen = math.sqrt(cycles / used)
    bands = {q: point + widen * np.quantile(residuals, q) for q in levels}
    if values.min() >= 0:
        bands = {q: np.maximum(band, 0) for q, band in bands.items()}
    return point, bands


# --- identity and settings -------------------------------------------------------------------------


def test_identity_and_limits_from_settings():
    backend = SeasonalNaive.from_settings(SeasonalNaiveBackend(season="24h", cycles=5))
    assert backend == SeasonalNaive(season=timedelta(hours=24), cycles=5)
    # The ForecastBackend's name, as for TimesFM: "default" unless built for a named object.
    assert backend.identity == ModelIdentity(backend="default", model="seasonal-naive/24hx5")
    named = SeasonalNaive.from_settings(SeasonalNaiveBackend(season="24h", cycles=5), name="weekly")
    assert named.identity == ModelIdentity(backend="weekly", model="seasonal-naive/24hx5")
    assert backend.max_context is None
    assert backend.max_horizon is None
    assert SeasonalNaive.from_settings(SeasonalNaiveBackend()) == SeasonalNaive(timedelta(hours=168), 3)


@pytest.mark.parametrize(("season", "cycles"), [(timedelta(0), 3), (timedelta(hours=1), 0)])
def test_invalid_settings_are_refused(season, cycles):
    with pytest.raises(ValueError):
        SeasonalNaive(season=season, cycles=cycles)


# --- known answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("season", "step", "cycles", "seasons_of_history"),
    [
        (timedelta(hours=24), FIVE_MIN, 3, 4),
        (timedelta(hours=24), FIVE_MIN, 3, 7),
        (timedelta(hours=168), HOUR, 1, 2),
        (timedelta(hours=168), HOUR, 2, 6),
        (timedelta(hours=2), timedelta(minutes=1), 5, 8),
    ],
)
def test_periodic_series_forecasts_the_pattern_with_a_collapsed_band(season, step, cycles, seasons_of_history):
    s = round(season / step)
    shape = pattern(s)
    values = np.tile(shape, seasons_of_history + 1)[:-7]  # ends mid-season: the next phase is s − 7
    horizon = 3 * s // 2

    forecast = SeasonalNaive(season, cycles).forecast_one(history(values, step), horizon, LEVELS)

    # The level ratio is 1 (the last hour is what it was a season ago); the recent peak is a floor.
    peak = values[-_steps(PEAK_WINDOW, step) :].max()
    expected = np.maximum(np.resize(np.roll(shape, 7), horizon), peak)
    np.testing.assert_allclose(forecast.point, expected, rtol=1e-12)
    for level in LEVELS:
        np.testing.assert_allclose(forecast.quantiles[level], expected, rtol=1e-12)
    assert forecast.method == ""
    assert forecast.notes == ()


@pytest.mark.parametrize(("cycles", "factor"), [(2, 1.5), (3, 1.3), (2, 0.6), (2, 3.0), (1, 0.2)])
def test_the_profile_is_scaled_to_the_last_hours_level(cycles, factor):
    """The last six hours ran at ``factor`` times the usual level: the next hours are forecast at that
    level, within the ratio's bounds [0.5, 2]."""
    s = 24
    shape = pattern(s)
    values = np.tile(shape, cycles + 2)
    values[-6:] *= factor
    forecast = SeasonalNaive(timedelta(hours=s), cycles).forecast_one(history(values, HOUR), 6, LEVELS)

    ratio = min(max(factor, LEVEL_CLIP[0]), LEVEL_CLIP[1])
    np.testing.assert_allclose(forecast.point, np.maximum(ratio * shape[:6], values[-1]), rtol=1e-12)


def test_the_forecast_never_drops_below_the_latest_point():
    """The backend's own floor is the latest point; the hold at the last 15 minutes' peak is
    calibration's, which applies it where it pays (test_calibration)."""
    values = np.tile(pattern(288), 3)
    values[-1] = 1000.0  # a burst at the latest point
    forecast = SeasonalNaive(timedelta(hours=24), 2).forecast_one(history(values), 12, LEVELS)
    np.testing.assert_array_equal(forecast.point, np.full(12, 1000.0))
    values[-2] = 2000.0  # one step (5 minutes) before it: not the latest point
    assert SeasonalNaive(timedelta(hours=24), 2).forecast_one(history(values), 12, LEVELS).point.max() == 1000.0


@pytest.mark.parametrize("levels", [(0.5,), (0.1, 0.9), (0.05, 0.25, 0.5, 0.75, 0.95), (0.333, 0.999)])
def test_quantiles_are_the_empirical_quantiles_of_known_residuals(levels):
    """Build x_t = x_{t−S} + e_t: with one cycle the residuals are exactly the chosen e_t."""
    s, window = 6, MIN_RESIDUALS
    errors = np.random.default_rng(7).standard_t(df=3, size=window + 40) * 5.0
    values = list(1000.0 + pattern(s))
    for error in errors:
        values.append(values[-s] + error)
    values = np.array(values)

    forecast = SeasonalNaive(timedelta(minutes=s), 1).forecast_one(history(values, timedelta(minutes=1)), 10, levels)

    for level in levels:
        offset = np.quantile(errors[-window:], level)  # W = max(c·S, MIN_RESIDUALS) = MIN_RESIDUALS
        np.testing.assert_allclose(forecast.quantiles[level], forecast.point + offset, rtol=1e-12)


@pytest.mark.parametrize(
    ("n", "s", "cycles"),
    [
        (40, 5, 3),
        (100, 7, 2),
        (300, 24, 3),
        (300, 24, 12),
        (500, 100, 3),
        (9000, 288, 2),
        (30, 1, 4),
        (12000, 3000, 3),  # c·S > MAX_RESIDUALS: the residual window is capped
    ],
)
def test_matches_the_docstring_definition_written_out(n, s, cycles):
    values = np.random.default_rng(n).gamma(2.0, 10.0, size=n) + 5 * np.sin(np.arange(n) * 2 * np.pi / s)
    horizon = 2 * s + 3

    forecast = SeasonalNaive(timedelta(minutes=s), cycles).forecast_one(
        history(values, timedelta(minutes=1)), horizon, LEVELS
    )

    point, bands = reference(values, s, cycles, horizon, LEVELS)
    np.testing.assert_allclose(forecast.point, point, rtol=1e-9, atol=1e-9)
    for level in LEVELS:
        np.testing.assert_allclose(forecast.quantiles[level], bands[level], rtol=1e-9, atol=1e-9)


def test_horizon_beyond_one_season_only_uses_the_past_and_repeats_the_season():
    s, cycles = 12, 2
    values = np.arange(5 * s, dtype=np.float64)  # a ramp: every lag gives a different answer
    forecast = SeasonalNaive(timedelta(hours=s), cycles).forecast_one(history(values, HOUR), 3 * s + 5, (0.5,))

    n = len(values)
    for h in range(1, 3 * s + 6):
        lags = [n - 1 + h - (math.ceil(h / s) + k) * s for k in range(cycles)]
        assert all(lag < n for lag in lags)
    point, _ = reference(values, s, cycles, 3 * s + 5, (0.5,), HOUR)
    np.testing.assert_allclose(forecast.point, point, rtol=1e-12)
    np.testing.assert_array_equal(forecast.point[s : 2 * s], forecast.point[:s])


def test_season_not_a_whole_number_of_steps_rounds_and_says_so():
    values = np.tile(pattern(206), 4)
    forecast = SeasonalNaive(timedelta(hours=24), 3).forecast_one(history(values, timedelta(minutes=7)), 5, LEVELS)
    assert forecast.method == ""
    assert forecast.notes == ("season 24h is 205.71 steps of 7m; rounded to 206 steps (24h2m)",)
    peak = values[-_steps(PEAK_WINDOW, timedelta(minutes=7)) :].max()
    np.testing.assert_allclose(forecast.point, np.maximum(pattern(206)[:5], peak))


# --- clipping and ordering -------------------------------------------------------------------------


def test_non_negative_history_clips_at_zero_but_signed_history_does_not():
    s = 24
    shape = np.where(np.arange(s) < 12, 50.0, 0.0)  # ends quiet, so the recent peak is low
    noise = np.random.default_rng(3).normal(0, 5, size=4 * s)
    backend = SeasonalNaive(timedelta(hours=s), 3)

    quiet = np.tile(shape, 4) + np.abs(noise)
    quiet[-1] = 0.0
    non_negative = backend.forecast_one(history(quiet, HOUR), s, LEVELS)
    signed = backend.forecast_one(history(np.tile(shape - 25, 4) + noise, HOUR), s, LEVELS)

    assert min(band.min() for band in non_negative.quantiles.values()) == 0.0
    assert non_negative.point.min() >= 0.0
    assert signed.quantiles[0.1].min() < -25.0


def test_quantiles_are_monotone_whatever_order_they_are_asked_in():
    values = np.random.default_rng(11).lognormal(3, 1, size=2000)
    forecast = SeasonalNaive(timedelta(hours=24), 3).forecast_one(history(values), 48, (0.9, 0.01, 0.5, 0.25, 0.99))
    assert list(forecast.quantiles) == [0.01, 0.25, 0.5, 0.9, 0.99]
    bands = np.array(list(forecast.quantiles.values()))
    assert (np.diff(bands, axis=0) >= 0).all()
    assert (bands[-1] > bands[0]).all()


# --- cold start ------------------------------------------------------------------------------------


def test_half_a_season_falls_back_to_the_recent_level():
    values = np.random.default_rng(5).normal(100, 10, size=1008)  # 84h at 5m, half of 168h
    forecast = SeasonalNaive().forecast_one(history(values), 24, LEVELS)

    assert forecast.method == "recent-level"
    assert forecast.notes[0] == "84h of history, less than one 168h season"
    assert "mean of the last 12 steps" in forecast.notes[1]
    np.testing.assert_allclose(forecast.point, np.full(24, max(values[-12:].mean(), values[-1])))
    # Band centred on the point and widening like sqrt(steps ahead).
    np.testing.assert_allclose(forecast.quantiles[0.5], forecast.point)
    upper = forecast.quantiles[0.9] - forecast.point
    assert upper[0] > 0
    np.testing.assert_allclose(upper[3], 2 * upper[0])
    np.testing.assert_allclose(upper[15], 4 * upper[0])
    np.testing.assert_allclose(forecast.point - forecast.quantiles[0.1], upper)


def test_one_season_without_enough_points_after_it_is_still_recent_level():
    s = 2016
    values = np.tile(pattern(s), 2)[: s + MIN_RESIDUALS - 1]
    forecast = SeasonalNaive().forecast_one(history(values), 4, LEVELS)
    assert forecast.method == "recent-level"
    assert forecast.notes[0] == (
        "169h55m of history: only 23 steps after the first 168h season to measure the seasonal "
        "forecast's error (needs 24)"
    )

    values = np.tile(pattern(s), 2)[: s + MIN_RESIDUALS]
    assert SeasonalNaive().forecast_one(history(values), 4, LEVELS).method == "seasonal-naive (1 of 3 cycles)"


def test_fewer_cycles_than_configured_use_what_exists_and_widen_the_band():
    s = 168
    noise = np.random.default_rng(9).normal(0, 10, size=6 * s)
    series = np.tile(pattern(s), 6) + noise
    backend = SeasonalNaive(timedelta(hours=168), 3)

    cold = backend.forecast_one(history(series[: 3 * s // 2], HOUR), 24, LEVELS)
    full = backend.forecast_one(history(series, HOUR), 24, LEVELS)

    assert cold.method == "seasonal-naive (1 of 3 cycles)"
    assert cold.notes == ("252h of history holds 1 of the 3 168h seasons configured; band widened by sqrt(3/1) = 1.73",)
    np.testing.assert_allclose(cold.point, reference(series[: 3 * s // 2], s, 3, 24, LEVELS, HOUR)[0])
    assert full.method == ""
    cold_width = cold.quantiles[0.9] - cold.quantiles[0.1]
    full_width = full.quantiles[0.9] - full.quantiles[0.1]
    assert (cold_width > 1.5 * full_width).all()


def test_two_of_three_cycles():
    s = 24
    values = np.tile(pattern(s), 2) + np.random.default_rng(1).normal(0, 1, size=2 * s)
    forecast = SeasonalNaive(timedelta(hours=s), 3).forecast_one(history(values, HOUR), s, LEVELS)
    assert forecast.method == "seasonal-naive (2 of 3 cycles)"
    np.testing.assert_allclose(forecast.point, reference(values, s, 3, s, LEVELS, HOUR)[0])


def test_recent_level_reads_a_bounded_number_of_changes():
    values = np.random.default_rng(2).normal(50, 5, size=9000)  # 150h at 1m: 10080 steps a season
    forecast = SeasonalNaive().forecast_one(history(values, timedelta(minutes=1)), 4, LEVELS)
    assert forecast.method == "recent-level"
    assert forecast.notes[1] == (
        f"forecasting the mean of the last 60 steps (at least the latest point); band from {MAX_RESIDUALS} "
        "step-to-step changes (both signs), widened by sqrt(steps ahead)"
    )
    np.testing.assert_allclose(forecast.point, max(values[-60:].mean(), values[-1]))


def test_recent_level_bands_of_a_batch_are_the_quantiles_of_each_historys_changes_both_ways():
    # Many histories of one series, each reading MAX_RESIDUALS changes (the batch path's usual case),
    # against numpy's quantiles of each one's own changes and their negatives.
    values = np.random.default_rng(12).normal(50, 5, size=4000).round(1)  # ties between windows
    step = timedelta(minutes=1)
    spans = [(0, end) for end in range(MAX_RESIDUALS + 1, 3000, 37)]
    requests = [ForecastRequest(History(values[b:e], step), 2, LEVELS) for b, e in spans]
    for (_, end), forecast in zip(spans, SeasonalNaive().forecast_windows(values, spans, requests), strict=True):
        assert forecast.method == "recent-level"
        changes = np.diff(values[end - MAX_RESIDUALS - 1 : end])
        for level in LEVELS:
            offset = np.quantile(np.concatenate((changes, -changes)), level)
            assert forecast.quantiles[level][0] - forecast.point[0] == pytest.approx(offset, abs=1e-9)


def test_a_single_point_is_the_forecast():
    forecast = SeasonalNaive().forecast_one(history([42.0]), 3, LEVELS)
    assert forecast.method == "recent-level"
    np.testing.assert_array_equal(forecast.point, [42.0] * 3)
    for level in LEVELS:
        np.testing.assert_array_equal(forecast.quantiles[level], [42.0] * 3)
    assert "single point" in forecast.notes[1]


def test_two_points_give_a_symmetric_band_around_the_recent_peak():
    forecast = SeasonalNaive().forecast_one(history([10.0, 14.0]), 1, (0.0001, 0.5, 0.9999))
    assert forecast.point_at(0) == 14.0  # the mean is 12, the latest point 14
    assert forecast.at(0, 0.0001) == pytest.approx(10.0, abs=1e-3)
    assert forecast.at(0, 0.9999) == pytest.approx(18.0, abs=1e-3)


# --- rejections ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "step", "horizon", "levels", "message"),
    [
        ([], FIVE_MIN, 4, LEVELS, "history is empty"),
        ([1.0, float("nan"), 2.0], FIVE_MIN, 4, LEVELS, "non-finite value (nan) at index 1 of 3"),
        ([1.0, 2.0, float("inf")], FIVE_MIN, 4, LEVELS, "non-finite value (inf) at index 2"),
        ([1.0, 2.0], FIVE_MIN, 0, LEVELS, "horizon must be at least 1"),
        ([1.0, 2.0], FIVE_MIN, 4, (0.0, 0.5), "strictly between 0 and 1"),
        ([1.0, 2.0], FIVE_MIN, 4, (0.5, 1.0), "strictly between 0 and 1"),
        ([1.0, 2.0], timedelta(0), 4, LEVELS, "step must be positive"),
        ([1.0, 2.0], timedelta(days=15), 4, LEVELS, "season 168h is shorter than half the 360h step"),
        ([[1.0, 2.0]], FIVE_MIN, 4, LEVELS, "one-dimensional"),
    ],
)
def test_unusable_requests_are_rejected_with_a_reason(values, step, horizon, levels, message):
    with pytest.raises(BackendRejected, match=re.escape(message)):
        SeasonalNaive().forecast_one(History(np.array(values, dtype=np.float64), step), horizon, levels)


def test_no_levels_gives_just_a_point():
    forecast = SeasonalNaive().forecast_one(history(np.ones(50)), 3, ())
    assert forecast.quantiles == {}
    np.testing.assert_array_equal(forecast.point, np.ones(3))


# --- the async batch -------------------------------------------------------------------------------


async def test_batch_returns_results_in_request_order():
    backend = SeasonalNaive(timedelta(hours=1), 2)
    requests = [ForecastRequest(history(np.full(60, float(i))), horizon=i + 1, quantiles=(0.5,)) for i in range(5)]
    results = await backend.forecast(requests)
    assert [len(r.point) for r in results] == [1, 2, 3, 4, 5]
    assert [r.point_at(0) for r in results] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert await backend.forecast([]) == []


async def test_batch_rejection_names_the_request():
    good = ForecastRequest(history(np.ones(10)), horizon=2, quantiles=(0.5,))
    bad = ForecastRequest(history(np.array([1.0, np.nan])), horizon=2, quantiles=(0.5,))
    with pytest.raises(BackendRejected, match="request 1: history has a non-finite value"):
        await SeasonalNaive().forecast([good, bad, good])


# --- properties ------------------------------------------------------------------------------------

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
levels_strategy = st.lists(st.floats(min_value=0.001, max_value=0.999), min_size=1, max_size=5)


@st.composite
def requests(draw, elements=finite):
    season_steps = draw(st.integers(min_value=1, max_value=40))
    values = draw(st.lists(elements, min_size=1, max_size=200))
    return (
        SeasonalNaive(timedelta(minutes=season_steps), draw(st.integers(min_value=1, max_value=5))),
        history(values, timedelta(minutes=1)),
        draw(st.integers(min_value=1, max_value=100)),
        tuple(draw(levels_strategy)),
    )


@settings(max_examples=300, deadline=None)
@given(requests())
def test_property_shape_finiteness_and_order(request_):
    backend, hist, horizon, levels = request_
    forecast = backend.forecast_one(hist, horizon, levels)

    assert forecast.point.shape == (horizon,)
    assert set(forecast.quantiles) == set(levels)
    assert np.isfinite(forecast.point).all()
    ordered = [forecast.quantiles[level] for level in sorted(set(levels))]
    for band in ordered:
        assert band.shape == (horizon,)
        assert np.isfinite(band).all()
    for lower, upper in itertools.pairwise(ordered):
        assert (lower <= upper).all()
    assert forecast.method == "" or forecast.method.startswith(("seasonal-naive", "recent-level"))


@settings(max_examples=200, deadline=None)
@given(requests(elements=st.floats(min_value=0, max_value=1e6)))
def test_property_non_negative_history_gives_non_negative_forecast(request_):
    backend, hist, horizon, levels = request_
    forecast = backend.forecast_one(hist, horizon, levels)
    assert (forecast.point >= 0).all()
    assert all((band >= 0).all() for band in forecast.quantiles.values())


@settings(max_examples=200, deadline=None)
@given(requests())
def test_property_seasonal_path_matches_the_definition(request_):
    backend, hist, horizon, levels = request_
    s = backend.season // hist.step
    forecast = backend.forecast_one(hist, horizon, levels)
    if len(hist.values) < s + MIN_RESIDUALS:
        assert forecast.method == "recent-level"
        return
    point, bands = reference(hist.values, s, backend.cycles, horizon, levels)
    atol = 1e-9 * (1 + np.abs(hist.values).max())  # the sums run in a different order
    np.testing.assert_allclose(forecast.point, point, rtol=1e-9, atol=atol)
    for level in levels:
        np.testing.assert_allclose(forecast.quantiles[level], bands[level], rtol=1e-9, atol=atol)


# --- hindcasts and windows of one series -----------------------------------------------------------


def test_a_hindcast_is_the_forecast_made_from_the_shorter_history():
    s, cycles, window = 48, 2, 6
    values = np.random.default_rng(4).gamma(3.0, 10.0, size=6 * s) + 40 * np.sin(np.arange(6 * s) * 2 * np.pi / s)
    values = np.maximum(values, 0.0)
    backend = SeasonalNaive(timedelta(hours=s), cycles)
    origins = np.array([len(values), len(values) - 7, 4 * s + 3, 3 * s])

    asked = HindcastRequest(window, origins, band=(0.5, 0.9))
    forecast = backend.forecast_one(history(values, HOUR), window, LEVELS, asked)

    assert forecast.hindcast is not None and forecast.hindcast.spreads is not None
    np.testing.assert_array_equal(forecast.hindcast.origins, origins)
    for origin, reference, spread in zip(origins, forecast.hindcast.references, forecast.hindcast.spreads, strict=True):
        earlier = backend.forecast_one(history(values[:origin], HOUR), window, LEVELS)
        assert reference == pytest.approx(earlier.point.max(), rel=1e-12)
        # The band the earlier forecast reported, as wide as it was over the window.
        assert spread == pytest.approx(band_spread(earlier.quantiles[0.5], earlier.quantiles[0.9], window), rel=1e-9)
    assert forecast.hindcast.references[0] == pytest.approx(forecast.point.max(), rel=1e-12)
    assert forecast.hindcast.spreads[0] > 0.0


def test_a_hindcast_is_nan_where_the_path_has_nothing_to_forecast_from():
    s = 24
    values = np.tile(pattern(s), 3)
    origins = np.array([0, s - 1, s, len(values), len(values) + 1])
    forecast = SeasonalNaive(timedelta(hours=s), 2).forecast_one(
        history(values, HOUR), 2, (0.5,), HindcastRequest(3, origins)
    )
    assert forecast.hindcast is not None
    assert np.isnan(forecast.hindcast.references).tolist() == [True, True, False, False, True]
    with pytest.raises(BackendRejected, match="hindcast window must be at least 1"):
        SeasonalNaive().forecast_one(history(values), 2, (0.5,), HindcastRequest(0, origins))


async def test_forecast_answers_the_hindcast_a_request_asks_for():
    values = np.tile(pattern(24), 3)
    asked = ForecastRequest(history(values, HOUR), 2, (0.5,), HindcastRequest(2, np.array([40, 50])))
    plain = ForecastRequest(history(values, HOUR), 2, (0.5,))
    answered, unasked = await SeasonalNaive(timedelta(hours=24), 2).forecast([asked, plain])
    assert answered.hindcast is not None and len(answered.hindcast.references) == 2
    assert unasked.hindcast is None


@st.composite
def series_windows(draw):
    season_steps = draw(st.integers(min_value=1, max_value=30))
    values = np.array(draw(st.lists(st.floats(min_value=0, max_value=1e4), min_size=2, max_size=150)))
    count = draw(st.integers(min_value=1, max_value=6))
    spans = []
    for _ in range(count):
        end = draw(st.integers(min_value=1, max_value=len(values)))
        spans.append((draw(st.integers(min_value=0, max_value=end - 1)), end))
    window = draw(st.integers(min_value=1, max_value=8))
    backend = SeasonalNaive(timedelta(minutes=season_steps), draw(st.integers(min_value=1, max_value=3)))
    return backend, values, spans, window


@settings(max_examples=150, deadline=None)
@given(series_windows())
def test_property_windows_of_one_series_forecast_as_one_history_each(case):
    backend, values, spans, window = case
    requests = [
        ForecastRequest(
            history(values[begin:end], timedelta(minutes=1)),
            3,
            (0.1, 0.9),
            HindcastRequest(window, np.arange(1, end - begin + 1), band=(0.1, 0.9)),
        )
        for begin, end in spans
    ]
    together = backend.forecast_windows(values, spans, requests)
    for request, forecast in zip(requests, together, strict=True):
        alone = backend.forecast_one(request.history, request.horizon, request.quantiles, request.hindcast)
        atol = 1e-9 * (1 + values.max())  # running sums start at different points
        np.testing.assert_allclose(forecast.point, alone.point, rtol=1e-9, atol=atol)
        for level in request.quantiles:
            np.testing.assert_allclose(forecast.quantiles[level], alone.quantiles[level], rtol=1e-9, atol=atol)
        assert forecast.hindcast is not None and alone.hindcast is not None
        np.testing.assert_allclose(forecast.hindcast.references, alone.hindcast.references, rtol=1e-9, atol=atol)
        assert forecast.hindcast.spreads is not None and alone.hindcast.spreads is not None
        np.testing.assert_allclose(forecast.hindcast.spreads, alone.hindcast.spreads, rtol=1e-9, atol=atol)
        assert (forecast.method, forecast.notes) == (alone.method, alone.notes)

"""Calibration: the window maximum at q is covered a fraction q of the time, on the backend's own
errors, whether they are hindcast or recorded; the recorded ones are bounded and survive a restart."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.backends.base import Forecast, ForecastRequest, Hindcast, History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.engine import (
    calibration_blend,
    calibration_quantiles,
    calibration_readings,
    calibration_windows,
    past_forecasts,
)
from presage_scaler.engine.calibration import calibrate, window_forecasts
from presage_scaler.engine.calibration_blend import BLEND_SAVING
from presage_scaler.engine.calibration_quantiles import ANALOG_RANK, base_level
from presage_scaler.engine.calibration_windows import calibrated_windows
from presage_scaler.engine.evaluator import sized_by, window_calibration
from presage_scaler.engine.past_forecasts import (
    MAX_FORECASTS,
    MAX_RECORDS,
    MIN_SCORES,
    SPAN,
    CalibrationState,
    PastForecast,
    SignalForecasts,
    answered,
    answered_together,
    hindcast_request,
    remember,
)

MINUTE = timedelta(minutes=1)
DAY = 1440
T0 = datetime(2026, 3, 2, tzinfo=UTC)


def daily_poisson(days: int, level: float, seed: int) -> np.ndarray:
    """Poisson counts per minute around a daily profile between 0.3× and 1.7× ``level``."""
    minutes = np.arange(days * DAY)
    profile = level * (1.0 + 0.7 * np.sin(2 * np.pi * minutes / DAY))
    return np.random.default_rng(seed).poisson(profile).astype(np.float64)


def coverage(values: np.ndarray, levels: tuple[float, ...], window: int, first: int, every: int = 5) -> dict:
    """Decide every ``every`` minutes from ``first`` on with SeasonalNaive (24h × 2) through the
    production calibration, and measure how often each level covered the realised window maximum."""
    backend = SeasonalNaive(season=timedelta(hours=24), cycles=2)
    ends = np.arange(first, len(values) - window, every)
    spans = [(max(0, end - 14 * DAY), int(end)) for end in ends]
    requests = [
        ForecastRequest(
            History(values[begin:end], MINUTE), window, levels, hindcast_request(end - begin, window, MINUTE)
        )
        for begin, end in spans
    ]
    forecasts = backend.forecast_windows(values, spans, requests)
    pasts = [answered(f, window) for f in forecasts]
    windows = window_forecasts(values, MINUTE, spans, forecasts, window, levels, pasts)
    assert all(w.calibrated for w in windows)
    realised = np.array([values[end : end + window].max() for end in ends])
    return {q: float(np.mean(realised <= np.array([w.quantiles[q] for w in windows]))) for q in levels}


# --- coverage converges to nominal -----------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    level=st.floats(min_value=20.0, max_value=400.0),
    window=st.integers(min_value=1, max_value=12),
    target=st.sampled_from([0.8, 0.9, 0.95]),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_property_poisson_counts_around_a_daily_profile_are_covered_at_the_nominal_rate(level, window, target, seed):
    # Six days of decisions, every 5 minutes: over three, coverage moved by chance by about 1.5 points
    # (one standard deviation) from one seed to the next, a third of the tolerance.
    values = daily_poisson(9, level, seed)
    covered = coverage(values, (0.5, target), window, first=3 * DAY)
    assert covered[target] == pytest.approx(target, abs=0.04)
    assert covered[0.5] == pytest.approx(0.5, abs=0.07)


@settings(max_examples=8, deadline=None)
@given(factor=st.sampled_from([0.5, 1.6, 2.5]), seed=st.integers(min_value=0, max_value=2**16))
def test_property_after_a_level_shift_coverage_returns_to_nominal_within_a_day(factor, seed):
    values = daily_poisson(7, 100.0, seed)
    values[4 * DAY :] = np.random.default_rng(seed + 1).poisson(values[4 * DAY :] * factor)
    covered = coverage(values, (0.5, 0.9), 5, first=5 * DAY)
    assert covered[0.9] == pytest.approx(0.9, abs=0.04)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**16))
def test_property_after_a_day_without_traffic_coverage_returns_to_nominal(seed):
    values = daily_poisson(8, 150.0, seed)
    values[4 * DAY : 5 * DAY] = 0.0
    quiet = coverage(values, (0.5, 0.9), 5, first=4 * DAY + 120)
    assert quiet[0.9] == pytest.approx(0.9, abs=0.1)  # over the quiet day and the three after it
    after = coverage(values, (0.5, 0.9), 5, first=6 * DAY)
    assert after[0.9] == pytest.approx(0.9, abs=0.04)


# --- the conformal quantile ------------------------------------------------------------------------


@pytest.fixture
def unheld(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference is never held at the recent peak (a saving of at least -inf always releases it):
    these tests' references are set below the history's peaks on purpose, to measure other parts."""
    monkeypatch.setattr(calibration_windows, "PEAK_SAVING", -math.inf)


@pytest.fixture
def backend_alone(unheld: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The conformal arithmetic on the backend's reference alone: no blend with the recent level is
    tried (these tests' backends are deliberately worse than it), and no hold at the recent peak."""
    monkeypatch.setattr(calibration_blend, "BLEND_WEIGHTS", (1.0,))


def forecast_with(references: np.ndarray, origins: np.ndarray, point: float, horizon: int = 3) -> Forecast:
    return Forecast(
        point=np.full(horizon, point),
        quantiles={0.5: np.full(horizon, point), 0.9: np.full(horizon, point * 2)},
        hindcast=Hindcast(origins=origins, references=references),
    )


def errors_zero_to_23(values: np.ndarray) -> calibration_windows.WindowForecast:
    """The window forecast (reference 50, windows of 3) of ``values`` calibrated by 24 past forecasts,
    one every 10 steps from 100, whose errors are 0, 1, … 23 (reference = realised − error)."""
    origins = np.arange(100, 340, 10)
    errors = np.arange(len(origins), dtype=np.float64)
    references = np.array([values[o : o + 3].max() for o in origins]) - errors
    forecast = forecast_with(references, origins, 50.0)
    [window] = window_forecasts(values, MINUTE, [(0, len(values))], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    return window


def test_the_quantile_is_the_reference_plus_the_conformal_rank_of_the_scaled_errors(backend_alone):
    # A history alternating 10 and 12: every step changes by 2, so the noise level is 2 everywhere.
    window = errors_zero_to_23(np.tile([10.0, 12.0], 200))
    # Scores are errors / 2 = 0, 0.5, … 11.5; ranks ⌈25·0.5⌉ = 13 and ⌈25·0.9⌉ = 23 (1-based).
    assert window.scores == 24
    assert window.quantiles[0.5] == pytest.approx(50.0 + 2 * 6.0)
    assert window.quantiles[0.9] == pytest.approx(50.0 + 2 * 11.0)
    assert window.reference == 50.0


def test_the_noise_level_is_the_geometric_mean_of_the_quarter_hour_and_the_longer_span(backend_alone):
    # As above, but the last quarter hour alternates 10 and 18: its 15 changes are 8, so the short noise
    # level now is 8 and the long one (75 changes: 15 of 8, 60 of 2) 3.2; σ(n) = √(8 · 3.2). The past
    # origins read noise 2 on both spans, so the scores are unchanged.
    assert calibration_readings.SCALE_LONG_FACTOR == 5
    values = np.tile([10.0, 12.0], 200)
    values[-16:] = np.tile([10.0, 18.0], 8)
    window = errors_zero_to_23(values)
    assert window.quantiles[0.9] == pytest.approx(50.0 + math.sqrt(8.0 * 3.2) * 11.0)


def scored_day(analog_error: float, noise_then: float = 2.0) -> tuple[np.ndarray, Forecast]:
    """A day and a half alternating 10 and 12 (noise 2), but for the span before the same time the day
    before that both noise levels read (the quarter hour and SCALE_LONG_FACTOR times it), which
    alternates 10 and 10 + ``noise_then``, and 25 past forecasts: 24 whose errors are 0, 1, … 23, and
    the one from the same time the day before with ``analog_error``."""
    values = np.tile([10.0, 12.0], 1000)
    n = len(values)
    pairs = calibration_readings.SCALE_LONG_FACTOR * 15 // 2 + 1
    values[n - DAY - 2 * pairs : n - DAY] = np.tile([10.0, 10.0 + noise_then], pairs)
    origins = np.append(np.arange(n - 3 - 10 * 23, n - 2, 10), n - DAY)
    errors = np.append(np.arange(24, dtype=np.float64), analog_error)
    references = np.array([values[o : o + 3].max() for o in origins]) - errors
    return values, forecast_with(references, origins, 50.0)


def analog_window(values: np.ndarray, forecast: Forecast) -> calibration_windows.WindowForecast:
    [window] = window_forecasts(values, MINUTE, [(0, len(values))], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    assert window.scores == 25
    return window


def window_of(values: np.ndarray, forecast: Forecast) -> dict[float, float]:
    return analog_window(values, forecast).quantiles


def test_a_miss_the_day_before_at_this_time_is_expected_again(backend_alone):
    # Scores are errors / 2. Yesterday's 40 / 2 = 20 is beyond s(0.9), the 24th of 25 scores
    # (⌈26·0.9⌉ = 24; it is the largest), so the target is sized to at least it.
    window = analog_window(*scored_day(40.0))
    assert base_level(0.9) == pytest.approx(0.8944, abs=1e-4)
    assert window.quantiles[0.9] == pytest.approx(50.0 + 2 * 20.0)
    # The guard's scaleDownQuantile value is raised as much as the target's, never to it: the
    # calibrated band's s(L_0.9) and s(L_0.5) are the 24th and 12th of the 25 scores (11.5 and 5.5).
    ranked = np.sort(np.append(np.arange(24) / 2, 20.0))
    assert window.bands == {0.5: pytest.approx(50.0 + 2 * ranked[11]), 0.9: pytest.approx(50.0 + 2 * ranked[23])}
    assert window.lower(0.9, 0.5) == pytest.approx(50.0 + 2 * 20.0 - 2 * (11.5 - 5.5))


def test_a_miss_the_day_before_is_expected_again_as_large_in_demand_whatever_the_noise_then(backend_alone):
    # The quarter hour before yesterday's origin alternated 10 and 14 (noise 4, twice today's 2), so
    # its miss of 60 scores 15: beyond s(0.9) (the largest of the other scores is 11.5). It is
    # expected again as 60 in demand, not as 15 of today's noise (which would be 30).
    window = analog_window(*scored_day(60.0, noise_then=4.0))
    assert window.quantiles[0.9] == pytest.approx(50.0 + 60.0)
    assert window.lower(0.9, 0.5) == pytest.approx(50.0 + 60.0 - 2 * (11.5 - 5.5))


def test_the_guards_spread_is_the_calibrated_bands_whatever_yesterday_missed(backend_alone):
    """Yesterday's miss raises the targetQuantile and scaleDownQuantile values alike: the spread the
    guard reads is never closed by it."""
    ordinary = analog_window(*scored_day(5.0))
    for miss in (40.0, 60.0, 200.0):
        window = analog_window(*scored_day(miss))
        assert window.quantiles[0.9] > ordinary.quantiles[0.9]
        spread = window.quantiles[0.9] - window.lower(0.9, 0.5)
        assert spread == pytest.approx(window.bands[0.9] - window.bands[0.5])
        assert spread > 0.0


def test_the_noise_ratio_that_carries_yesterdays_miss_is_bounded(backend_alone):
    # Noise 8 before yesterday's origin, four times today's 2: the miss of 120 scores 15 and is carried
    # over at the bounded ratio 2 (ANALOG_SCALE_RANGE), as 15 · 2 = 30 of today's noise, i.e. 60.
    assert calibration_quantiles.ANALOG_SCALE_RANGE == (0.5, 2.0)
    quantiles = window_of(*scored_day(120.0, noise_then=8.0))
    assert quantiles[0.9] == pytest.approx(50.0 + 2 * 30.0)


def test_an_ordinary_error_the_day_before_leaves_the_conformal_quantile_a_little_lower(backend_alone):
    # Yesterday's error 5 (score 2.5) is ordinary: t_q = s(L_q), ranks ⌈26·0.894⌉ = 24 and
    # ⌈26·0.45⌉ = 12 among the scores 0, 0.5, … 11.5 and 2.5 (the plain q0.9 would be rank 24 too).
    quantiles = window_of(*scored_day(5.0))
    ranked = np.sort(np.append(np.arange(24) / 2, 2.5))
    assert quantiles[0.9] == pytest.approx(50.0 + 2 * ranked[23])
    assert quantiles[0.5] == pytest.approx(50.0 + 2 * ranked[11])


@given(level=st.floats(min_value=0.01, max_value=0.999))
def test_property_the_rule_covers_exactly_the_level_where_errors_do_not_recur(level):
    """Where yesterday's error is exchangeable with the others, a ≥ s(T) happens with probability
    1 − T and then covers with probability (1 + T)/2; otherwise s(L) covers with probability L."""
    low, top = base_level(level), ANALOG_RANK
    covers = top * low + (1 - top) * (1 + top) / 2 if low <= top else (1 + low * low) / 2
    assert covers == pytest.approx(max(level, (1 - top * top) / 2), abs=1e-9)
    assert base_level(min(0.9999, level + 0.001)) >= low


# --- the backend's own band ------------------------------------------------------------------------


def banded_window(
    spreads_then: float | np.ndarray, width_now: float, errors: np.ndarray | None = None
) -> calibration_windows.WindowForecast:
    """:func:`errors_zero_to_23`'s window forecast (or with these ``errors``), with the backend's band
    (its median to its 0.9 quantile) ``spreads_then`` wide at the scored origins and ``width_now``
    wide now."""
    values = np.tile([10.0, 12.0], 200)
    origins = np.arange(100, 340, 10)
    errors = np.arange(len(origins), dtype=np.float64) if errors is None else errors
    references = np.array([values[o : o + 3].max() for o in origins]) - errors
    spreads = np.broadcast_to(np.asarray(spreads_then, dtype=np.float64), len(origins)).copy()
    forecast = Forecast(
        point=np.full(3, 50.0),
        quantiles={0.5: np.full(3, 50.0), 0.9: np.full(3, 50.0 + width_now)},
        hindcast=Hindcast(origins=origins, references=references, spreads=spreads),
    )
    [window] = window_forecasts(values, MINUTE, [(0, len(values))], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    return window


def test_a_wider_backend_band_at_the_same_history_sizes_more(backend_alone):
    # The scores are errors_zero_to_23's (every past band 4, its mean: u(o) = 1). Now the band is 16
    # wide, four times its mean: u(n) = √4 = 2, and every offset from the reference doubles; a band 1
    # wide halves them.
    assert past_forecasts.BAND_LEVELS == (0.5, 0.9)
    usual, unsure, sure = banded_window(4.0, 4.0), banded_window(4.0, 16.0), banded_window(4.0, 1.0)
    assert usual.band_ratio == 1.0
    assert usual.quantiles[0.9] == pytest.approx(50.0 + 2 * 11.0)
    assert unsure.band_ratio == pytest.approx(2.0)
    assert unsure.quantiles[0.9] == pytest.approx(50.0 + 2 * 2 * 11.0)
    assert sure.quantiles[0.9] == pytest.approx(50.0 + 2 * 0.5 * 11.0)
    assert sure.quantiles[0.9] < usual.quantiles[0.9] < unsure.quantiles[0.9]


def test_without_a_band_sizing_is_calibrated_from_errors_alone(backend_alone):
    """A point forecast only (``useQuantileHead: false``): every level is the point, now and at every
    scored origin, so the band is 0 and takes no part."""
    window = banded_window(0.0, 0.0)
    assert window.band_ratio == 1.0
    assert window.quantiles == errors_zero_to_23(np.tile([10.0, 12.0], 200)).quantiles


def test_a_band_as_much_wider_everywhere_is_corrected_by_the_errors_that_followed(backend_alone):
    """The band is measured against the backend's own errors: one five times as wide at every origin,
    its errors unchanged, is five times over-confident in the other direction and sizes the same."""
    assert banded_window(20.0, 20.0).quantiles == pytest.approx(banded_window(4.0, 4.0).quantiles)


def test_a_band_that_foretold_the_errors_sizes_less_and_is_used(backend_alone):
    """Where the backend's band was wide its forecasts missed by much, where narrow by little: in its
    unit every score is the same, so it sizes far less over the day than the noise's unit."""
    spreads = np.tile([1.0, 4.0], 12)
    window = banded_window(spreads, 2.5, errors=4.0 * spreads)
    assert window.band_saving > 0.1
    assert window.band_ratio == 1.0  # 2.5 is the band's mean
    wider = banded_window(spreads, 10.0, errors=4.0 * spreads)
    assert wider.band_ratio == pytest.approx(2.0) and wider.quantiles[0.9] > window.quantiles[0.9]


def test_a_band_that_says_nothing_of_the_errors_is_weighed_and_not_used(backend_alone):
    """The same band, but the large errors fell where it was narrow: in its unit the scores spread
    wider and would have sized more, so sizing stays in the noise's unit, and says why."""
    spreads = np.tile([1.0, 4.0], 12)
    window = banded_window(spreads, 10.0, errors=4.0 * spreads[::-1])
    assert window.band_saving < 0.0
    assert window.band_ratio == 1.0
    assert window.quantiles == banded_window(np.zeros(24), 0.0, errors=4.0 * spreads[::-1]).quantiles


def test_the_band_ratio_is_bounded(backend_alone):
    assert calibration_readings.BAND_RATIO_RANGE == (0.25, 4.0)
    assert banded_window(4.0, 400.0).band_ratio == pytest.approx(2.0)
    assert banded_window(4.0, 0.0).band_ratio == pytest.approx(0.5)


# --- blending with the recent level -----------------------------------------------------------------


def alternating_with_errors(errors: np.ndarray) -> tuple[np.ndarray, Forecast, np.ndarray]:
    """10, 12, 10, … (noise 2 everywhere, last hour's mean 11, every window of 3 holds 12) and past
    forecasts whose references miss by ``errors``; the current backend reference is 12."""
    values = np.tile([10.0, 12.0], 200)
    origins = np.arange(100, 100 + 10 * len(errors), 10)
    references = 12.0 - errors
    return values, forecast_with(references, origins, 12.0), references


def blended(errors: np.ndarray) -> calibration_windows.WindowForecast:
    values, forecast, _ = alternating_with_errors(errors)
    [window] = window_forecasts(values, MINUTE, [(0, len(values))], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    return window


@pytest.mark.usefixtures("unheld")
def test_a_backend_worse_than_the_last_hours_level_is_blended_with_it():
    # Backend errors α·(0 … 23): at backend weight b the scores are (b·e + 1 − b) / 2, so the day's
    # q0.9 (rank ⌈25·0.9⌉ = 23) would have sized c_b = 12 + b·α·(22 − 11.5) on average: the level
    # alone (b = 0) sizes 12, the backend alone 12 + 10.5·α.
    alpha = 0.4  # c_1 = 16.2: the level saves 26 %
    window = blended(alpha * np.arange(24.0))
    assert window.weight == 0.0
    assert window.saving == pytest.approx(4.2 / 16.2)
    assert window.reference == pytest.approx(11.0)  # ρ(n) = ℓ(n)
    # Every score is (12 − 11) / 2 = 0.5: each quantile is 11 + 2 · 0.5.
    assert window.quantiles[0.9] == pytest.approx(12.0)
    assert window.quantiles[0.5] == pytest.approx(12.0)


@pytest.mark.usefixtures("unheld")
def test_a_backend_about_as_good_as_the_level_is_kept():
    alpha = 0.6 / 10.5  # c_1 = 12.6 against the level's 12: 4.8 % saved, under BLEND_SAVING
    assert BLEND_SAVING > 0.6 / 12.6
    window = blended(alpha * np.arange(24.0))
    assert window.weight == 1.0
    assert window.saving == 0.0
    assert window.reference == 12.0
    # The backend's scores α·e / 2; q0.9 is rank 23 of 24.
    assert window.quantiles[0.9] == pytest.approx(12.0 + 2 * alpha * 22 / 2)


@pytest.mark.usefixtures("unheld")
def test_the_blend_is_reported_with_the_forecast():
    window = blended(0.4 * np.arange(24.0))
    assert sized_by(window) == "Blend"
    reported = window_calibration(window)
    assert (reported.backend_share, reported.blended_with) == (0.0, "LastHour")
    assert reported.reference == pytest.approx(11.0)


@pytest.mark.usefixtures("unheld")
def test_a_recorded_forecast_keeps_the_backends_reference_not_the_blend():
    """Records are re-blended from the history at each evaluation, so what is kept is the backend's own."""
    values, forecast, references = alternating_with_errors(0.4 * np.arange(24.0))
    n = len(values)
    newest = T0 + (n - 1) * MINUTE
    assert forecast.hindcast is not None
    records = tuple(
        PastForecast(origin=newest - (n - int(o)) * MINUTE, window=3, reference=float(r))
        for o, r in zip(forecast.hindcast.origins, references, strict=True)
    )
    plain = Forecast(point=np.full(3, 15.0), quantiles=forecast.quantiles)
    window, kept = calibrate(History(values, MINUTE), plain, 3, (0.5, 0.9), records, newest)
    assert window.weight == 0.0
    assert kept[-1].origin == newest
    assert kept[-1].reference == 15.0


# --- holding the reference at the recent peak ------------------------------------------------------


def lasting_bursts() -> np.ndarray:
    """Two days of 10/12 with bursts of 40 for 20 minutes every 97 (no daily period), ending 40
    minutes after a burst ended."""
    values = np.tile([10.0, 12.0], DAY)
    values[(np.arange(len(values)) % 97) < 20] = 40.0
    return values[: len(values) - len(values) % 97 + 60]


def test_a_reference_is_held_at_the_recent_peak_where_bursts_last():
    """A backend that always forecasts 12: held at the last 15 minutes' peak, its reference follows
    each burst from its first minute on, so only burst starts are missed and a quiet hour is sized
    to 12."""
    window = constant_backend_on(lasting_bursts(), 12.0)
    assert window.held
    assert window.unheld_saving == 0.0
    assert window.quantiles[0.9] == pytest.approx(12.0)
    # The quiet hour's peak (12) is no higher than the backend's forecast: the hold does not set it.
    assert sized_by(window) == "Forecast"


def test_the_hold_is_named_when_the_recent_peak_sets_the_size():
    """40 minutes after a burst, 15 minutes into the next: the last 15 minutes' peak (40) is above
    the backend's 12, and the reference is held there."""
    values = lasting_bursts()
    values = values[: len(values) - 60 + 15]
    window = constant_backend_on(values, 12.0)
    assert window.held and window.held_at_peak
    assert window.reference == pytest.approx(40.0)
    assert sized_by(window) == "RecentPeak"
    reported = window_calibration(window)
    assert (reported.held_at_recent_peak, reported.recent_peak) == (True, 40.0)


@pytest.mark.usefixtures("unheld")
def test_without_the_hold_the_same_bursts_size_every_window_for_one():
    """The backend's own reference misses every minute of every burst: its q0.9 sizes every window
    for one."""
    window = constant_backend_on(lasting_bursts(), 12.0)
    assert not window.held
    assert window.quantiles[0.9] > 39.0


def smooth_curve_with_noise() -> tuple[np.ndarray, np.ndarray, Forecast]:
    """Two days of a 2-hour cycle (100 ± 50) plus noise (sd 5) at 1-minute steps, and a backend that
    forecasts the curve itself: the history, the curve and the current forecast with its hindcasts."""
    n = 2 * DAY
    curve = 100.0 + 50.0 * np.sin(2 * np.pi * np.arange(n + 3) / 120)
    values = (curve + np.random.default_rng(3).normal(0.0, 5.0, n + 3))[:n]
    request = hindcast_request(n, 3, MINUTE)
    references = np.array([curve[o : o + 3].max() for o in request.origins])
    forecast = forecast_with(references, request.origins, float(curve[n : n + 3].max()))
    return values, curve, forecast


def test_a_reference_is_released_from_the_peak_where_the_peak_is_the_noises():
    """On a smooth curve with step-to-step noise, the last 15 minutes' peak is the noise's, and lags
    the curve on the way down: the backend's own reference sizes at least PEAK_SAVING less."""
    values, curve, forecast = smooth_curve_with_noise()
    n = len(values)
    [window] = window_forecasts(values, MINUTE, [(0, n)], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    assert not window.held
    assert window.unheld_saving >= calibration_windows.PEAK_SAVING
    assert window.reference == pytest.approx(curve[n : n + 3].max())  # β(n), not the peak
    reported = window_calibration(window)
    assert reported.held_at_recent_peak is False
    assert reported.recent_peak == pytest.approx(values[-15:].max())
    assert sized_by(window) == "Forecast"


def test_the_held_reference_is_the_backends_or_the_recent_peak_whichever_is_higher(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(calibration_windows, "PEAK_SAVING", math.inf)  # never released
    values, _, forecast = smooth_curve_with_noise()
    n = len(values)
    [window] = window_forecasts(values, MINUTE, [(0, n)], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    assert window.held
    assert window.reference == pytest.approx(max(float(forecast.point.max()), values[-15:].max()))


# --- blending with yesterday's window --------------------------------------------------------------


def with_a_job_every_36_minutes(days: int) -> np.ndarray:
    """10, 12, 10, … and a job at 40 for the first 5 minutes of every 36 (40 a day, at the same times
    every day; 36 and the hindcast spacing of 10 minutes share no period a score could lock onto)."""
    values = np.tile([10.0, 12.0], days * DAY // 2)
    values[(np.arange(len(values)) % 36) < 5] = 40.0
    return values


def constant_backend_on(values: np.ndarray, level: float) -> calibration_windows.WindowForecast:
    """The window forecast (windows of 3) at the end of ``values`` of a backend that always forecasts
    ``level``."""
    request = hindcast_request(len(values), 3, MINUTE)
    forecast = forecast_with(np.full(len(request.origins), level), request.origins, level)
    [window] = window_forecasts(values, MINUTE, [(0, len(values))], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    return window


def flat_backend_on(values: np.ndarray, begin: int) -> calibration_windows.WindowForecast:
    """The window forecast at the end of ``values[begin:]`` of a backend that always forecasts 12: it
    never sees the jobs coming."""
    return constant_backend_on(values[begin:], 12.0)


def test_a_backend_that_misses_what_recurs_daily_is_blended_with_yesterdays_window():
    values = with_a_job_every_36_minutes(3)
    window = flat_backend_on(values, 0)
    # Every window held yesterday exactly what it holds today: blended with yesterday alone, every
    # score is 0, so each quantile is Y(n), the maximum of the window a day before: a job (40).
    assert window.partner == calibration_blend.YESTERDAY
    assert window.weight == 0.0
    assert window.saving >= BLEND_SAVING + calibration_blend.YESTERDAY_SAVING
    assert window.reference == 40.0
    assert window.quantiles == {0.5: 40.0, 0.9: 40.0}


def test_yesterdays_window_sizes_down_when_yesterday_held_no_job_then():
    values = with_a_job_every_36_minutes(3)[:-10]  # the next window starts 26 minutes into a cycle
    window = flat_backend_on(values, 0)
    assert window.partner == calibration_blend.YESTERDAY
    assert window.quantiles == {0.5: 12.0, 0.9: 12.0}


def test_yesterday_is_no_partner_without_a_day_before_every_scored_forecast():
    values = with_a_job_every_36_minutes(3)
    window = flat_backend_on(values, len(values) - DAY - 100)  # a day and 100 minutes of history
    assert window.calibrated
    assert window.partner == calibration_blend.LEVEL


def test_a_blend_with_yesterday_is_reported_with_the_forecast():
    window = flat_backend_on(with_a_job_every_36_minutes(3), 0)
    assert sized_by(window) == "Blend"
    reported = window_calibration(window)
    assert (reported.backend_share, reported.blended_with, reported.reference) == (0.0, "Yesterday", 40.0)


def test_too_few_scores_fall_back_to_the_backends_own_band():
    values = np.tile([10.0, 12.0], 100)
    origins = np.arange(100, 100 + 10 * (MIN_SCORES - 1), 10)
    forecast = forecast_with(np.full(len(origins), 11.0), origins, 30.0)
    [window] = window_forecasts(values, MINUTE, [(0, 200)], [forecast], 3, (0.5, 0.9), [answered(forecast, 3)])
    assert not window.calibrated
    assert window.scores == 0
    assert window.quantiles == {0.5: 30.0, 0.9: 60.0}


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0, max_value=1e5), min_size=60, max_size=300),
    errors=st.lists(st.floats(min_value=-1e4, max_value=1e4), min_size=MIN_SCORES, max_size=40),
    levels=st.lists(st.floats(min_value=0.01, max_value=0.99), min_size=1, max_size=4, unique=True),
)
def test_property_quantiles_are_finite_ordered_and_non_negative_for_demand(values, errors, levels):
    series = np.array(values)
    origins = np.linspace(2, len(series) - 4, len(errors)).astype(np.intp)
    references = np.array([series[o : o + 3].max() for o in origins]) + np.array(errors)
    forecast = forecast_with(references, origins, float(series[-1]))
    [window] = window_forecasts(
        series, MINUTE, [(0, len(series))], [forecast], 3, tuple(levels), [answered(forecast, 3)]
    )
    ordered = [window.quantiles[q] for q in sorted(levels)]
    assert all(np.isfinite(ordered))
    assert ordered == sorted(ordered)
    assert min(ordered) >= 0.0


# --- where the past forecasts come from ------------------------------------------------------------


def test_the_hindcast_grid_covers_the_last_day_every_ten_minutes_and_the_same_time_yesterday_newest_first():
    request = hindcast_request(20160, 6, MINUTE)
    assert request.window == 6
    assert request.origins[0] == 20160 - 6
    assert np.all(np.diff(request.origins) < 0)
    yesterday = 20160 - DAY
    grid = request.origins[request.origins != yesterday]
    assert len(grid) == MAX_FORECASTS
    assert set(np.diff(grid).tolist()) == {-10}
    assert yesterday in request.origins and yesterday not in grid
    assert request.origins[-1] >= 20160 - 6 - SPAN // MINUTE
    assert hindcast_request(30, 6, MINUTE).origins.min() >= 1
    # Where the grid already holds it (a coarse step), it is not asked for twice.
    coarse = hindcast_request(2000, 2, timedelta(minutes=30))
    assert len(set(coarse.origins.tolist())) == len(coarse.origins)
    assert 2000 - 48 in coarse.origins


def test_recorded_forecasts_are_thinned_expired_and_bounded():
    records: tuple[PastForecast, ...] = ()
    for minute in range(3 * DAY):
        records = remember(records, T0 + minute * MINUTE, 6, float(minute), MINUTE)
    assert len(records) <= MAX_RECORDS
    assert records[-1].origin == T0 + (3 * DAY - 10) * MINUTE  # one every 10 minutes
    gaps = {b.origin - a.origin for a, b in itertools.pairwise(records)}
    assert gaps == {timedelta(minutes=10)}
    assert records[0].origin > T0 + (3 * DAY - 1) * MINUTE - SPAN - 6 * MINUTE


def test_recorded_forecasts_calibrate_exactly_as_the_same_hindcasts_do():
    """A backend that does not hindcast is scored on the forecasts presage recorded; given the same
    references, the result is the same as from hindcasts."""
    values = daily_poisson(2, 80.0, 3)
    n = len(values)
    history = History(values, MINUTE)
    request = hindcast_request(n, 5, MINUTE)
    hindcast = SeasonalNaive(timedelta(hours=24), 1).forecast_one(history, 5, (0.5, 0.9), request)
    assert hindcast.hindcast is not None
    newest = T0 + (n - 1) * MINUTE
    assert hindcast.hindcast.spreads is not None
    records = tuple(
        PastForecast(origin=newest - (n - int(o)) * MINUTE, window=5, reference=float(r), spread=float(u))
        for o, r, u in zip(
            hindcast.hindcast.origins[::-1],
            hindcast.hindcast.references[::-1],
            hindcast.hindcast.spreads[::-1],
            strict=True,
        )
    )
    plain = Forecast(point=hindcast.point, quantiles=hindcast.quantiles)
    from_hindcasts, kept = calibrate(history, hindcast, 5, (0.5, 0.9), (), newest)
    from_records, recorded = calibrate(history, plain, 5, (0.5, 0.9), records, newest)
    assert kept == ()
    assert from_records == from_hindcasts
    assert from_records.band_saving != 0.0  # the backend's band was weighed
    # The newest record is 5 minutes old, less than the 10 minutes between records: nothing is added.
    assert recorded[-1] == records[-1]


def test_hindcasts_answered_together_calibrate_exactly_as_each_answered_alone():
    # Early decisions have too few scores and some origins without a forecast (NaN references):
    # both paths must keep, drop and order the same past forecasts.
    values = daily_poisson(4, 60.0, seed=9)
    backend = SeasonalNaive(season=timedelta(hours=24), cycles=2)
    window, levels = 6, (0.5, 0.9, 0.95)
    spans = [(0, int(end)) for end in range(DAY + 20, 3 * DAY, 7)]
    requests = [
        ForecastRequest(History(values[b:e], MINUTE), window, levels, hindcast_request(e - b, window, MINUTE))
        for b, e in spans
    ]
    forecasts = backend.forecast_windows(values, spans, requests)
    together = answered_together(forecasts, window)
    assert together is not None
    alone = [answered(f, window) for f in forecasts]
    batch = calibrated_windows(values, MINUTE, spans, forecasts, window, levels, together)
    single = calibrated_windows(values, MINUTE, spans, forecasts, window, levels, alone)
    assert (batch.scores == 0).any() and (batch.scores >= MIN_SCORES).any()
    for name in ("quantiles", "bands", "reference", "scores", "weight", "partner", "held", "noise", "band_ratio"):
        assert np.array_equal(getattr(batch, name), getattr(single, name), equal_nan=True), name


def test_hindcasts_of_different_lengths_are_not_answered_together():
    values = daily_poisson(2, 60.0, seed=2)
    backend = SeasonalNaive(season=timedelta(hours=24), cycles=1)
    spans = [(0, 300), (0, DAY + 100)]  # the first has fewer origins after the history's start
    requests = [
        ForecastRequest(History(values[b:e], MINUTE), 3, (0.5, 0.9), hindcast_request(e - b, 3, MINUTE))
        for b, e in spans
    ]
    assert answered_together(backend.forecast_windows(values, spans, requests), 3) is None


def test_recorded_forecasts_of_another_resolution_are_not_used():
    state = CalibrationState(signals=(SignalForecasts(name="rps", step=MINUTE, forecasts=(PastForecast(T0, 3, 1.0),)),))
    assert state.of("rps", MINUTE) == (PastForecast(T0, 3, 1.0),)
    assert state.of("rps", 5 * MINUTE) == ()
    assert state.of("cpu", MINUTE) == ()

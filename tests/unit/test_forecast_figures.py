"""``status.lastForecast``'s figures as ``kubectl get`` shows them (FORECAST): 4 significant digits and
every digit of the whole part, never four decimals of a figure that means nothing past its third."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from presage_scaler.api.predictive_scaler_status import LastForecast
from presage_scaler.api.quantities import format_significant


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (274.31, "274.3"),
        (5.1072, "5.107"),
        (12345.67, "12346"),  # every digit of the whole part
        (0.012345, "0.01235"),
        (9.99996, "10"),
        (-3.21987, "-3.22"),
        (100.0, "100"),
        (0.0, "0"),
        (1e-9, "0"),  # at most 6 fraction digits
        (float("inf"), "inf"),
    ],
)
def test_format_significant(value: float, shown: str) -> None:
    assert format_significant(value) == shown


def test_the_forecast_is_written_as_shown_and_read_back() -> None:
    forecast = LastForecast(
        backend="default",
        generated_at=datetime(2026, 12, 1, 9, tzinfo=UTC),
        lead_time_seconds=120,
        point=5.107216,
        quantiles={"0.5": 4.98765, "0.9": 1234.5678},
    )
    wire = forecast.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert (wire["point"], wire["quantiles"]) == ("5.107", {"0.5": "4.988", "0.9": "1235"})
    assert LastForecast.model_validate(wire).point == pytest.approx(5.107)

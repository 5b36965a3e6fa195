"""The sample grid: whole steps of a duration."""

from __future__ import annotations

from datetime import timedelta

import pytest

from presage_scaler.series.timegrid import steps_for

M5 = timedelta(minutes=5)


@pytest.mark.parametrize(
    ("lead", "step", "steps"),
    [(timedelta(minutes=2), M5, 1), (timedelta(minutes=5), M5, 1), (timedelta(minutes=11), M5, 3)],
)
def test_steps_for(lead, step, steps):
    assert steps_for(lead, step) == steps

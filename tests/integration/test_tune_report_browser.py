"""presage tune's report in a real browser: headless Chromium opens tune.html from disk, with no
network, and both plots draw their series with titled axes."""

from __future__ import annotations

from pathlib import Path

import pytest

from presage_scaler.cli.main import main
from presage_scaler.tune.invocation import REPORT
from presage_scaler.tune.request import HELD_OUT_FAILED
from tests.harness.chromium import open_page
from tests.integration.test_report_browser import EXAMPLE, PROBE

pytestmark = pytest.mark.integration


@pytest.fixture
def report(tmp_path: Path) -> Path:
    """Tuned in a plain fixture: the command runs its own event loop."""
    argv = [str(EXAMPLE), "--per-replica", "20", "--lead-time", "5m", "--slo", "1%", "--jobs", "1", "--no-progress"]
    # Tuned either way: the example's choice fails the held-out check (status 3), the report is written.
    assert main(["tune", *argv, "--out", str(tmp_path)]) in (0, HELD_OUT_FAILED)
    return tmp_path / REPORT


async def test_both_plots_draw_with_titled_axes_no_script_error_and_no_request(report: Path) -> None:
    run = await open_page(report, PROBE, report.with_suffix(".png"))
    assert run.errors == []
    assert run.external_requests == []
    frontier, held_out = run.probe
    # Per panel: candidates meeting the SLO, the others, the frontier, chosen, starting spec, reactive HPA
    # and the seasonal trigger as set and tuned.
    assert frontier["series"] == 16
    assert frontier["x"] == ["cost (replica-hours ÷ the oracle's)"] * 2
    assert frontier["y"] == ["under-provisioned time %"] * 2
    assert held_out["series"] == 2  # demand and the chosen capacity; the others wait in the legend
    assert held_out["x"] == ["time (UTC+00:00)"]

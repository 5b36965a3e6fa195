"""The backtest report in a real browser: headless Chromium (Debian's package, installed by the
harness when missing) opens report.html from disk, with no network to fetch anything from."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from presage_scaler.cli.main import main
from tests.harness.chromium import open_page

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "examples" / "nab_elb_request_count_5m.csv"
# Each plot's drawn series and axis titles, once every plot has drawn a series, or whatever is there
# 15 s after the page started loading (so a plot that never draws fails the assertions, not a timeout).
PROBE = """(() => {
  const plots = [...document.querySelectorAll('.plotly-graph-div')];
  const drawn = plots.length > 0 && plots.every(p => p.querySelector('.scatterlayer .trace'));
  if (!drawn && performance.now() < 15000) return null;
  return plots.map(p => ({
    series: p.querySelectorAll('.scatterlayer .trace').length,
    x: [...p.querySelectorAll('[class^="g-x"][class$="title"]')].map(t => t.textContent).filter(Boolean),
    y: [...p.querySelectorAll('[class^="g-y"][class$="title"]')].map(t => t.textContent),
  }));
})()"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("backtest")
    argv = [str(EXAMPLE), "--per-replica", "20", "--lead-time", "5m", "--warmup", "2d", "--no-progress"]
    assert main(["backtest", *argv, "--out", str(out)]) == 0
    return out / "report.html"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_every_plot_draws_with_labelled_axes_no_script_error_and_no_request(report, tmp_path):
    screenshot = tmp_path / "report.png"
    run = await open_page(report, PROBE, screenshot)
    assert run.errors == []
    assert run.external_requests == []
    capacity, shortfalls, cost = run.probe
    # Demand, the band's two edges, presage's capacity, its shortfalls; the other policies wait in the legend.
    assert capacity["series"] == 5
    # One row per policy that can fall short: presage, both HPAs, both seasonal triggers, static.
    assert shortfalls["series"] == 6
    assert cost["series"] == 7  # every policy
    for plot in run.probe:
        assert plot["x"] == ["time (UTC+00:00)"], plot
        assert all(plot["y"]) and plot["y"], plot
    assert capacity["y"] == ["demand and capacity (the signal's units)"]
    assert shortfalls["y"] == ["unserved"] * 6
    width, height = _png_size(screenshot)
    assert width >= 1200 and height >= 2500  # the whole page, not the first screen

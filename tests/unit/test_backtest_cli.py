"""``presage backtest`` end to end on the example trace, in-process: the files, their keys, the report."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path

import numpy as np
import pytest

from presage_scaler.backtest import progress, trace
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.progress import ProgressBar
from presage_scaler.backtest.trace import load_prometheus
from presage_scaler.cli.main import SIGPIPE_EXIT, main
from presage_scaler.clients.prometheus import SampledSeries

EXAMPLE = Path(__file__).parents[2] / "examples" / "nab_elb_request_count_5m.csv"
POLICIES = (
    "presage",
    "reactive",
    "reactive_cost_matched",
    "seasonal_trigger",
    "seasonal_trigger_cost_matched",
    "static",
    "oracle",
)
KEYS = {"under_provisioned_pct", "unserved_pct", "replica_hours", "cost_vs_oracle", "changes", "largest_shortfall"}
BASE = [str(EXAMPLE), "--per-replica", "20", "--lead-time", "5m", "--warmup", "1d", "--no-progress"]

MINUTE = timedelta(minutes=1)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("backtest")
    assert main(["backtest", *BASE, "--out", str(out)]) == 0
    return out


def test_the_three_files_are_written(run_dir):
    assert {p.name for p in run_dir.iterdir()} == {"summary.json", "decisions.csv", "report.html"}


def test_summary_has_the_documented_keys(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    for name in POLICIES:
        assert summary[name].keys() >= KEYS, name
    assert summary["oracle"]["under_provisioned_pct"] == 0.0
    assert summary["oracle"]["cost_vs_oracle"] == 1.0
    assert summary["reactive"]["headroom"] == "10%"
    assert summary["cost_matched_headroom"] == summary["reactive_cost_matched"]["headroom"]
    match = summary["cost_match"]  # replica counts are whole, so the match may only come close
    assert match["replica_hours"] == pytest.approx(match["target_replica_hours"], rel=0.01)
    assert summary["seasonal_trigger"]["utilization"] == "75%"
    assert summary["cost_matched_utilization"] == summary["seasonal_trigger_cost_matched"]["utilization"]
    trigger = summary["trigger_cost_match"]
    assert trigger["utilization"] == summary["cost_matched_utilization"]
    assert trigger["replica_hours"] == pytest.approx(trigger["target_replica_hours"], rel=0.01)
    assert trigger["target_replica_hours"] == summary["presage"]["replica_hours"]
    assert summary["seasonal_trigger_cost_matched"]["replica_hours"] == trigger["replica_hours"]
    params = summary["parameters"]
    assert (params["trigger_utilization"], params["trigger_week_ago"], params["trigger_look_ahead"]) == (
        "75%",
        "168h",
        "30m",
    )
    assert params["trace_step"] == "5m"
    assert params["lead_time"] == "5m"
    assert params["warmup"] == "24h"
    assert params["per_replica"] == 20.0
    assert params["spec"]["policy"]["targetQuantile"] == "0.9"


def test_summary_says_where_the_cost_goes(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    calibration = summary["calibration"]
    assert (calibration["target_quantile"], calibration["scale_down_quantile"]) == (0.9, 0.5)
    assert 0.85 <= calibration["target_coverage"] <= 0.95
    assert 0.4 <= calibration["scale_down_coverage"] <= 0.6
    assert calibration["decisions"] > 3000 and calibration["calibrated_share"] == 1.0
    shares = summary["presage"]["constraint_shares"]
    assert sum(shares.values()) == pytest.approx(1.0)
    # This spiky ELB series is the textbook case: the guard holds nearly every count.
    assert next(iter(shares)) == "ForecastUncertainty"
    assert summary["presage"]["note"].startswith("ForecastUncertainty held ")
    assert "maxRelativeSpread 0.25" in summary["presage"]["note"]
    assert summary["static"]["changes"] == 0


def test_decisions_csv_has_every_decision(run_dir):
    with (run_dir / "decisions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["step", "timestamp", "replicas"]
    assert len(rows) == 4039  # 4,040 grid steps; the first decision needs one complete point
    assert rows[0]["step"] == "1"
    assert rows[0]["timestamp"] == "2014-04-10T00:09:00+00:00"
    assert all(int(r["replicas"]) >= 1 for r in rows)


def test_the_report_is_one_self_contained_page_with_three_plots(run_dir):
    html = (run_dir / "report.html").read_text()
    assert html.count('class="plotly-graph-div"') == 3  # capacity, shortfalls, cost
    assert html.count("plotly.js v") == 1  # the library inlined once (tests/integration renders the page)
    assert not re.search(r"<script[^>]+src=|<link|@import|url\(http", html)
    for question in ("follow the demand", "Where did each policy fall short", "cost over time"):
        assert question in html
    assert "reactive HPA, cost-matched" in html
    assert "seasonal trigger, cost-matched" in html and "at 75% target utilization" in html


def test_the_same_decisions_are_counted_everywhere(run_dir, capsys):
    """Constraint counts and shares in summary.json, the report's table and the terminal all cover the
    decisions after the warm-up, the steps every metric counts."""
    summary = json.loads((run_dir / "summary.json").read_text())
    params = summary["parameters"]
    report_from = params["trace_points"] - params["reported_steps"]
    with (run_dir / "decisions.csv").open() as handle:
        after_warmup = sum(int(row["step"]) >= report_from for row in csv.DictReader(handle))
    counts, shares = summary["presage"]["constraints"], summary["presage"]["constraint_shares"]
    assert sum(counts.values()) == after_warmup
    assert list(shares) == list(counts)
    assert shares == pytest.approx({name: count / after_warmup for name, count in counts.items()})
    html = (run_dir / "report.html").read_text()
    for name, count in counts.items():
        assert f"<tr><td>{name}</td><td>{count}</td><td>{100 * shares[name]:.1f} %</td></tr>" in html
    assert escape(f"decided by, in the {after_warmup} decisions after the warm-up: ") in html


def test_the_table_is_printed_counting_the_summarys_decisions(tmp_path, capsys):
    assert main(["backtest", *BASE, "--out", str(tmp_path / "out")]) == 0
    output = capsys.readouterr().out
    labels = ("presage", "reactive HPA", "reactive HPA, cost-matched", "seasonal trigger", "static (warm-up peak)")
    for label in (*labels, "seasonal trigger, cost-matched", "oracle"):
        assert label in output
    rows = {line[:32].rstrip(): line[32:].split() for line in output.splitlines()[2:9]}
    assert rows["seasonal trigger"][:2] == ["util", "75%"]
    assert rows["seasonal trigger, cost-matched"][0] == "util"
    assert "the sizing window's highest demand was at or below the q0.9 forecast" in output
    assert "ForecastUncertainty held" in output
    presage = json.loads((tmp_path / "out" / "summary.json").read_text())["presage"]
    counts, shares = presage["constraints"], presage["constraint_shares"]
    decisions = sum(counts.values())
    counted = ", ".join(f"{name} {counts[name]} ({100 * share:.1f} %)" for name, share in shares.items())
    assert f"decided by, in the {decisions} decisions after the warm-up: {counted}\n" in output


def test_a_scaler_yaml_with_overrides(tmp_path):
    spec = tmp_path / "scaler.yaml"
    spec.write_text(
        "apiVersion: scaling.presage.sh/v1alpha1\nkind: PredictiveScaler\nmetadata: {name: web}\nspec:\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
        "  signal: {prometheus: {address: 'http://p:9090', query: q}, resolution: 10m}\n"
        "  capacity: {perReplica: 20}\n  leadTime: {static: 10m}\n  policy: {maxReplicas: 100}\n"
    )
    backend = tmp_path / "backend.yaml"
    backend.write_text("kind: ForecastBackend\nspec: {type: SeasonalNaive, seasonalNaive: {season: 24h}}\n")
    out = tmp_path / "out"
    argv = [str(EXAMPLE), "--spec", str(spec), "--backend-spec", str(backend), "--interval", "15m"]
    assert main(["backtest", *argv, "--target-quantile", "0.95", "--warmup", "2d", "--out", str(out)]) == 0
    params = json.loads((out / "summary.json").read_text())["parameters"]
    assert params["resolution"] == "10m"
    assert params["interval"] == "15m"
    assert params["lead_time"] == "10m"
    assert params["target_quantile"] == 0.95
    assert params["model"] == "seasonal-naive/24hx3"
    with (out / "decisions.csv").open() as handle:
        steps = [int(row["step"]) for row in csv.DictReader(handle)]
    # Every 15m from the first complete 10m point (step 2 of 5m), from the last such step at least
    # PRE_ROLL (288 steps) before the end of the 2-day warm-up (step 576).
    assert steps[:3] == [287, 290, 293]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([str(EXAMPLE), "--lead-time", "5m"], "--per-replica and --lead-time are required"),
        (["missing.csv", "--per-replica", "1", "--lead-time", "5m"], "missing.csv"),
        ([str(EXAMPLE), "--per-replica", "1", "--lead-time", "5m", "--warmup", "30d"], "warm-up"),
        ([str(EXAMPLE), "--per-replica", "1", "--lead-time", "5m", "--target-quantile", "0.3"], "scaleDownQuantile"),
        (["--per-replica", "1", "--lead-time", "5m"], "give a TRACE file"),
        (["--prometheus", "http://p", "--query", "q", "--start", "soon", "--end", "0"], "--start: cannot read"),
    ],
)
def test_errors_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert main(["backtest", *argv, "--no-progress", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("per_replica", "message"),
    [
        ("0", "'0' is not a positive number"),
        ("-5", "'-5' is not a positive number"),
        ("nan", "'nan' is not a positive number"),
        ("inf", "'inf' is not a positive number"),
        ("abc", "'abc' is not a positive number"),
        ("1e-300", "more digits than spec.capacity.perReplica holds"),
        ("1e-9", "replicas; give the capacity of one replica"),
    ],
)
def test_a_bad_per_replica_is_one_line_and_exit_2(tmp_path, capsys, per_replica, message):
    argv = [str(EXAMPLE), "--per-replica", per_replica, "--lead-time", "5m", "--no-progress", "--out", str(tmp_path)]
    try:
        code = main(["backtest", *argv])
    except SystemExit as exit_:  # argparse refuses a flag's value by exiting
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_the_trigger_utilization_is_a_flag(tmp_path):
    assert main(["backtest", *BASE, "--trigger-utilization", "60%", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["seasonal_trigger"]["utilization"] == "60%"
    assert summary["parameters"]["trigger_utilization"] == "60%"
    # The cost match starts from the trigger as set and lands where presage's cost is, whatever that start.
    assert summary["trigger_cost_match"]["target_replica_hours"] == summary["presage"]["replica_hours"]


@pytest.mark.parametrize("utilization", ["0", "0%", "-5%", "101%", "abc", "nan"])
def test_a_bad_trigger_utilization_is_one_line_and_exit_2(tmp_path, capsys, utilization):
    argv = [*BASE, "--trigger-utilization", utilization, "--out", str(tmp_path)]
    try:
        code = main(["backtest", *argv])
    except SystemExit as exit_:  # argparse refuses a flag's value by exiting
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and "--trigger-utilization" in err and "above 0 and at most 100 %" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def _csv(tmp_path, values: list[str]) -> str:
    path = tmp_path / "trace.csv"
    path.write_text("timestamp,value\n" + "".join(f"{1700000000 + 300 * i},{v}\n" for i, v in enumerate(values)))
    return str(path)


def test_a_trace_of_mostly_non_numbers_is_refused(tmp_path, capsys):
    trace = _csv(tmp_path, ["n/a"] * 862 + ["5", "6"])
    code = main(["backtest", trace, "--per-replica", "1", "--lead-time", "5m", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "only 2 of 864 steps hold a numeric value" in err, err


def test_negative_demand_is_refused_naming_the_row(tmp_path, capsys):
    trace = _csv(tmp_path, ["5", "6", "-2", "7"])
    code = main(["backtest", trace, "--per-replica", "1", "--lead-time", "5m", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "trace.csv:4: demand -2 is negative" in err, err


def test_gaps_are_reported_on_the_terminal(tmp_path, capsys):
    values = [str(10 + (i % 12)) for i in range(600)]
    values[100:130] = ["n/a"] * 30
    trace = _csv(tmp_path, values)
    argv = ["--per-replica", "2", "--lead-time", "5m", "--warmup", "1d", "--no-progress", "--out", str(tmp_path / "o")]
    assert main(["backtest", trace, *argv]) == 0
    assert "note: 30 of 600 steps (5.0%) of the trace had no numeric value" in capsys.readouterr().out


def _rows(tmp_path: Path, name: str, rows: list[tuple[object, object]]) -> str:
    path = tmp_path / name
    path.write_text("timestamp,value\n" + "".join(f"{stamp},{value}\n" for stamp, value in rows))
    return str(path)


JAN_1 = 1767225600  # 2026-01-01T00:00:00Z
SCALER_FILE = (
    "apiVersion: scaling.presage.sh/v1alpha1\nkind: PredictiveScaler\nmetadata: {name: web}\nspec:\n"
    "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
    "  signal: {prometheus: {address: 'http://p:9090', query: q}, resolution: 5m}\n"
    "  capacity: {perReplica: 20}\n"
    "  policy: {maxReplicas: 10, targetQuantile: 0.95}\n"
)


@pytest.mark.parametrize(
    ("make", "extra", "message"),
    [
        (lambda tmp: _rows(tmp, "header.csv", []), [], "header.csv: a header and no rows under it"),
        (
            lambda tmp: _rows(tmp, "ms.csv", [(1000 * (JAN_1 + 300 * i), 5) for i in range(600)]),
            [],
            "looks like Unix milliseconds (2026-01-01T00:00:00+00:00): divide the timestamps by 1000",
        ),
        (
            lambda tmp: _rows(tmp, "jittered.csv", [(JAN_1 + 300 * i + (i * 7) % 5 - 2, 5) for i in range(600)]),
            [],
            "is not on the",
        ),
        (lambda tmp: str(EXAMPLE), ["--resample", "0s"], "--resample 0s: the step must be at least 1s"),
        (lambda tmp: str(EXAMPLE), ["--spec", "{spec}"], 'targetQuantile: 0.95 must be written in quotes: "0.95"'),
    ],
    ids=["header only", "milliseconds", "jittered", "resample 0s", "bare quantile"],
)
def test_cli_edges_are_one_line_and_exit_2(tmp_path, capsys, make, extra, message):
    spec = tmp_path / "scaler.yaml"
    spec.write_text(SCALER_FILE)
    argv = [make(tmp_path), "--lead-time", "5m", *(a.format(spec=spec) for a in extra)]
    assert main(["backtest", *argv, "--per-replica", "20", "--no-progress", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    if "jittered" in argv[0]:
        assert err.rstrip().endswith("pass --resample 5m"), err


def test_resample_places_a_jittered_trace_on_its_grid(tmp_path, capsys):
    jittered = _rows(tmp_path, "jittered.csv", [(JAN_1 + 300 * i + (i * 7) % 5 - 2, 10 + i % 12) for i in range(600)])
    argv = ["--per-replica", "2", "--lead-time", "5m", "--warmup", "1d", "--no-progress", "--out", str(tmp_path / "o")]
    assert main(["backtest", jittered, "--resample", "5m", *argv]) == 0
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["parameters"]["trace_step"] == "5m"
    assert main(["backtest", "--prometheus", "http://p", "--query", "q", "--start", "0", "--end", "60",
                 "--resample", "5m", *argv]) == 2  # fmt: skip
    assert "--resample places a TRACE file on a grid" in capsys.readouterr().err


def _presage(*argv: str) -> list[str]:
    return [sys.executable, "-m", "presage_scaler.cli.main", *argv]


def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(tmp_path):
    """The real CLI writing into a pipe whose reader has gone (what ``| head -1`` leaves once it has its
    line): no traceback, the status a shell shows for a tool SIGPIPE ended."""
    command = _presage("backtest", *BASE, "--out", str(tmp_path))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(timeout=120) == SIGPIPE_EXIT and err == "", err


def test_piped_into_head_it_prints_the_first_line_and_no_traceback(tmp_path):
    pipeline = f"{shlex.join(_presage('backtest', *BASE, '--out', str(tmp_path)))} | head -1; exit ${{PIPESTATUS[0]}}"
    result = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith("policy ") and result.stdout.count("\n") == 1, result.stdout
    assert result.returncode in (0, SIGPIPE_EXIT) and result.stderr == "", result.stderr


def test_progress_bar_draws_after_its_delay(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    stream = io.StringIO()
    with ProgressBar(stream) as bar:
        bar("presage", 128, 256)
        bar("presage", 256, 256)
    text = stream.getvalue()
    assert "presage" in text and "100%" in text and "256/256" in text and text.endswith("\n")
    quiet = io.StringIO()
    with ProgressBar(quiet, enabled=False) as bar:
        bar("presage", 256, 256)
    assert quiet.getvalue() == ""


def _serve(monkeypatch: pytest.MonkeyPatch, series: SampledSeries) -> None:
    """load_prometheus reads ``series`` from a stand-in client (the real one is tested on a real server)."""

    class FakeClient:
        def __init__(self, address: str, **auth: object) -> None:
            self.address = address
            self.auth = auth

        async def __aenter__(self) -> FakeClient:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def query_range(self, query: str, start: datetime, end: datetime, step: timedelta) -> SampledSeries:
            return series

    monkeypatch.setattr(trace, "PrometheusClient", FakeClient)


def test_a_prometheus_trace_starts_one_step_before_its_first_sample(monkeypatch):
    first = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    _serve(monkeypatch, SampledSeries(values=np.array([1.0, 2.0]), step=MINUTE, start=first, gap_steps=0))
    loaded = asyncio.run(load_prometheus("http://p:9090", "q", first, first, MINUTE))
    assert loaded.start == datetime(2026, 1, 1, tzinfo=UTC)
    assert loaded.values.tolist() == [1.0, 2.0]
    assert loaded.source == "http://p:9090 q"


@pytest.mark.parametrize(("gaps", "refused"), [([False, True, False, False], False), ([True, True, True, False], True)])
def test_a_prometheus_trace_keeps_its_gaps_and_is_refused_when_mostly_gaps(monkeypatch, gaps, refused):
    first = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    mask = np.array(gaps)
    _serve(monkeypatch, SampledSeries(np.arange(4.0), MINUTE, first, int(mask.sum()), gaps=mask))
    load = load_prometheus("http://p:9090", "q", first, first, MINUTE)
    if refused:
        with pytest.raises(BacktestError, match="http://p:9090 q: only 1 of 4 steps hold a numeric value"):
            asyncio.run(load)
    else:
        assert asyncio.run(load).gaps.tolist() == gaps


@pytest.mark.parametrize("missing", [("plotly",), ("pandas", "plotly")])
def test_without_the_backtest_extra_it_says_how_to_install_it(tmp_path, capsys, monkeypatch, missing):
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` raise ImportError
    assert main(["backtest", *BASE, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"presage backtest: {' and '.join(missing)} ")
    assert "pip install 'presage-scaler[backtest]'" in err
    assert len(err.strip().splitlines()) == 1 and not any(tmp_path.iterdir()), err

"""``presage tune`` end to end on a small trace: the held-out part never influences the choice, the
chosen spec is never dearer than the starting one, spec.yaml replays exactly under ``presage
backtest --spec``, and bad input is one line with exit status 2."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from datetime import timedelta
from html import escape
from pathlib import Path

import numpy as np
import pytest
import yaml

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.config import Overrides, backend_spec, make_backend
from presage_scaler.backtest.runner import Setup, plan
from presage_scaler.backtest.trace import Trace
from presage_scaler.cli.main import main
from presage_scaler.tune.held_out import check
from presage_scaler.tune.knobs import knobs_of
from presage_scaler.tune.output import alike_line, document, table, verdict
from presage_scaler.tune.prepared import forecast
from presage_scaler.tune.replay import Decisions, replay
from presage_scaler.tune.request import HELD_OUT_FAILED
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import Trial, TuneResult, TuneSetup, tune
from presage_scaler.tune.verdict import Verdict, advise, held_out_line, undecided_line
from tests.unit.test_tune_parts import DAY, STEP, daily_trace

WARMUP = timedelta(days=2)
SLO = Slo(1.0)


OVERRIDES = Overrides(per_replica=20.0, lead_time=timedelta(minutes=10))


def setup_for(**changes: object) -> TuneSetup:
    setup = TuneSetup(spec=None, overrides=OVERRIDES, backend=backend_spec(None), slo=SLO, warmup=WARMUP)
    return replace(setup, **changes)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return daily_trace(9, seed=3)


@pytest.fixture(scope="module")
def result(trace: Trace) -> TuneResult:
    return tune(trace, setup_for())


def test_the_split_is_stated_and_respected(result, trace):
    parts = result.split
    assert parts.report_from == 2 * DAY
    assert (parts.in_sample, parts.held_out) == (timedelta(days=2), timedelta(days=5))
    assert parts.end == len(trace)
    assert "held-out" in parts.describe()


def test_the_chosen_spec_meets_the_service_level_and_costs_no_more_than_the_start(result):
    assert result.met
    assert result.chosen.in_sample.under_pct <= SLO.under_pct
    assert result.chosen.in_sample.replica_hours <= result.default.in_sample.replica_hours
    feasible = [t for t in result.trials if SLO.met(t.in_sample)]
    assert result.chosen.in_sample.replica_hours == min(t.in_sample.replica_hours for t in feasible)
    assert result.default.knobs.as_dict()["targetQuantile"] == "0.9"  # the first trial is the start


def test_the_held_out_part_never_influences_the_choice(result, trace):
    """Replace everything after the split with a different future: the same candidates are tried in
    the same order, with the same in-sample figures, and the same one is chosen."""
    future = trace.values.copy()
    rng = np.random.default_rng(99)
    held = slice(result.split.held_out_from, None)
    future[held] = future[held] * rng.uniform(0.2, 3.0, len(future[held])) + 500 * (
        rng.random(len(future[held])) < 0.05
    )
    other = tune(replace(trace, values=future), setup_for())
    assert [t.knobs for t in other.trials] == [t.knobs for t in result.trials]
    assert [t.in_sample for t in other.trials] == [t.in_sample for t in result.trials]
    assert other.chosen.knobs == result.chosen.knobs
    # maxReplicas defaults to 10x the peak: the peak of the trace before the held-out part.
    assert other.chosen_spec() == result.chosen_spec()
    assert [t.held_out for t in other.trials] != [t.held_out for t in result.trials]


def test_forecasting_in_worker_processes_changes_nothing(result, trace):
    parallel = tune(trace, setup_for(jobs=2))
    assert [(t.knobs, t.in_sample, t.held_out) for t in parallel.trials] == [
        (t.knobs, t.in_sample, t.held_out) for t in result.trials
    ]


def test_the_candidates_nearly_as_cheap_as_the_chosen_one_are_reported_with_their_held_out_figures(result):
    chosen = result.chosen.in_sample
    within = [
        t for t in result.trials if SLO.met(t.in_sample) and t.in_sample.replica_hours <= 1.05 * chosen.replica_hours
    ]
    alike = result.alike
    # One per outcome, every outcome within 5 % of the chosen spec's cost, the chosen one's among them.
    assert {(t.in_sample, t.held_out) for t in alike} == {(t.in_sample, t.held_out) for t in within}
    assert len(alike) == len({(t.in_sample, t.held_out) for t in alike})
    assert (result.chosen.in_sample, result.chosen.held_out) in {(t.in_sample, t.held_out) for t in alike}
    assert len(alike) >= 3, "the daily trace has several candidates within 5 % of the cheapest"
    line = next(line for line in table(result).splitlines() if "other candidates met it" in line)
    costs = sorted(t.held_out.cost_vs_oracle for t in alike)
    assert line.startswith(f"{len(alike) - 1} other candidates met it in-sample for at most 5% more")
    assert f"{costs[0]:.2f}x–{costs[-1]:.2f}x" in line
    assert document(result)["alike"] == {"within_pct": 5.0, "candidates": [t.knobs.as_dict() for t in alike]}
    # Nothing is reported beside a choice that did not meet the service level.
    unmet = replace(result, slo=Slo(0.0001))
    assert not unmet.met and unmet.alike == ()
    assert alike_line(unmet) is None


def test_verdict_says_when_the_start_was_already_the_best(result):
    assert SLO.met(result.default.in_sample)
    assert "already meets" in verdict(replace(result, chosen=result.default))
    assert "nothing to change" in verdict(replace(result, chosen=result.default))


# --- the held-out check --------------------------------------------------------------------------


def _with(trial: Trial, part: str, **figures: float) -> Trial:
    return replace(trial, **{part: replace(getattr(trial, part), **figures)})


def _held_up(result: TuneResult) -> TuneResult:
    """``result`` with held-out figures where the chosen spec met the level at the starting spec's cost."""
    start = _with(result.default, "held_out", under_pct=0.5)
    chosen = _with(result.chosen, "held_out", under_pct=0.5, replica_hours=start.held_out.replica_hours)
    return replace(result, trials=(start, *result.trials[1:]), chosen=chosen)


def test_a_choice_that_held_up_passes_the_held_out_check(result):
    assert check(_held_up(result)).as_dict() == {
        "failed": False,
        "missed_slo": False,
        "dearer": False,
        "message": None,
    }


def test_a_choice_that_misses_the_service_level_held_out_says_so_and_what_to_do(result):
    held_up = _held_up(result)
    missed = replace(held_up, chosen=_with(held_up.chosen, "held_out", under_pct=1.5))
    found = check(missed)
    assert found.failed and found.missed_slo and not found.dearer
    start = missed.default.held_out
    assert found.message == (
        "Held out, the chosen spec missed the service level (1.50 % under-provisioned, at most 1 % allowed): "
        "the days it was chosen on did not predict the days after. Tune on a longer history, loosen the service "
        "level or keep the starting spec, which met the service level there (0.50 % under-provisioned at "
        f"{start.cost_vs_oracle:.2f}x the oracle)."
    )
    # The starting spec is no remedy when it missed too, nor when it is the choice.
    both = replace(missed, trials=(_with(missed.default, "held_out", under_pct=2.0), *missed.trials[1:]))
    assert "starting spec" not in (check(both).message or "starting spec")
    kept = replace(missed, chosen=_with(missed.default, "held_out", under_pct=1.5))
    assert check(kept).missed_slo and "starting spec" not in (check(kept).message or "starting spec")
    # With an unserved-demand level too, either figure over it is a miss.
    unserved = replace(held_up, slo=Slo(1.0, 0.01), chosen=_with(held_up.chosen, "held_out", unserved_pct=0.5))
    assert check(unserved).missed_slo and "at most 1 % and 0.01 % allowed" in (check(unserved).message or "")


def test_a_choice_that_costs_more_held_out_than_the_start_it_undercut_says_so(result):
    held_up = _held_up(result)
    start, chosen = held_up.default, held_up.chosen
    assert chosen.knobs != start.knobs and SLO.met(start.in_sample)
    assert chosen.in_sample.replica_hours < start.in_sample.replica_hours
    dearer = replace(held_up, chosen=_with(chosen, "held_out", replica_hours=2 * start.held_out.replica_hours,
                                           cost_vs_oracle=9.99))  # fmt: skip
    found = check(dearer)
    assert found.dearer and not found.missed_slo and found.message is not None
    assert "cost more than the starting spec (9.99x against" in found.message
    assert "loosen" not in found.message  # a looser level does not make a spec cheaper than the start
    # Had the starting spec missed the level held out, paying more bought it: no failure.
    start_missed = replace(dearer, trials=(_with(start, "held_out", under_pct=5.0), *dearer.trials[1:]))
    assert not check(start_missed).failed
    # The starting spec kept: nothing to compare it with.
    assert not check(replace(held_up, chosen=start)).dearer


# --- the advice ----------------------------------------------------------------------------------


def test_forecasts_are_made_once_per_history_read(result):
    """168h x 3 reads 528h, the start 336h: on nine days both read every point, one forecast."""
    assert result.forecasts == 3
    assert len({t.knobs.forecaster for t in result.trials}) == 3


def test_a_choice_made_on_less_than_a_week_is_not_advised(result):
    advice = advise(result)
    assert advice.verdict == Verdict.NOT_ENOUGH_HISTORY and not advice.advised
    # Two days chosen on, five held out of the seven asked: seven more days make a week of each.
    assert advice.message == (
        "Not enough history yet: the choice was made on 48h, and one to act on needs at least 168h after the "
        "warm-up and before the held-out part. Keep the starting spec and tune again with 7 more days of history."
    )
    assert advice.message in table(result).splitlines()
    assert document(result)["advice"] == advice.as_dict()


def _week(result: TuneResult) -> TuneResult:
    """``result`` as if it had been chosen on a week."""
    return replace(result, split=replace(result.split, report_from=result.split.held_out_from - 7 * DAY))


def test_a_choice_that_held_up_on_a_week_is_advised_with_its_held_out_verdict(result):
    held_up = _week(_held_up(result))
    advice = advise(held_up)
    assert advice.verdict == Verdict.ADVISED and advice.advised and advice.held_out_met
    start = held_up.default.held_out
    assert advice.message == (
        "Advised: the chosen spec. Held out, the chosen spec met the service level (0.50 % under-provisioned at "
        f"{held_up.chosen.held_out.cost_vs_oracle:.2f}x the oracle; the starting spec: 0.50 % at "
        f"{start.cost_vs_oracle:.2f}x)."
    )
    assert held_out_line(held_up) in table(held_up).splitlines()
    assert advise(replace(held_up, chosen=held_up.default)).verdict == Verdict.KEEP


def test_a_choice_that_failed_held_out_or_met_nothing_is_not_advised(result):
    held_up = _week(_held_up(result))
    missed = replace(held_up, chosen=_with(held_up.chosen, "held_out", under_pct=1.5))
    advice = advise(missed)
    assert advice.verdict == Verdict.HELD_OUT_FAILED and not advice.held_out_met
    assert advice.message == check(missed).message
    nothing = advise(replace(held_up, slo=Slo(0.0001)))
    assert nothing.verdict == Verdict.NOTHING_MET
    assert "cannot decide" in nothing.message and "cannot decide" in verdict(replace(held_up, slo=Slo(0.0001)))


def test_a_part_too_short_to_tell_is_said_to_be_so(result):
    """Two days of five-minute steps: one two-step spell (0.35 %) is judged at 1.04 % with the margin
    one spell needs, so no candidate meets 1 % although the least short one did as measured."""
    short = replace(result, chosen=_with(result.chosen, "in_sample", under_pct=0.35, spells=1, steps=576))
    assert not short.met
    said = verdict(short)
    assert said == (
        "No candidate met under-provisioned ≤ 1 % of the time in-sample with the margin for chance, though the "
        "least under-provisioned one was short 0.35 % of the time, in 1 spell: 48h are too short to tell. "
        "spec.yaml holds the least under-provisioned candidate."
    )
    assert advise(short).verdict == Verdict.NOT_ENOUGH_HISTORY
    assert advise(_week(short)).message.endswith("are too short to tell. Keep the starting spec.")


def test_candidates_alike_in_sample_that_split_held_out_are_said_to_be_undecided(result):
    alike = result.alike
    assert len(alike) >= 3
    last = alike[-1].knobs
    split = replace(
        result, trials=tuple(_with(t, "held_out", under_pct=5.0 if t.knobs == last else 0.5) for t in result.trials)
    )
    split = replace(split, chosen=next(t for t in split.trials if t.knobs == result.chosen.knobs))
    missed = sum(t.held_out.under_pct > 1.0 for t in split.alike)
    assert 0 < missed < len(split.alike)
    line = undecided_line(split)
    assert line == (
        f"The part chosen on cannot decide among the candidates alike in-sample: {missed} of the "
        f"{len(split.alike)} missed the service level held out"
    )
    assert line in table(split).splitlines()
    agreed = replace(split, trials=tuple(_with(t, "held_out", under_pct=0.5) for t in result.trials))
    assert undecided_line(agreed) is None


def test_a_trace_whose_held_out_days_differ_fails_the_check_and_exits_3(tmp_path, trace):
    """A trace built to fail held out: the days chosen on are calm, the held-out days burst every hour
    (one five-minute step each), which no spec chosen on calm days covers."""
    values = trace.values.copy()
    values[4 * DAY :: 12] += 400
    path = write_csv(replace(trace, values=values), tmp_path / "bursts.csv")
    out = tmp_path / "out"
    code = main(["tune", str(path), *FLAGS, "--slo", "1%", "--jobs", "1", "--out", str(out)])
    assert code == HELD_OUT_FAILED
    document = json.loads((out / "tune.json").read_text())
    found = document["held_out_check"]
    assert found["failed"] and found["missed_slo"]
    assert document["chosen"]["held_out"]["under_provisioned_pct"] > 1.0
    assert found["message"].startswith("Held out, the chosen spec missed the service level")
    report = (out / "tune.html").read_text()
    assert escape(found["message"]) in report
    header = [line[2:] for line in (out / "spec.yaml").read_text().splitlines() if line.startswith("# ")]
    assert found["message"] in " ".join(header)


# --- the command ---------------------------------------------------------------------------------


def write_csv(trace: Trace, path: Path) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp", "value"])
        for index, value in enumerate(trace.values.tolist()):
            writer.writerow([trace.time_at(index).isoformat(), repr(value)])
    return path


FLAGS = ["--per-replica", "20", "--lead-time", "10m", "--max-replicas", "200", "--warmup", "2d", "--no-progress"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, trace: Trace) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("tune")
    path = write_csv(trace, where / "daily.csv")
    code = main(["tune", str(path), *FLAGS, "--slo", "1%", "--jobs", "1", "--out", str(where / "out")])
    # Two days chosen on may or may not hold up held out: the status says which, as tune.json does.
    failed = json.loads((where / "out" / "tune.json").read_text())["held_out_check"]["failed"]
    assert code == (HELD_OUT_FAILED if failed else 0)
    return path, where / "out"


def test_the_three_files_are_written(run):
    _, out = run
    assert {p.name for p in out.iterdir()} == {"spec.yaml", "tune.json", "tune.html"}
    document = json.loads((out / "tune.json").read_text())
    assert document["split"]["held_out"] == "120h"
    assert document["slo"] == {"under_provisioned_pct": 1.0, "unserved_pct": None}
    for entry in document["candidates"]:
        assert entry["knobs"].keys() >= {"targetQuantile", "headroom", "guard", "season", "cycles"}
        assert entry["in_sample"].keys() == entry["held_out"].keys() >= {"under_provisioned_pct", "cost_vs_oracle"}
        figures = entry["in_sample"]
        assert figures["under_provisioned_bound_pct"] >= figures["under_provisioned_pct"]
        assert (figures["under_provisioned_spells"] == 0) == (figures["under_provisioned_pct"] == 0)
    assert document["chosen"] in document["candidates"]
    assert document["reactive"]["held_out"]["under_provisioned_pct"] > 1.0
    report = (out / "tune.html").read_text()
    assert "held out: the check" in report and "starting spec" in report
    spells = document["chosen"]["in_sample"]["under_provisioned_spells"]
    judged = f"in-sample under-provisioned in {spells} spell" if spells else "never under-provisioned in-sample"
    assert f"The chosen spec, {judged}" in report  # how the choice was judged, as the terminal says it


def test_spec_yaml_is_ready_to_apply(run):
    _, out = run
    *backends, scaler = yaml.safe_load_all((out / "spec.yaml").read_text())
    assert scaler["kind"] == "PredictiveScaler"
    # A ForecastBackend only when the chosen season or cycles are not the starting backend's.
    knobs = json.loads((out / "tune.json").read_text())
    changed = [knobs[which]["knobs"][k] for which in ("chosen", "default") for k in ("season", "cycles")]
    assert len(backends) == int(changed[:2] != changed[2:])
    for backend in backends:
        assert backend["kind"] == "ForecastBackend"
        assert scaler["spec"]["forecast"]["backendRef"] == backend["metadata"]["name"]
        parse(ForecastBackendSpec, backend["spec"], path="spec")
    spec = parse(PredictiveScalerSpec, scaler["spec"], path="spec")
    assert spec.capacity is not None and spec.capacity.per_replica.value == 20.0
    assert spec.signal is not None and spec.signal.resolution == timedelta(minutes=5)


def test_backtest_of_spec_yaml_replays_exactly_the_chosen_policy(run, tmp_path):
    path, out = run
    assert main(["backtest", str(path), "--spec", str(out / "spec.yaml"), "--warmup", "2d", "--no-progress",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    with (tmp_path / "decisions.csv").open() as handle:
        replayed = [int(row["replicas"]) for row in csv.DictReader(handle)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    chosen = json.loads((out / "tune.json").read_text())["chosen"]
    hours = chosen["in_sample"]["replica_hours"] + chosen["held_out"]["replica_hours"]
    assert summary["presage"]["replica_hours"] == pytest.approx(hours, rel=1e-12)
    # And decision by decision, against the chosen knobs replayed from prepared forecasts.
    *backends, scaler = yaml.safe_load_all((out / "spec.yaml").read_text())
    backend = backends[0]["spec"] if backends else None  # none: the starting, default SeasonalNaive
    spec = parse(PredictiveScalerSpec, scaler["spec"], path="spec")
    the_plan = plan(trace_of(path), Setup(spec=spec, backend=make_backend(backend_spec(backend)), warmup=WARMUP))
    steps = the_plan.schedule.decisions(len(the_plan.trace))
    decisions = Decisions(steps, the_plan.observed[list(steps)], the_plan.per_replica, STEP, the_plan.initial)
    chosen = knobs_of(spec, backend_spec(backend))
    counts = replay([chosen], {chosen.forecaster: forecast(the_plan, ())}, spec.policy, decisions)
    assert replayed == counts[:, 0].tolist()


def trace_of(path: Path) -> Trace:
    from presage_scaler.backtest.csv_trace import load_csv

    return load_csv(path)


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["tune", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("slo", ["0", "0%", "100", "100%", "-1", "150%", "one", "nan"])
def test_a_service_level_outside_0_to_100_percent_is_refused(capsys, run, slo):
    path, out = run
    with pytest.raises(SystemExit) as exited:
        main(["tune", str(path), *FLAGS, "--slo", slo, "--out", str(out)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--slo" in err and "between 0 and 100" in err and "Traceback" not in err


def test_a_trace_too_short_to_hold_out_is_refused(capsys, run, tmp_path):
    path, _ = run
    err = refusal(capsys, str(path), *FLAGS, "--warmup", "7d", "--slo", "1", "--out", str(tmp_path))
    assert "too short to hold out" in err


def test_a_base_spec_that_does_not_validate_is_refused(capsys, run, tmp_path):
    path, _ = run
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "apiVersion: scaling.presage.sh/v1alpha1\nkind: PredictiveScaler\nmetadata: {name: web}\nspec:\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
        "  signal: {prometheus: {address: 'http://p:9090', query: q}, resolution: 5m}\n"
        "  policy: {maxReplicas: 10, targetQuantile: '1.5'}\n"
    )
    err = refusal(capsys, str(path), "--spec", str(spec), "--slo", "1", "--lead-time", "10m", "--out", str(tmp_path))
    assert "spec.policy.targetQuantile" in err


def test_a_multi_signal_spec_is_refused(capsys, run, tmp_path):
    path, _ = run
    spec = tmp_path / "two.yaml"
    signal = "{name: %s, prometheus: {address: 'http://p:9090', query: q}, resolution: 5m, capacity: {perReplica: 5}}"
    spec.write_text(
        "scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
        f"signals: [{signal % 'a'}, {signal % 'b'}]\npolicy: {{maxReplicas: 10}}\n"
    )
    err = refusal(capsys, str(path), "--spec", str(spec), "--slo", "1", "--lead-time", "10m", "--out", str(tmp_path))
    assert "2 signals" in err


def test_the_table_says_how_the_in_sample_figures_were_judged(result):
    chosen = result.chosen.in_sample
    assert chosen.spells, "the daily trace's chosen spec is short now and then in-sample"
    line = next(line for line in table(result).splitlines() if line.startswith("in-sample under-provisioned in"))
    assert f"in {chosen.spells} spells" in line
    assert f"judged at {chosen.under_pct * chosen.margin:.2f} %" in line
    assert "80% confidence" in line
    assert chosen.under_pct * chosen.margin <= SLO.under_pct


def test_a_choice_made_on_more_than_a_week_must_also_hold_over_its_last_week():
    trace = daily_trace(12, seed=5)
    found = tune(trace, setup_for(holdout=timedelta(days=1)))
    parts = found.split
    assert parts.in_sample == timedelta(days=9) and parts.recent_from == parts.held_out_from - 7 * DAY
    for trial in found.trials:
        recent = trial.in_sample.recent
        assert recent is not None and recent.recent is None
        assert recent.replica_hours < trial.in_sample.replica_hours
        assert trial.held_out.recent is None
    chosen = found.chosen.in_sample
    assert found.met and SLO.met(chosen.recent)
    assert all(t.in_sample.replica_hours >= chosen.replica_hours for t in found.trials if SLO.met(t.in_sample))
    line = next(line for line in table(found).splitlines() if line.startswith("in-sample "))
    assert "over its last 168h" in line


REPOSITORY = Path(__file__).resolve().parents[2]
DOCS_EXAMPLE = ["--per-replica", "20", "--lead-time", "5m", "--slo", "1%", "--warmup", "2d"]


def test_the_docs_show_what_presage_tune_prints_for_their_example(capsys, tmp_path):
    """docs/backtest-and-tune.md's terminal example is this command's output, line for line, so it
    cannot go stale."""
    docs = (REPOSITORY / "docs" / "backtest-and-tune.md").read_text()
    assert f"`examples/nab_elb_request_count_5m.csv {' '.join(DOCS_EXAMPLE)}`" in docs.replace("\n", " ")
    lines = docs.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("policy ") and "vs oracle" in line)
    shown = [line.rstrip() for line in lines[first - 1 : lines.index("```", first)] if line.strip()]
    example = REPOSITORY / "examples" / "nab_elb_request_count_5m.csv"
    argv = ["tune", str(example), *DOCS_EXAMPLE, "--jobs", "1", "--no-progress", "--out", str(tmp_path)]
    # The example's choice misses the service level held out: the docs show the line that says so.
    assert main(argv) == HELD_OUT_FAILED
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert len(shown) >= 6
    missing = [line for line in shown if line not in printed]
    assert not missing, f"the docs show lines presage tune no longer prints: {missing}"

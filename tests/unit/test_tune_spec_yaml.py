"""What ``presage tune`` writes to spec.yaml: a header that says one thing per verdict, and the chosen
spec in its fewest fields (the starting spec's own, those tuning changed, and ``mode``), with a
ForecastBackend only when SeasonalNaive's season or cycles changed; ``status.advice.patch`` as
quiet. And the backtest's suggestion to tune agreeing with what tune says about the same trace."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import parse_duration
from presage_scaler.backtest.output import advice
from presage_scaler.cli.main import main
from presage_scaler.tune.advice_body import advice_status, spec_patch
from presage_scaler.tune.held_out import check
from presage_scaler.tune.minimal import minimal
from presage_scaler.tune.output import StartingSpec, backend_name, manifests, tuned_wire, write_spec
from presage_scaler.tune.request import HELD_OUT_FAILED
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import TuneResult, tune
from presage_scaler.tune.verdict import Verdict, advise
from tests.unit.test_tune import FLAGS, _held_up, _week, _with, setup_for, write_csv
from tests.unit.test_tune_parts import daily_trace


@pytest.fixture(scope="module")
def result() -> TuneResult:
    """Nine days, two of warm-up: chosen on two days, so not enough history to advise."""
    return tune(daily_trace(9, seed=3), setup_for())


def advised(result: TuneResult) -> TuneResult:
    return _week(_held_up(result))


VERDICTS = {
    Verdict.ADVISED: advised,
    Verdict.KEEP: lambda r: replace(advised(r), chosen=advised(r).default),
    Verdict.NOT_ENOUGH_HISTORY: lambda r: r,
    Verdict.HELD_OUT_FAILED: lambda r: replace(advised(r), chosen=_with(advised(r).chosen, "held_out", under_pct=1.5)),
    Verdict.NOTHING_MET: lambda r: replace(advised(r), slo=Slo(0.0001)),
}
APPLY = "# Apply: kubectl apply -f spec.yaml"
KEEP = "# Nothing to apply: the starting spec is already the choice, and this file is it."
NOT_ADVISED = "NOT ADVISED, nothing to apply: keep the starting spec."


def header(path: Path) -> tuple[list[str], str]:
    """spec.yaml's comment lines, and their text joined as one paragraph."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("#")]
    return lines, " ".join(line[2:] for line in lines)


@pytest.mark.parametrize("verdict", list(VERDICTS))
def test_the_header_says_one_thing_per_verdict(result: TuneResult, verdict: Verdict, tmp_path: Path) -> None:
    made = VERDICTS[verdict](result)
    said = advise(made)
    assert said.verdict == verdict
    path = tmp_path / "spec.yaml"
    write_spec(made, {}, path, StartingSpec())
    lines, text = header(path)
    assert said.message in text
    actions = {
        APPLY: any(line.startswith(APPLY) for line in lines),
        KEEP: KEEP in lines,
        NOT_ADVISED: NOT_ADVISED in text,
    }
    expected = {Verdict.ADVISED: APPLY, Verdict.KEEP: KEEP}.get(verdict, NOT_ADVISED)
    assert actions == {action: action == expected for action in actions}
    if verdict != Verdict.ADVISED:
        assert "kubectl apply" not in text
        assert not said.advised or verdict == Verdict.KEEP
    else:
        assert "Keep the starting spec" not in text and "keep the starting spec" not in text
    assert lines[-1].startswith("# Replay: presage backtest TRACE --spec spec.yaml")


def test_not_enough_history_and_a_failed_check_say_both_and_nothing_to_apply(result: TuneResult, tmp_path: Path):
    """The README's ELB example: a choice made on five days that also missed the level held out."""
    missed = replace(result, chosen=_with(result.chosen, "held_out", under_pct=1.5))
    assert advise(missed).verdict == Verdict.NOT_ENOUGH_HISTORY and check(missed).failed
    path = tmp_path / "spec.yaml"
    write_spec(missed, {}, path, StartingSpec())
    _, text = header(path)
    assert advise(missed).message in text and (check(missed).message or "") in text
    assert NOT_ADVISED in text and "kubectl apply" not in text


# --- the fewest fields -----------------------------------------------------------------------------


def leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for key, value in data.items():
        found += leaves(value, (*prefix, key)) if isinstance(value, dict) and value else [(*prefix, key)]
    return found


def without(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    copied = copy.deepcopy(data)
    parent = copied
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return copied


def left_out_to_no_effect(spec: dict[str, Any]) -> list[tuple[str, ...]]:
    """The fields of ``spec`` (but ``mode``) that could be left out with the spec parsing the same."""
    whole = parse(PredictiveScalerSpec, spec)

    def same(data: dict[str, Any]) -> bool:
        try:
            return parse(PredictiveScalerSpec, data) == whole
        except SpecError:
            return False

    return [path for path in leaves(spec) if path != ("mode",) and same(without(spec, path))]


def test_a_spec_made_from_flags_is_written_in_its_fewest_fields(result: TuneResult) -> None:
    made = advised(result)
    assert made.chosen.knobs != made.default.knobs
    *backends, scaler = manifests(made, {}, StartingSpec())
    spec = scaler["spec"]
    assert parse(PredictiveScalerSpec, spec) == parse(PredictiveScalerSpec, tuned_wire(made, made.base_wire))
    assert left_out_to_no_effect(spec) == []
    assert spec["mode"] == "Shadow"  # always written: the file says whether it enforces
    assert "reactiveFloor" not in spec["policy"] and "scaleDownQuantile" not in spec["policy"]
    changed = made.chosen.knobs.forecaster
    start = made.default.knobs.forecaster
    assert len(backends) == int((changed.season, changed.cycles) != (start.season, start.cycles))


USER = {
    "mode": "Shadow",
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "checkout"},
    "signal": {
        "prometheus": {"address": "http://prometheus.monitoring:9090", "query": "sum(rate(requests[5m]))"},
        "resolution": "5m",
    },
    "capacity": {"perReplica": 20},
    "leadTime": {"static": "10m"},
    "interval": "5m",
    "policy": {"minReplicas": 1, "maxReplicas": 200, "targetQuantile": "0.9"},
}
"""A user's spec as written: ``minReplicas`` and ``targetQuantile`` at their defaults, written anyway."""


def test_a_spec_file_keeps_its_fields_and_spelling_and_gains_only_what_tuning_changed(tmp_path: Path) -> None:
    """presage tune --spec FILE: spec.yaml against the file is the knobs tuning changed, nothing else."""
    path = write_csv(daily_trace(9, seed=3), tmp_path / "daily.csv")
    given = tmp_path / "scaler.yaml"
    given.write_text(
        yaml.safe_dump({"kind": "PredictiveScaler", "metadata": {"name": "checkout"}, "spec": USER}, sort_keys=False)
    )
    out = tmp_path / "out"
    argv = ["tune", str(path), "--spec", str(given), "--slo", "1%", "--warmup", "2d", "--jobs", "1", "--no-progress"]
    assert main([*argv, "--out", str(out)]) in (0, HELD_OUT_FAILED)
    *_, scaler = yaml.safe_load_all((out / "spec.yaml").read_text())
    spec = scaler["spec"]
    assert scaler["metadata"] == {"name": "checkout"}
    chosen = json.loads((out / "tune.json").read_text())["chosen"]["knobs"]
    # Every field the user wrote is there as written, unless tuning changed it.
    changed = {path for path in leaves(USER) if _at(spec, path) != _at(USER, path)}
    assert changed <= {("policy", "targetQuantile")}
    assert spec["capacity"]["perReplica"] == 20 and spec["policy"]["minReplicas"] == 1  # spelt and kept
    assert list(spec)[: len(USER)] == list(USER)  # in the user's order
    # Every other field is a knob the chosen spec sets away from the start.
    added = set(leaves(spec)) - set(leaves(USER))
    knob_fields = {
        ("policy", "headroom"): chosen["headroom"],
        ("policy", "scaleDownUncertaintyGuard", "enabled"): False,
        ("policy", "scaleDownUncertaintyGuard", "maxRelativeSpread"): chosen["guard"],
        ("policy", "stabilization", "scaleDownWindow"): chosen["scaleDownWindow"],
        ("policy", "stabilization", "maxScaleDownRate"): chosen["maxScaleDownRate"],
        ("signal", "history"): chosen["history"],
        ("forecast", "backendRef"): f"seasonal-naive-{chosen['season']}-x{chosen['cycles']}",
    }
    assert added <= set(knob_fields)
    for field in added:
        assert str(_at(spec, field)) == str(knob_fields[field]), field


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def test_a_spec_read_from_the_cluster_leaves_out_the_defaults_the_api_server_filled_in(result: TuneResult) -> None:
    """presage tune --scaler: the stored object holds every default; spec.yaml holds none of them."""
    made = advised(replace(result, base_wire=parse(PredictiveScalerSpec, USER).to_wire()))
    stored = parse(PredictiveScalerSpec, USER).to_wire()
    stored["capacity"]["perReplica"] = 20  # stored as the user wrote it
    assert len(leaves(stored)) > 2 * len(leaves(USER))
    *_, scaler = manifests(made, {"name": "checkout", "namespace": "shop"}, StartingSpec(stored, stored=True))
    spec = scaler["spec"]
    assert scaler["metadata"] == {"name": "checkout", "namespace": "shop"}
    assert left_out_to_no_effect(spec) == []
    assert "minReplicas" not in spec["policy"]  # at its default: the API server fills it in again
    assert spec["capacity"] == {"perReplica": 20}  # the stored spelling, not "20"
    assert parse(PredictiveScalerSpec, spec) == parse(PredictiveScalerSpec, tuned_wire(made, stored))


def _only(result: TuneResult, **forecaster: Any) -> TuneResult:
    """``result`` whose chosen spec is the start with only these forecaster settings changed."""
    start = result.default.knobs
    knobs = replace(start, forecaster=replace(start.forecaster, **forecaster))
    return replace(result, chosen=replace(result.chosen, knobs=knobs))


def test_a_forecast_backend_is_written_only_when_season_or_cycles_change(result: TuneResult) -> None:
    made = advised(result)
    start = made.default.knobs.forecaster
    history = start.history + timedelta(days=7)
    longer = _only(made, history=history)
    [scaler] = manifests(longer, {}, StartingSpec())
    assert "forecast" not in scaler["spec"] and scaler["spec"]["signal"]["history"] == "504h"
    cycles = _only(made, cycles=start.cycles + 1)
    backend, scaler = manifests(cycles, {}, StartingSpec())
    assert backend["kind"] == "ForecastBackend" and scaler["kind"] == "PredictiveScaler"
    assert backend["metadata"]["name"] == backend_name(cycles.chosen.knobs) == scaler["spec"]["forecast"]["backendRef"]
    assert parse(ForecastBackendSpec, backend["spec"]).seasonal_naive_or_default.cycles == start.cycles + 1


def test_status_advice_patches_only_what_changed_and_names_no_new_backend_for_a_longer_history(result: TuneResult):
    made = advised(result)
    history = made.default.knobs.forecaster.history + timedelta(days=7)
    longer = _only(made, history=history)
    assert spec_patch(longer, USER) == {"spec": {"signal": {"history": "504h"}}}
    status = advice_status(longer, advise(longer), USER, "1%", 1, datetime(2024, 1, 1, tzinfo=UTC))
    assert status["verdict"] == "Advised" and status["forecastBackend"] is None
    assert json.loads(status["patch"]) == {"spec": {"signal": {"history": "504h"}}}
    cycles = _only(made, cycles=made.default.knobs.forecaster.cycles + 1)
    name = backend_name(cycles.chosen.knobs)
    assert spec_patch(cycles, USER) == {"spec": {"forecast": {"backendRef": name}}}


def test_fewest_fields_keep_a_mapping_whose_presence_matters_whole() -> None:
    """``capacity: {perReplica: 1}`` is the default capacity, but leaving ``capacity`` out is not
    the same spec: it is written whole, never as ``capacity: {}``."""
    spec = dict(USER, capacity={"perReplica": 1})
    full = parse(PredictiveScalerSpec, spec).to_wire()
    written = minimal(PredictiveScalerSpec, full, literal=spec, always=(("mode",),))
    assert parse(PredictiveScalerSpec, written) == parse(PredictiveScalerSpec, spec)
    assert written["capacity"] == {"perReplica": 1}
    assert "minReplicas" not in written["policy"] and written["policy"]["maxReplicas"] == 200


# --- the backtest's suggestion ---------------------------------------------------------------------


def test_the_backtests_suggestion_says_what_tune_says_about_the_same_trace(tmp_path: Path) -> None:
    """On nine days (two of warm-up) tune cannot advise: the backtest says how many more days it needs,
    the number tune's own verdict gives, from the same span after the warm-up."""
    path = write_csv(daily_trace(9, seed=3), tmp_path / "daily.csv")
    assert main(["backtest", str(path), *FLAGS, "--out", str(tmp_path / "backtest")]) == 0
    ran = main(["tune", str(path), *FLAGS, "--slo", "1%", "--jobs", "1", "--out", str(tmp_path / "tune")])
    assert ran in (0, HELD_OUT_FAILED)
    summary = json.loads((tmp_path / "backtest" / "summary.json").read_text())
    tuned = json.loads((tmp_path / "tune" / "tune.json").read_text())
    parameters = summary["parameters"]
    after = datetime.fromisoformat(parameters["end"]) - datetime.fromisoformat(parameters["reported_from"])
    split = tuned["split"]
    assert after == parse_duration(split["in_sample"]) + parse_duration(split["held_out"])
    assert tuned["advice"]["verdict"] == "NotEnoughHistory"
    [days] = re.findall(r"tune again with (\d+ more days?) of history", tuned["advice"]["message"])
    # The suggestion is shown when presage is not clearly cheaper than a static count.
    summary["presage"]["replica_hours"] = summary["static"]["replica_hours"]
    line = advice(summary)
    assert f"so it needs {days} of history" in line
    assert "Run it meanwhile with the same arguments and `--slo 1%`" in line

"""No spec content takes presage down: the parser, the controller's parse path and ``--spec``.

Hostile specs (tests/harness/hostile_specs.py) go through every path a CR's spec takes in presage.
Each may be refused, but only with the error type that path turns into a clear message (SpecError,
the controller's InvalidSpec, the backtest's exit 2); never an OverflowError, a RecursionError or a
traceback. What parses must survive a round trip through its wire form unchanged.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.config import Overrides, load_object, scaler_spec
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.trace import Trace
from presage_scaler.cli.main import main
from presage_scaler.controller.predictive_scaler_objects import SpecCache, status_of, stored_recommendation
from presage_scaler.engine.evaluator import EvaluationError
from tests.harness.hostile_specs import SCALER_BASES, backend_specs, scaler_specs

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _scaler(spec: Any, status: Any = None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "shop", "name": "victim", "uid": "u-1", "generation": generation},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


@FUZZ
@given(scaler_specs())
def test_any_scaler_spec_parses_or_is_refused_with_a_spec_error(spec: Any) -> None:
    try:
        parsed = parse(PredictiveScalerSpec, spec if isinstance(spec, dict) else {"x": spec})
    except SpecError as err:
        assert err.problems and all(p.startswith("spec") for p in err.problems)
        return
    assert parse(PredictiveScalerSpec, parsed.to_wire()) == parsed


@FUZZ
@given(backend_specs())
def test_any_backend_spec_parses_or_is_refused_with_a_spec_error(spec: Any) -> None:
    try:
        parsed = parse(ForecastBackendSpec, spec if isinstance(spec, dict) else {"x": spec})
    except SpecError as err:
        assert err.problems
        return
    assert parse(ForecastBackendSpec, parsed.to_wire()) == parsed


_GOOD_STATUS = {
    "recommendedReplicas": 4,
    "currentReplicas": 3,
    "lastForecast": {"generatedAt": "2026-12-01T09:00:00Z", "leadTimeSeconds": 120, "point": "10"},
}


@FUZZ
@given(scaler_specs(), st.one_of(st.just(_GOOD_STATUS), st.just(None), scaler_specs()))
def test_the_controller_parse_path_contains_any_spec_and_status(spec: Any, status: Any) -> None:
    """What the informer's handler runs for every object: a bad spec is the scaler's InvalidSpec."""
    obj = _scaler(spec, status)
    specs = SpecCache()
    try:
        specs.get(obj)
    except EvaluationError as err:
        assert err.reason == "InvalidSpec"
    stored_recommendation(obj, specs)  # never raises: an unusable scaler is simply not served
    status_of(obj)


def test_an_overflowing_duration_is_invalid_spec_not_a_crash() -> None:
    """The issue's reproduction: a stored scaler edited to 99999999999h."""
    spec = json.loads(json.dumps(SCALER_BASES[0]))
    spec["leadTime"]["static"] = "99999999999h"
    obj = _scaler(spec, _GOOD_STATUS)
    with pytest.raises(EvaluationError) as caught:
        SpecCache().get(obj)
    assert caught.value.reason == "InvalidSpec"
    assert "spec.leadTime.static" in caught.value.message and "99999999999h" in caught.value.message
    assert stored_recommendation(obj, SpecCache()) is None


_TRACE = Trace(
    values=np.linspace(10.0, 50.0, 300),
    step=timedelta(minutes=5),
    start=datetime(2026, 1, 1, tzinfo=UTC),
    gaps=np.zeros(300, dtype=bool),
    source="fuzz.csv",
)


@FUZZ
@given(scaler_specs())
def test_backtest_spec_files_load_or_are_refused_with_a_message(tmp_path_factory, spec: Any) -> None:
    path = Path(tmp_path_factory.mktemp("spec")) / "scaler.yaml"
    path.write_text(yaml.safe_dump({"kind": "PredictiveScaler", "spec": spec}, allow_unicode=True))
    try:
        scaler_spec(_TRACE, load_object(path, "PredictiveScaler"), Overrides())
    except (BacktestError, SpecError) as err:
        assert str(err)


_HOSTILE_YAML = {
    "deep": "spec: " + "[" * 5000 + "]" * 5000,
    "deep-map": "spec:\n" + "".join(f"{'  ' * (i + 1)}a{i}:\n" for i in range(3000)),
    "huge-int": "spec:\n  policy:\n    maxReplicas: " + "9" * 5000,
    "400-digit-amount": "spec:\n  policy:\n    maxReplicas: 3\n    headroom: " + "9" * 400,
    "aliases": "a: &a ["
    + ",".join(["x"] * 10)
    + "]\n"
    + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
    + "spec: *i\n",
    "overflow": "spec:\n  leadTime:\n    static: 99999999999h\n",
    "not-yaml": "spec: [unclosed",
}


@pytest.mark.parametrize("name", sorted(_HOSTILE_YAML))
def test_hostile_yaml_files_exit_2_with_one_line(tmp_path: Path, capsys, name: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(_HOSTILE_YAML[name])
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp,value\n" + "".join(f"{1700000000 + 300 * i},{10 + i % 7}\n" for i in range(600)))
    code = main(["backtest", str(trace), "--spec", str(spec), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("presage backtest: ") and "Traceback" not in err

"""``presage advise`` needs only presage's runtime dependencies: with pandas and plotly made unimportable
(the scaler's image has neither), the command line, the advisor and a tuning from a trace as Prometheus
gives it run, and write the status they would. A fresh ``pip install .`` running the whole path
against a real API server and Prometheus is tests/integration/test_install.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from presage_scaler.backtest.extra import PACKAGES
from presage_scaler.tune.verdict import Verdict

PROGRAM = textwrap.dedent(
    """
    import sys
    for name in {packages!r}:
        sys.modules[name] = None  # `import name` raises ImportError from here on

    from datetime import UTC, datetime, timedelta

    import numpy as np

    from presage_scaler.backtest.config import Overrides, backend_spec
    from presage_scaler.backtest.trace import Trace
    from presage_scaler.cli.main import build_parser
    from presage_scaler.tune.advice_body import advice_status
    from presage_scaler.tune.in_cluster_advisor import advise_cluster
    from presage_scaler.tune.search import Slo
    from presage_scaler.tune.tuner import TuneSetup, tune
    from presage_scaler.tune.verdict import advise

    build_parser().parse_args(["advise", "--list"])
    day = 288
    steps = 9 * day
    rng = np.random.default_rng(3)
    values = np.maximum(200 + 120 * np.sin(2 * np.pi * np.arange(steps) / day) + rng.normal(0, 20, steps), 0.0)
    start = datetime(2026, 1, 5, tzinfo=UTC)
    trace = Trace(values, timedelta(minutes=5), start, np.zeros(steps, dtype=bool), "prometheus")
    overrides = Overrides(per_replica=20.0, lead_time=timedelta(minutes=10))
    setup = TuneSetup(spec=None, overrides=overrides, backend=backend_spec(None), slo=Slo(1.0),
                      warmup=timedelta(days=2))
    result = tune(trace, setup)
    spec = {{"scaleTargetRef": {{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
            "signal": {{"prometheus": {{"address": "http://p", "query": "q"}}, "resolution": "5m"}},
            "capacity": {{"perReplica": 20}}, "policy": {{"maxReplicas": 200}}}}
    body = advice_status(result, advise(result), spec, "1%", 1, start + steps * timedelta(minutes=5))
    print(body["verdict"], callable(advise_cluster))
    print(sorted(name for name in sys.modules if name.split(".")[0] in {packages!r} and sys.modules[name]))
    """
)


def test_advise_imports_and_tunes_without_pandas_or_plotly() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(packages=PACKAGES)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    verdict, loaded = result.stdout.splitlines()
    assert verdict in {f"{v} True" for v in Verdict}, verdict
    assert loaded == "[]"

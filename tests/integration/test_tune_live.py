"""``presage tune --scaler``: the real CLI reads a PredictiveScaler and its ForecastBackend from a real
API server and the scaler's signal from a real, backfilled Prometheus, with presage's own clients;
what it writes keeps the scaler's target and query, leaves out the defaults the API server filled in,
and is accepted by the API server."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.tune.request import HELD_OUT_FAILED
from tests.harness.presage_cluster import REPO, apply, web_demand_scaler
from tests.harness.prometheus import Series
from tests.unit.test_tune_spec_yaml import left_out_to_no_effect

pytestmark = pytest.mark.integration

DAYS = 8
STEP = timedelta(minutes=5)


def history() -> list[tuple[datetime, float]]:
    """Eight days of a daily cycle with noise, one sample every five minutes, up to now."""
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    end -= timedelta(minutes=end.minute % 5)
    steps = DAYS * 288
    rng = np.random.default_rng(7)
    times = [end - (steps - 1 - i) * STEP for i in range(steps)]
    values = [200 + 120 * math.sin(2 * math.pi * t.timestamp() / 86400) + rng.normal(0, 15) for t in times]
    return list(zip(times, values, strict=True))


def presage(plane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "tune", *args, "--kubeconfig", str(plane.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


@pytest.fixture
def scaler(cluster, kube_namespace, backend_name, prometheus_factory) -> str:
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, history()))
    apply(cluster, web_demand_scaler("web", prometheus.url, backend_name), kube_namespace)
    return "web"


def test_tunes_a_live_scaler_from_its_own_query(cluster, kube_namespace, backend_name, scaler, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = presage(
        cluster, "--scaler", scaler, "-n", kube_namespace, "--lookback", f"{DAYS}d", "--warmup", "2d",
        "--slo", "1%", "--jobs", "1", "--no-progress", "--out", str(out),
    )  # fmt: skip
    assert result.returncode in (0, HELD_OUT_FAILED), result.stderr
    document = json.loads((out / "tune.json").read_text())
    assert (result.returncode == HELD_OUT_FAILED) == document["held_out_check"]["failed"]
    assert "held out" in result.stdout

    assert 'web_demand{job="web"}' in document["trace"]
    assert document["parameters"]["resolution"] == "5m"
    assert document["parameters"]["per_replica"] == 20.0
    assert document["default"]["knobs"]["season"] == "1h"  # the scaler's own ForecastBackend
    assert document["default"]["knobs"]["cycles"] == 2

    written = (out / "spec.yaml").read_text()
    *backends, tuned = yaml.safe_load_all(written)
    assert tuned["metadata"] == {"name": "web", "namespace": kube_namespace}
    stored = json.loads(cluster.kubectl("get", "predictivescaler", "web", "-n", kube_namespace, "-o", "json").stdout)
    # The user's target, query, capacity and bounds are kept; only the knobs and the backend change.
    spec, before = parse(PredictiveScalerSpec, tuned["spec"], path="spec"), parse(PredictiveScalerSpec, stored["spec"])
    assert (spec.scale_target_ref, spec.capacity, spec.interval, spec.lead_time, spec.mode) == (
        before.scale_target_ref, before.capacity, before.interval, before.lead_time, before.mode
    )  # fmt: skip
    assert spec.signal is not None and before.signal is not None
    assert (spec.signal.prometheus, spec.signal.resolution) == (before.signal.prometheus, before.signal.resolution)
    assert (spec.policy.max_replicas, spec.policy.min_replicas) == (150, 2)
    # The stored object holds every default the API server filled in; spec.yaml holds none of them
    # (but mode), and the user's values as they were written.
    assert len(stored["spec"]["policy"]) > len(tuned["spec"]["policy"])
    assert left_out_to_no_effect(tuned["spec"]) == []
    assert tuned["spec"]["capacity"] == {"perReplica": 20}
    # A ForecastBackend only when the chosen season or cycles are not those of the scaler's own.
    chosen, start = document["chosen"]["knobs"], document["default"]["knobs"]
    if (chosen["season"], chosen["cycles"]) == (start["season"], start["cycles"]):
        assert backends == [] and tuned["spec"]["forecast"] == {"backendRef": backend_name}
    else:
        [backend] = backends
        assert tuned["spec"]["forecast"]["backendRef"] == backend["metadata"]["name"] != backend_name
    # Eight days hold six after the warm-up: too few to advise, and the header says so.
    assert document["advice"]["verdict"] == "NotEnoughHistory"
    assert "NOT ADVISED, nothing to apply" in written and "# Apply:" not in written

    # Ready to apply all the same: the API server takes the objects as they are.
    applied = cluster.kubectl("apply", "--validate=strict", "-f", str(out / "spec.yaml"), check=False)
    assert applied.returncode == 0, applied.stderr
    for backend in backends:
        cluster.kubectl("delete", "forecastbackend", backend["metadata"]["name"], "--ignore-not-found", check=False)


def test_a_missing_scaler_is_one_line_and_exit_2(cluster, kube_namespace, tmp_path: Path) -> None:
    result = presage(cluster, "--scaler", "nope", "-n", kube_namespace, "--slo", "1%", "--out", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "no PredictiveScaler 'nope'" in result.stderr
    assert "Traceback" not in result.stderr

"""``presage advise --cache-dir`` against a real API server and a real, backfilled Prometheus: the
first advice keeps its forecasts in the directory, and the next one (another process, the scaler due
again) takes them from there and advises as before."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.harness.presage_cluster import REPO, apply, get, web_demand_scaler
from tests.harness.prometheus import Series
from tests.integration.test_advise_live import WARMUP, advise_command, history

pytestmark = pytest.mark.integration

LOGGED = re.compile(r"forecast cache: (\S+): made (\d+) of the (\d+) forecast chunks used, kept (\d+)")


def advise(cluster, namespace: str, cache: Path) -> tuple[int, int, int, str]:
    """One run with the cache; the chunks it made, used and kept, from its log line."""
    done = subprocess.run(
        advise_command(cluster, "-n", namespace, "--warmup", WARMUP, "--cache-dir", str(cache)),
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("shard 0 of 1: 1 advised, 0 failed"), done.stdout
    (found,) = LOGGED.findall(done.stderr)
    return int(found[1]), int(found[2]), int(found[3]), done.stderr


def test_the_next_advice_takes_the_forecasts_the_first_kept(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path
):
    ns = kube_namespace
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, history()))
    # A history of two days: most decisions read all of theirs inside the lookback, so a later
    # advice can take their forecasts.
    scaler = web_demand_scaler("web", prometheus.url, backend_name, advice={"lookback": "16d"})
    scaler["spec"]["signal"]["history"] = "48h"
    apply(cluster, scaler, ns)
    cache = tmp_path / "cache"
    made, used, kept, _ = advise(cluster, ns, cache)
    assert made <= used and kept > 0
    (file,) = cache.glob("*.npz")
    first = get(cluster, "predictivescaler", "web", ns)["status"]["advice"]

    # Due again as a day later: its advice time moved back (the data read is the same).
    before = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.kubectl(
        "patch", "predictivescaler", "web", "-n", ns, "--subresource=status", "--type", "merge",
        "-p", json.dumps({"status": {"advice": {"time": before}}}),
    )  # fmt: skip
    again, used_again, _, log = advise(cluster, ns, cache)
    assert again < used_again and again < made, log  # the kept chunks were taken, by another process
    second = get(cluster, "predictivescaler", "web", ns)["status"]["advice"]
    assert second["verdict"] == first["verdict"]
    assert file.exists()

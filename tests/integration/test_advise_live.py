"""``presage advise`` against a real API server and a real, backfilled Prometheus: a Shadow scaler
with ``spec.advice`` gets ``status.advice`` and one AdviceReady Event, and ``presage backtest --spec``
on the advised spec reproduces the held-out figures stated; a scaler without ``spec.advice`` is never
read; two shards of an indexed Job split a hundred scalers with none advised twice or missed."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from aiohttp import web

from presage_scaler.api.quantities import format_decimal, parse_duration
from presage_scaler.tune.advise_command import INDEX_VARIABLE
from presage_scaler.tune.advisor import ADVICE_READY, FIELD_MANAGER
from tests.harness.local_http import Seen, seen, serving
from tests.harness.presage_cluster import REPO, apply, get, predictive_scaler
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

DAYS = 16
STEP = timedelta(minutes=5)
WARMUP = "1d"
ADVICE = {"serviceLevel": "1%", "lookback": f"{DAYS}d"}


def history() -> list[tuple[datetime, float]]:
    """Sixteen days of a daily cycle with noise, one sample every five minutes, up to now: after a
    day's warm-up, eight days to choose on and seven held out, so a change can be advised."""
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    end -= timedelta(minutes=end.minute % 5)
    steps = DAYS * 288
    rng = np.random.default_rng(11)
    times = [end - (steps - 1 - i) * STEP for i in range(steps)]
    # A function of the step, not of the clock: every run tunes the same numbers.
    values = [200 + 120 * math.sin(2 * math.pi * i / 288) + rng.normal(0, 15) for i in range(steps)]
    return list(zip(times, values, strict=True))


def advise_command(plane, *args: str) -> list[str]:
    return [sys.executable, "-m", "presage_scaler.cli.main", "advise", *args, "--kubeconfig", str(plane.kubeconfig)]


def scaler_object(name: str, address: str, backend: str, **spec: Any) -> dict[str, Any]:
    query = 'web_demand{job="web"}'
    return predictive_scaler(
        name,
        "web",
        address,
        query,
        backend,
        signal={"prometheus": {"address": address, "query": query}, "resolution": "5m"},
        interval="5m",
        leadTime={"static": "10m"},
        capacity={"perReplica": 20},
        policy={"maxReplicas": 150, "minReplicas": 2},
        **spec,
    )


def events(plane, namespace: str, name: str) -> list[dict[str, Any]]:
    listing = json.loads(plane.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [e for e in listing if e["involvedObject"]["name"] == name]


def replay(plane, scaler: dict[str, Any], backend: dict[str, Any], samples, warmup: timedelta, out: Path) -> dict:
    """``presage backtest --spec`` over the samples with the advised spec, counting only the held-out part."""
    trace = out / "trace.csv"
    with trace.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp", "value"])
        writer.writerows((t.isoformat(), v) for t, v in samples)
    spec_file = out / "spec.yaml"
    spec_file.write_text(yaml.safe_dump_all([backend, scaler]))
    result = subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "backtest", str(trace), "--spec", str(spec_file),
         "--warmup", f"{int(warmup.total_seconds())}s", "--out", str(out / "backtest"), "--no-progress"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads((out / "backtest" / "summary.json").read_text())["presage"]


async def test_a_scaler_that_asks_gets_advice_and_one_that_does_not_is_never_read(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path: Path
) -> None:
    ns = kube_namespace
    samples = history()
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, samples))
    requests: list[Seen] = []

    async def record(request: web.Request) -> web.Response:
        requests.append(await seen(request))
        return web.json_response({"status": "error", "error": "not to be read"}, status=500)

    async with serving(record) as untouched:
        apply(cluster, scaler_object("web", prometheus.url, backend_name, advice=ADVICE), ns)
        apply(cluster, scaler_object("quiet", untouched, backend_name), ns)
        process = await asyncio.create_subprocess_exec(
            *advise_command(cluster, "-n", ns, "--warmup", WARMUP),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), 600)
    assert process.returncode == 0, stderr.decode()
    assert requests == []  # the scaler without spec.advice: its Prometheus was never asked
    assert "quiet" not in stdout.decode()

    web_obj = get(cluster, "predictivescaler", "web", ns)
    advice = web_obj["status"]["advice"]
    assert f"{ns}/web {advice['verdict']}" in stdout.decode(), stdout.decode()
    assert advice["observedGeneration"] == web_obj["metadata"]["generation"]
    assert advice["serviceLevel"] == "1%" and "error" not in advice
    history_used = advice["history"]
    assert parse_duration(history_used["heldOut"]) == timedelta(days=7), history_used
    assert parse_duration(history_used["inSample"]) >= timedelta(days=7), history_used
    assert "quiet" not in json.dumps(get(cluster, "predictivescaler", "quiet", ns).get("status") or {})
    # Its own field manager wrote status.advice and nothing else; the spec is as applied.
    shown = cluster.kubectl("get", "predictivescaler", "web", "-n", ns, "-o", "json", "--show-managed-fields")
    managers = {m["manager"]: m for m in json.loads(shown.stdout)["metadata"]["managedFields"]}
    assert list(managers[FIELD_MANAGER]["fieldsV1"]) == ["f:status"]
    # ("." is the status object itself, which no controller has written here.)
    assert set(managers[FIELD_MANAGER]["fieldsV1"]["f:status"]) - {"."} == {"f:advice"}
    assert web_obj["spec"]["advice"] == {"every": "24h", **ADVICE}

    ready = [e for e in events(cluster, ns, "web") if e["reason"] == ADVICE_READY]
    assert len(ready) == 1 and ready[0]["type"] == "Normal", ready
    assert advice["verdict"] == "Advised", advice["message"]

    # The figures stated are those presage backtest gives the advised spec over the held-out part.
    assert advice["changes"] and float(advice["saving"]) > 0, advice
    assert advice["message"] in ready[0]["message"] and f"{float(advice['saving']):.1f} %" in ready[0]["message"]
    patch = json.loads(advice["patch"])
    assert set(patch) == {"spec"}
    accepted = cluster.kubectl(
        "patch", "predictivescaler", "web", "-n", ns, "--type", "merge", "-p", advice["patch"], "--dry-run=server",
        "-o", "json", check=False,
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    advised_spec = json.loads(accepted.stdout)["spec"]
    backend = get(cluster, "forecastbackend", backend_name)
    if advice.get("forecastBackend"):
        chosen = advice["forecastBackend"]
        assert advised_spec["forecast"]["backendRef"] == chosen["name"]
        seasonal = {"season": chosen["season"], "cycles": chosen["cycles"]}
        backend = {
            "apiVersion": backend["apiVersion"],
            "kind": "ForecastBackend",
            "metadata": {"name": chosen["name"]},
            "spec": {"type": "SeasonalNaive", "seasonalNaive": seasonal},
        }
    stated = advice["advised"]["heldOut"]
    backend = {key: backend[key] for key in ("apiVersion", "kind", "metadata", "spec")}
    backend["metadata"] = {"name": backend["metadata"]["name"]}
    scaler = {"apiVersion": web_obj["apiVersion"], "kind": "PredictiveScaler", "metadata": {"name": "web"},
              "spec": advised_spec}  # fmt: skip
    start = datetime.fromisoformat(advice["history"]["start"])
    held_out_from = datetime.fromisoformat(advice["history"]["end"]) + STEP - parse_duration(history_used["heldOut"])
    read = [(t, v) for t, v in samples if t >= start]
    replayed = replay(cluster, scaler, backend, read, held_out_from - start, tmp_path)
    # Exactly, as status writes a figure (a decimal string).
    assert format_decimal(replayed["under_provisioned_pct"]) == stated["underProvisioned"]
    assert format_decimal(replayed["cost_vs_oracle"]) == stated["costVsOracle"]
    assert format_decimal(replayed["replica_hours"]) == stated["replicaHours"]

    # Advised once: a second run finds nothing due, and writes and tells nothing.
    again = subprocess.run(advise_command(cluster, "-n", ns, "--warmup", WARMUP), capture_output=True, text=True,
                           timeout=300, cwd=REPO)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "0 advised, 0 failed, 1 not due" in again.stdout
    assert get(cluster, "predictivescaler", "web", ns)["status"]["advice"]["time"] == advice["time"]
    assert len([e for e in events(cluster, ns, "web") if e["reason"] == ADVICE_READY]) == 1


def test_two_shards_split_a_hundred_scalers_none_twice_none_missed(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path: Path
) -> None:
    """Each scaler's history is too short to tune, so each is advised quickly and fails with the reason
    written to its own status (and each run exits 1): what is counted is who wrote to whom."""
    ns = kube_namespace
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, history()[-288:]))
    names = [f"s{i:03d}" for i in range(100)]
    documents = [scaler_object(name, prometheus.url, backend_name, advice=ADVICE) for name in names]
    for document in documents:
        document["metadata"]["namespace"] = ns
    manifest = tmp_path / "scalers.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    cluster.kubectl("apply", "-f", str(manifest))

    listed: list[set[str]] = []
    for shard in (0, 1):
        result = subprocess.run(
            advise_command(cluster, "-n", ns, "--shards", "2", "--list"),
            capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, INDEX_VARIABLE: str(shard)},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        listed.append({line.split()[0] for line in result.stdout.splitlines()})
    assert listed[0].isdisjoint(listed[1]) and listed[0] | listed[1] == {f"{ns}/{name}" for name in names}
    assert listed[0] and listed[1]

    failed: list[set[str]] = []
    for shard in (0, 1):
        result = subprocess.run(
            advise_command(cluster, "-n", ns, "--shards", "2", "--shard", str(shard), "--warmup", "1h"),
            capture_output=True, text=True, timeout=600, cwd=REPO,
        )  # fmt: skip
        assert result.returncode == 1, result.stderr  # a scaler that could not be advised fails the run
        failed.append({line.split()[0] for line in result.stdout.splitlines() if " failed: " in line})
        assert f"0 advised, {len(listed[shard])} failed, 0 not due" in result.stdout
    assert failed == listed
    for name in names:
        advice = get(cluster, "predictivescaler", name, ns)["status"]["advice"]
        assert "too short" in advice["error"], advice
        assert "verdict" not in advice

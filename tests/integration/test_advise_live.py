"""``presage advise`` against a real API server and a real, backfilled Prometheus: a Shadow scaler
with ``spec.advice`` gets ``status.advice`` and one AdviceReady Event, and ``presage backtest --spec``
on the advised spec reproduces the held-out figures stated; a Shadow scaler without ``spec.advice`` is
advised too, with the defaults; one that opts out (``spec.advice.enabled: false``) and one in Enforce
without ``spec.advice`` are never read; two shards of an indexed Job split a hundred scalers with
none advised twice or missed; and hostile tenants beside a good one (a stored advice time in the year
9999, a Prometheus that answers every request just inside its timeout) neither stop the run nor keep
the good one from its advice."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from aiohttp import web

from presage_scaler.api.quantities import format_decimal, parse_duration
from presage_scaler.cli.advise import INDEX_VARIABLE
from presage_scaler.tune.in_cluster_advisor import ADVICE_FAILED, ADVICE_READY, FIELD_MANAGER
from tests.harness.local_http import Seen, seen, serving
from tests.harness.presage_cluster import REPO, apply, get, web_demand_scaler
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

DAYS = 16
STEP = timedelta(minutes=5)
WARMUP = "1d"
ADVICE = {"serviceLevel": "1%", "lookback": f"{DAYS}d"}
ADVICE_DEFAULTS = {"enabled": True, "every": "24h", "lookback": "28d", "serviceLevel": "1%", "proveFor": "7d",
                   "apply": "Never"}  # fmt: skip
"""spec.advice's defaults, as the API reference declares them: what the API server fills in."""


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


async def test_shadow_scalers_are_advised_and_those_not_advised_are_never_read(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path: Path
) -> None:
    """``web`` (Shadow, ``spec.advice`` set) and ``plain`` (Shadow, no ``spec.advice``) read the same
    series and are advised alike; ``opted-out`` (Shadow, ``enabled: false``) and ``enforced`` (Enforce,
    no ``spec.advice``) point at a Prometheus that refuses every request, and none is sent."""
    ns = kube_namespace
    samples = history()
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, samples))
    requests: list[Seen] = []

    async def record(request: web.Request) -> web.Response:
        requests.append(await seen(request))
        return web.json_response({"status": "error", "error": "not to be read"}, status=500)

    async with serving(record) as untouched:
        apply(cluster, web_demand_scaler("web", prometheus.url, backend_name, advice=ADVICE), ns)
        apply(cluster, web_demand_scaler("plain", prometheus.url, backend_name), ns)
        apply(cluster, web_demand_scaler("opted-out", untouched, backend_name, advice={"enabled": False}), ns)
        apply(cluster, web_demand_scaler("enforced", untouched, backend_name, mode="Enforce"), ns)
        process = await asyncio.create_subprocess_exec(
            *advise_command(cluster, "-n", ns, "--warmup", WARMUP),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), 600)
    assert process.returncode == 0, stderr.decode()
    assert requests == []  # the scalers not advised: their Prometheus was never asked
    out = stdout.decode()
    assert "opted-out" not in out and "enforced" not in out, out
    assert out.splitlines()[-1] == "shard 0 of 1: 2 advised, 0 failed, 0 not due, 0 waiting for history, 0 skipped"

    web_obj = get(cluster, "predictivescaler", "web", ns)
    advice = web_obj["status"]["advice"]
    assert f"{ns}/web {advice['verdict']}" in stdout.decode(), stdout.decode()
    assert advice["observedGeneration"] == web_obj["metadata"]["generation"]
    assert advice["serviceLevel"] == "1%" and "error" not in advice
    history_used = advice["history"]
    assert parse_duration(history_used["heldOut"]) == timedelta(days=7), history_used
    assert parse_duration(history_used["inSample"]) >= timedelta(days=7), history_used
    for name in ("opted-out", "enforced"):
        assert "advice" not in (get(cluster, "predictivescaler", name, ns).get("status") or {}), name
    # Its own field manager wrote status.advice and nothing else; the spec is as applied.
    shown = cluster.kubectl("get", "predictivescaler", "web", "-n", ns, "-o", "json", "--show-managed-fields")
    managers = {m["manager"]: m for m in json.loads(shown.stdout)["metadata"]["managedFields"]}
    assert list(managers[FIELD_MANAGER]["fieldsV1"]) == ["f:status"]
    # ("." is the status object itself, which no controller has written here.)
    assert set(managers[FIELD_MANAGER]["fieldsV1"]["f:status"]) - {"."} == {"f:advice"}
    assert web_obj["spec"]["advice"] == {**ADVICE_DEFAULTS, **ADVICE}

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

    # The Shadow scaler without spec.advice: advised with the defaults, its 28d lookback reading the
    # same sixteen days (from the first sample); its spec stays without spec.advice. (Its figures may
    # differ from web's by the step a 5m boundary passing between the two reads adds.)
    plain_obj = get(cluster, "predictivescaler", "plain", ns)
    assert "advice" not in plain_obj["spec"]
    plain = plain_obj["status"]["advice"]
    assert f"{ns}/plain Advised" in out, out
    assert plain["verdict"] == "Advised" and plain["patch"] and "error" not in plain, plain
    assert plain["serviceLevel"] == ADVICE_DEFAULTS["serviceLevel"]
    assert plain["observedGeneration"] == plain_obj["metadata"]["generation"]
    assert plain["history"]["start"] == advice["history"]["start"]
    assert parse_duration(plain["history"]["heldOut"]) == timedelta(days=7), plain["history"]
    assert [e["type"] for e in events(cluster, ns, "plain") if e["reason"] == ADVICE_READY] == ["Normal"]

    # Advised once: a second run finds nothing due, and writes and tells nothing.
    again = subprocess.run(advise_command(cluster, "-n", ns, "--warmup", WARMUP), capture_output=True, text=True,
                           timeout=300, cwd=REPO)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "0 advised, 0 failed, 2 not due" in again.stdout
    for name, first in (("web", advice), ("plain", plain)):
        assert get(cluster, "predictivescaler", name, ns)["status"]["advice"]["time"] == first["time"], name
        assert len([e for e in events(cluster, ns, name) if e["reason"] == ADVICE_READY]) == 1, name


def test_two_shards_split_a_hundred_scalers_none_twice_none_missed(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path: Path
) -> None:
    """Each scaler's history is too short to tune, so each is advised quickly and fails with the reason
    written to its own status (and each run exits 1): what is counted is who wrote to whom."""
    ns = kube_namespace
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, history()[-288:]))
    names = [f"s{i:03d}" for i in range(100)]
    documents = [web_demand_scaler(name, prometheus.url, backend_name, advice=ADVICE) for name in names]
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

    waiting: list[set[str]] = []
    for shard in (0, 1):
        result = subprocess.run(
            advise_command(cluster, "-n", ns, "--shards", "2", "--shard", str(shard), "--warmup", "1h"),
            capture_output=True, text=True, timeout=600, cwd=REPO,
        )  # fmt: skip
        # A day of history is too short to advise on yet: each scaler waits, and the run has not failed.
        assert result.returncode == 0, result.stderr
        waiting.append({line.split()[0] for line in result.stdout.splitlines() if " waiting for history: " in line})
        assert result.stdout.splitlines()[-1] == (
            f"shard {shard} of 2: 0 advised, 0 failed, 0 not due, {len(listed[shard])} waiting for history, 0 skipped"
        )
    assert waiting == listed
    for name in names:
        advice = get(cluster, "predictivescaler", name, ns)["status"]["advice"]
        assert "too short" in advice["error"], advice
        assert "verdict" not in advice


SLOW_ANSWER = 9.0
"""Seconds the hostile Prometheus takes to answer each request: just inside the client's 10 s timeout
per request, so only the advice's deadline ends its reads."""
DEADLINE = 30
"""Seconds each advice may take: three of the hostile Prometheus's answers, and several times what the
good scalers' sixteen days at 5m take to read and tune."""


async def test_hostile_tenants_beside_a_good_one_neither_stop_the_run_nor_delay_its_advice(
    cluster, kube_namespace, backend_name, prometheus_factory
) -> None:
    """In one run, listed in this order: ``future``, whose stored ``status.advice.time`` is
    9999-12-31T23:59:59Z (adding ``every`` to it overflowed the due check and ended the run); ``slow``,
    whose Prometheus needs 9 s for each of the 5 requests of its 16 days at 30s resolution (45 s,
    none timing out); ``huge``, whose 9999-day lookback at 1s resolution would take far more memory
    than the run's budget; and ``web``, an ordinary scaler. ``future`` is due (a time later than now
    cannot be trusted) and advised, its time made true; ``slow`` fails at the deadline with the reason
    in its status; ``huge`` is refused with the estimate before its Prometheus is asked anything;
    ``web`` is advised; the summary line counts them and the run exits 1."""
    ns = kube_namespace
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, history()))
    asked: list[float] = []

    async def slow(request: web.Request) -> web.Response:
        asked.append(time.monotonic())
        await asyncio.sleep(SLOW_ANSWER)
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": []}})

    huge_asked: list[float] = []

    async def never(request: web.Request) -> web.Response:
        huge_asked.append(time.monotonic())
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": []}})

    async with serving(slow) as slow_url, serving(never) as never_url:
        future = web_demand_scaler("future", prometheus.url, backend_name, advice=ADVICE)
        hostile = web_demand_scaler("slow", slow_url, backend_name, advice=ADVICE)
        hostile["spec"]["signal"]["resolution"] = "30s"
        huge = web_demand_scaler("huge", never_url, backend_name, advice={**ADVICE, "lookback": "9999d"})
        huge["spec"]["signal"]["resolution"] = "1s"
        for obj in (future, hostile, huge, web_demand_scaler("web", prometheus.url, backend_name, advice=ADVICE)):
            apply(cluster, obj, ns)
        generation = get(cluster, "predictivescaler", "future", ns)["metadata"]["generation"]
        stored = {"status": {"advice": {"time": "9999-12-31T23:59:59Z", "observedGeneration": generation}}}
        cluster.kubectl(
            "patch", "predictivescaler", "future", "-n", ns, "--subresource=status", "--type=merge",
            "-p", json.dumps(stored),
        )  # fmt: skip
        assert get(cluster, "predictivescaler", "future", ns)["status"]["advice"]["time"] == "9999-12-31T23:59:59Z"
        began = datetime.now(UTC)
        process = await asyncio.create_subprocess_exec(
            *advise_command(
                cluster, "-n", ns, "--warmup", WARMUP, "--deadline", f"{DEADLINE}s", "--memory-budget", "1Gi"
            ),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), 600)
    out = stdout.decode()
    assert process.returncode == 1, (out, stderr.decode())
    assert out.splitlines()[-1] == "shard 0 of 1: 2 advised, 2 failed, 0 not due, 0 waiting for history, 0 skipped", out

    # The huge lookback: refused with its estimate and the run's budget, before a request was sent.
    refusal = get(cluster, "predictivescaler", "huge", ns)["status"]["advice"]["error"]
    assert refusal.startswith("this run would need about "), refusal
    assert "points of 1s), more than its budget of 1.00 GiB" in refusal, refusal
    assert huge_asked == []

    # The slow tenant: its reads were cut at the deadline, not after its 45 s of answers.
    reason = get(cluster, "predictivescaler", "slow", ns)["status"]["advice"]["error"]
    assert reason.startswith(f"reading its ForecastBackend and its signal's history took longer than the advice "
                             f"deadline of {DEADLINE}s (presage advise --deadline"), reason  # fmt: skip
    assert "spec.advice.lookback" in reason and "spec.signal.resolution" in reason, reason
    assert f"{ns}/slow failed: {reason}" in out, out
    assert 1 <= len(asked) <= DEADLINE // SLOW_ANSWER + 1, asked
    assert asked[-1] - asked[0] < DEADLINE, asked
    [failed] = [e for e in events(cluster, ns, "slow") if e["reason"] == ADVICE_FAILED]
    assert failed["type"] == "Warning" and reason in failed["message"], failed

    # The stored year-9999 time made its scaler due; its advice wrote a true one.
    future_advice = get(cluster, "predictivescaler", "future", ns)["status"]["advice"]
    assert not future_advice.get("error") and future_advice["verdict"], future_advice
    made = datetime.fromisoformat(future_advice["time"])
    assert began.replace(microsecond=0) <= made <= datetime.now(UTC), future_advice
    assert f"{ns}/future {future_advice['verdict']}" in out, out

    # The good tenant, listed after both, was advised as if they were not there.
    web_advice = get(cluster, "predictivescaler", "web", ns)["status"]["advice"]
    assert not web_advice.get("error") and web_advice["verdict"] == "Advised", web_advice
    assert f"{ns}/web Advised" in out, out
    assert [e["type"] for e in events(cluster, ns, "web") if e["reason"] == ADVICE_READY] == ["Normal"]

"""``presage run`` beside a Prometheus that answers a gzip bomb: bounded memory, a reason, no delay.

Two PredictiveScalers in one namespace, evaluated every 2s by ``presage run`` in its own process on
the real API server. "good" reads a real Prometheus backfilled with the test's demand. "bomb" names a
server on a loopback socket of this test process that answers every query with 1.17 MB of gzip
inflating to 256 MiB of valid JSON (a Prometheus document padded with whitespace). The process's peak
resident memory (``VmHWM``) stays under 300 MiB, "bomb" is Degraded with QueryFailed naming the 4 MiB
answer cap, and "good" keeps being evaluated every interval while "bomb" keeps being retried.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import signal
from datetime import datetime

import pytest
from aiohttp import web

from presage_scaler.clients.prometheus import MAX_ANSWER_BYTES
from tests.harness.hostile_json import gzip_bomb
from tests.harness.local_http import Handler, serving
from tests.harness.presage_cluster import (
    apply,
    condition,
    controller_process,
    deployment,
    eventually,
    get,
    predictive_scaler,
    recent_samples,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

INTERVAL_S = 2
INFLATED = 256 << 20
MAX_PEAK_RSS_KIB = 300 << 10
WATCHED_S = 30.0
"""How long "good" is watched once "bomb" is Degraded: fifteen intervals."""

MAX_GAP_S = 3 * INTERVAL_S
"""The longest "good" may go between evaluations: its interval, with room for a loaded 2-core machine."""

EVALUATED = re.compile(r"^(\S+ \S+) level=INFO .* evaluated scaler=(\S+) ", re.MULTILINE)


def bomb_handler(requests: list[str]) -> Handler:
    """A Prometheus whose every answer is the bomb; ``requests`` counts the queries it got."""
    document = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()
    body = gzip_bomb(document[:-1], INFLATED, document[-1:])

    async def handle(request: web.Request) -> web.Response:
        requests.append(request.path)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        return web.Response(body=body, headers=headers)

    return handle


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def evaluations(log: str, scaler: str) -> list[float]:
    """When ``scaler`` was evaluated, in seconds, from the log's timestamps."""
    return [
        datetime.strptime(at, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for at, name in EVALUATED.findall(log)
        if name == scaler
    ]


async def test_a_gzip_bomb_degrades_its_scaler_within_bounded_memory_and_delays_no_other(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path
):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    queries: list[str] = []
    handler = await asyncio.to_thread(bomb_handler, queries)
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, deployment("api", 3), kube_namespace)
    every = f"{INTERVAL_S}s"
    apply(
        cluster, predictive_scaler("good", "web", prom.url, "app_demand", backend_name, interval=every), kube_namespace
    )
    log_path = tmp_path / "presage.log"
    async with serving(handler) as bomb_url:
        apply(
            cluster, predictive_scaler("bomb", "api", bomb_url, "demand", backend_name, interval=every), kube_namespace
        )
        process = controller_process(cluster, kube_namespace, "bomb-test", log_path)
        try:
            degraded = await eventually(
                lambda: get(cluster, "predictivescaler", "bomb", kube_namespace),
                lambda o: (condition(o, "Degraded") or {}).get("status") == "True",
                what="bomb to be Degraded",
            )
            watched_from = len(log_path.read_text())
            asked_before = len(queries)
            await asyncio.sleep(WATCHED_S)
            peak = peak_rss_kib(process.pid)
            assert process.poll() is None, log_path.read_text()[-3000:]
        finally:
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 20)
    log = log_path.read_text()
    print(f"presage run peak RSS {peak >> 10} MiB; bomb queried {len(queries)} times")
    message = condition(degraded, "Degraded")["message"]
    assert condition(degraded, "Degraded")["reason"] == "QueryFailed", message
    assert f"over the limit of 4 MiB ({MAX_ANSWER_BYTES} bytes) once inflated (gzip)" in message, message
    assert "'demand'" in message
    assert peak < MAX_PEAK_RSS_KIB, f"peak RSS {peak} KiB"
    # The bomb was asked again and again while "good" was watched: no back-off hides the cost.
    assert len(queries) - asked_before >= WATCHED_S / INTERVAL_S / 2
    times = evaluations(log[watched_from:], f"{kube_namespace}/good")
    assert len(times) >= WATCHED_S / MAX_GAP_S, log[-3000:]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert max(gaps) <= MAX_GAP_S, gaps

"""Controller throughput: PredictiveScalers evaluated per second by one process, and memory per 1,000.

Real servers throughout: kube-apiserver + etcd from the test harness, a backfilled Prometheus, the
in-process controller with SeasonalNaive. Every scaler gets a 1 s interval so the controller is
saturated; the figure is evaluations completed per second over a measurement window after
warm-up. With ``--interval 1m`` the scalers run at the target's own interval instead: the
controller keeps up or falls behind, and the benchmark says which from the spacing it kept
between a scaler's evaluations, over a window of whole intervals (a saturated run cannot hold
statuses at 10,000 scalers: each is evaluated less often than KEDA's bound allows, so the
saturated figure understates a controller that keeps up). Each evaluation is the production path:
the Deployment's replica count (from the watch once it has listed, a scale subresource GET
before), Prometheus range query, forecast, policy, status PATCH (held when nothing visible
changed, the controller leading its Lease as in production, so that the Lease vouches for held
statuses; events when the recommendation changes).

Baseline in the same run: the same evaluations with no Kubernetes edges (``evaluate()`` against the
same Prometheus, same concurrency), so the ratio shows what the API server round trips cost. It is
measured before, between and after the controller runs, and each run is compared with the mean of
the two beside it.

Staleness: the oldest recommendation in the store KEDA and Agones are answered from (its age as
served: since it was last confirmed, by its written status or by the Lease's freshness record),
sampled every 5 s over the window, against KEDA's staleness bound: a controller that falls behind
must still not serve a stale one.

Memory: process RSS with the scalers cached and evaluating, minus RSS before any were created.

Where the rest of the machine goes: the API server's, etcd's and Prometheus's CPU per evaluation over
the controller's measurement window (from /proc), since on one machine they share its cores with
the controller and bound its throughput.

Sharding (``--shards N``): N ``presage run --shards N`` processes share the scalers, against one
``presage run`` process measured the same way (evaluations counted from each process's /metrics,
CPU from /proc, status writes from the API server's metrics), alternated three times and compared
as means: one window differs from the next by as much as sharding does. On one machine the
processes share its cores with the API server, etcd and Prometheus, so the figure that carries over
to a cluster, where each replica has cores of its own, is CPU per evaluation per replica.

Usage: .venv/bin/python benchmarks/bench_controller.py [--scalers 1000] [--seconds 90] [--concurrency 64] [--shards 2];
writes ``benchmarks/results/bench_controller.md`` (``--check`` verifies it), with the baseline measured
before the runs as the machine's calibration.
Target: 10,000 scalers at a 1 m interval on one replica, i.e. ~170 evaluations/s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import resource
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import parse_duration
from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.app import ControllerOptions, running
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.prometheus_signals import PrometheusSignalSource
from presage_scaler.engine.evaluator import evaluate
from presage_scaler.engine.policy import PolicyState
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.store import RecommendationStore
from tests.harness.kube import KubeControlPlane, ensure_kube_binaries
from tests.harness.presage_cluster import WRITES_EVERY_EVALUATION, install_crds, predictive_scaler, seasonal_backend
from tests.harness.process import free_ports
from tests.harness.prometheus import PrometheusServer

SERIES = 50
SHARD_ROUNDS = 3
"""Runs of one process and of the shards each, alternated (``--shards``)."""
NAMESPACE = "bench"


def cpu_seconds() -> float:
    """CPU time of this process (user + system): robust to other load on the machine, unlike rates."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def samples() -> list[tuple[datetime, float]]:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(hours=3)
    return [(start + timedelta(minutes=i), 100 + 50 * math.sin(2 * math.pi * i / 60)) for i in range(181)]


def objects(count: int, prom_url: str, interval: str = "1s") -> str:
    items = []
    for i in range(count):
        name = f"s{i:05d}"
        items.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {"containers": [{"name": "a", "image": "registry.invalid/a"}]},
                    },
                },
            }
        )
        scaler = predictive_scaler(
            name, name, prom_url, f'app_demand{{job="j{i % SERIES}"}}', "bench", interval=interval
        )
        scaler["metadata"]["namespace"] = NAMESPACE
        items.append(scaler)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@dataclass(frozen=True)
class ControllerRun:
    rate: float
    """Evaluations per second."""
    cpu_ms: float
    """The controller's CPU per evaluation."""
    memory_mib: float
    servers_ms: dict[str, float]
    """Each server's CPU per evaluation over the same window: what the evaluations cost beyond the
    controller on the machine they share."""
    writes_per_evaluation: float
    collector_ms: float
    """CPU the cycle collector took per evaluation over the window (part of ``cpu_ms``)."""
    collections: tuple[int, int, int]
    """Its collections over the window, by generation."""
    oldest_served: timedelta
    """The oldest recommendation in the store KEDA and Agones are answered from, sampled every few
    seconds over the window: how stale an answer could have been."""
    start_delay: float
    """Seconds an evaluation started after it was due, on average over the window's last interval
    (its last half without one): about 0 for a controller that keeps up, growing for one that
    cannot. Over the whole window it would count the backlog a fresh install's first round left."""
    tail_rate: float
    """Evaluations per second over that same last part of the window."""
    in_flight: float
    """Evaluations running at once, on average over the window (sampled every 0.5 s): at the
    concurrency, the evaluations wait for a slot, not for CPU."""


async def controller_rate(
    plane: KubeControlPlane,
    servers: dict[str, int],
    seconds: float,
    concurrency: int,
    scalers: int,
    tail: float,
    staleness: StalenessBound | None = None,
) -> ControllerRun:
    """``tail``: the last part of the window whose start delays and rate are reported apart;
    ``staleness``: the default holds unchanged statuses for the next evaluation; a bound of one
    interval writes every evaluation's status (how the controller worked before)."""
    options = ControllerOptions(
        staleness=staleness or StalenessBound(),
        kubeconfig=plane.kubeconfig,
        namespaces=(NAMESPACE,),
        grpc_port=0,
        http_port=0,
        health_port=0,
        lease_namespace=NAMESPACE,  # one replica, leader of its Lease, which vouches for held statuses
        concurrency=concurrency,
    )
    before = rss_mib()
    async with running(options) as app:
        while app.scalers.evaluations < scalers:  # warm-up: every scaler evaluated once
            await asyncio.sleep(0.5)
        start_count, start, cpu = app.scalers.evaluations, time.perf_counter(), cpu_seconds()
        start_writes = app.scalers.status_writes
        servers_before = {name: _cpu_of(pid) for name, pid in servers.items()}
        in_flight: list[int] = []

        async def sample_in_flight() -> None:
            while True:
                in_flight.append(app.scalers.evaluating)
                await asyncio.sleep(0.5)

        with CollectorClock() as collector:
            sampler = asyncio.create_task(sample_in_flight())
            head = await oldest_served(app.store, seconds - tail)
            tail_from, tail_late, tail_start = app.scalers.evaluations, app.scalers.started_late, time.perf_counter()
            oldest = max(head, await oldest_served(app.store, tail))
            tail_rate = (app.scalers.evaluations - tail_from) / (time.perf_counter() - tail_start)
            sampler.cancel()
        done = app.scalers.evaluations - start_count
        rate = done / (time.perf_counter() - start)
        cpu_ms = (cpu_seconds() - cpu) * 1000 / done
        servers_ms = {name: (_cpu_of(pid) - servers_before[name]) * 1000 / done for name, pid in servers.items()}
        writes = (app.scalers.status_writes - start_writes) / done
        started, late = (now - before for now, before in zip(app.scalers.started_late, tail_late, strict=True))
        delay = late / max(started, 1)
        memory = rss_mib() - before
    return ControllerRun(
        rate,
        cpu_ms,
        memory,
        servers_ms,
        writes,
        collector.seconds * 1000 / done,
        tuple(collector.collections),
        oldest,
        delay,
        tail_rate,
        statistics.fmean(in_flight),
    )


async def oldest_served(store: RecommendationStore, seconds: float, every: float = 5.0) -> timedelta:
    """Wait ``seconds``, sampling the age of the oldest recommendation in ``store`` every ``every``."""
    oldest, end = timedelta(0), time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(every, left))
        now = datetime.now(UTC)
        oldest = max([oldest, *(store.age(item, now) for item in store.items())])
    return oldest


class CollectorClock:
    """CPU time the cycle collector takes while the block runs, and its collections by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections[info["generation"]] += 1

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._observe)


def _scraped_sum(url: str, counts: Callable[[str], bool], context: ssl.SSLContext | None = None) -> float:
    """The sum of the samples of a /metrics page whose lines ``counts`` picks."""
    with urllib.request.urlopen(url, timeout=30, context=context) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if counts(line))


def _evaluations(port: int) -> float:
    """Evaluations one ``presage run`` has completed, from its /metrics."""
    prefix = "presage_evaluation_duration_seconds_count{"
    return _scraped_sum(f"http://127.0.0.1:{port}/metrics", lambda line: line.startswith(prefix))


def _status_patches(plane: KubeControlPlane) -> float:
    """PredictiveScaler status writes the API server has answered, from its own /metrics: what
    separate ``presage run`` processes wrote, which they do not report themselves."""
    context = ssl.create_default_context(cafile=str(plane.ca_path))
    context.load_cert_chain(str(plane.admin_cert), str(plane.admin_key))

    def counts(line: str) -> bool:
        return (
            line.startswith("apiserver_request_total{")
            and 'resource="predictivescalers"' in line
            and 'subresource="status"' in line
            and ('verb="PATCH"' in line or 'verb="APPLY"' in line)
        )

    return _scraped_sum(f"{plane.server}/metrics", counts, context)


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@dataclass(frozen=True)
class ProcessesRun:
    rate: float
    """Evaluations/s, all processes together."""
    cpu_ms: float
    """CPU ms per evaluation, summed over the processes."""
    writes_per_evaluation: float
    rss_mib: float
    """The largest process's RSS."""


def processes_rate(
    plane: KubeControlPlane, seconds: float, concurrency: int, scalers: int, shards: int
) -> ProcessesRun:
    """``shards`` processes (``presage run --shards``; one plain process for 1), measured together."""
    ports = free_ports(shards)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "presage_scaler.cli.main",
                "run",
                f"--kubeconfig={plane.kubeconfig}",
                f"--namespaces={NAMESPACE}",
                "--grpc-port=0",
                f"--http-port={port}",
                "--health-port=0",
                f"--lease-namespace={NAMESPACE}",
                f"--lease-name=bench-{shards}",
                f"--identity=bench-{shards}-{k}",
                f"--shards={shards}",
                f"--concurrency={concurrency}",
                "--log-level=WARNING",
            ],
            cwd=Path(__file__).resolve().parents[1],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k, port in enumerate(ports)
    ]
    try:
        deadline = time.monotonic() + 600
        while True:  # warm-up: every scaler evaluated once, by its shard's owner
            try:
                if sum(_evaluations(port) for port in ports) >= scalers:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the processes did not evaluate every scaler within 10 minutes")
            time.sleep(1.0)
        time.sleep(10 if shards > 1 else 0)  # shards settle: one per process
        count, cpu = sum(_evaluations(p) for p in ports), sum(_cpu_of(p.pid) for p in procs)
        writes = _status_patches(plane)
        start = time.monotonic()
        time.sleep(seconds)
        done = sum(_evaluations(p) for p in ports) - count
        cpu_ms = (sum(_cpu_of(p.pid) for p in procs) - cpu) * 1000 / done
        writes = (_status_patches(plane) - writes) / done
        return ProcessesRun(done / (time.monotonic() - start), cpu_ms, writes, max(rss_mib(p.pid) for p in procs))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


async def foreign_event_ms(obj: dict, events: int = 3000) -> tuple[float, float]:
    """CPU ms per watch event of a scaler this replica does not evaluate (another shard's): decoding
    the event line alone, and decoding plus the controller's handling (store, its kept copy). Every
    replica handles one such event per evaluation another replica makes."""
    controller = ScalerController(
        None, RecommendationStore(), None, None, None, ScalerMetrics(), owns=lambda key: False
    )  # only the watch side runs: no client, backend or Prometheus is called
    lines = []
    for version in range(1, events + 1):
        obj["metadata"]["resourceVersion"] = str(version)
        lines.append(json.dumps({"type": "MODIFIED", "object": obj}).encode())
    start = time.process_time()
    for line in lines:
        json.loads(line)
    decode = (time.process_time() - start) * 1000 / events
    start = time.process_time()
    for line in lines:
        await controller.on_event("upsert", json.loads(line)["object"])
    return decode, (time.process_time() - start) * 1000 / events


async def baseline_rate(prom_url: str, seconds: float, concurrency: int) -> tuple[float, float]:
    backend = SeasonalNaive(season=timedelta(hours=1), cycles=2)
    pool = PrometheusClientPool()
    specs = [
        parse(PredictiveScalerSpec, predictive_scaler("b", "b", prom_url, f'app_demand{{job="j{i}"}}', "bench")["spec"])
        for i in range(SERIES)
    ]
    source = PrometheusSignalSource(pool)
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(offset: int) -> None:
        nonlocal done
        i = offset
        while time.perf_counter() < deadline:
            await evaluate(specs[i % SERIES], backend, source, 3, PolicyState(), datetime.now(UTC))
            done += 1
            i += concurrency

    start, cpu = time.perf_counter(), cpu_seconds()
    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    rate, cpu_ms = done / (time.perf_counter() - start), (cpu_seconds() - cpu) * 1000 / done
    await pool.aclose()
    return rate, cpu_ms


PATHS = results.Table(("path", "evaluations/s", "CPU ms/eval"))
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("evaluate() alone before the runs, evaluations/s", "its CPU ms/eval"),
    sections=(results.Section("Throughput", (PATHS,)),),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scalers", type=int, default=1000)
    parser.add_argument(
        "--seconds",
        type=float,
        default=90.0,
        help="measured window per run (default 90: each scaler evaluated several times, so that the "
        "held-status cycle, one write per two evaluations, is not counted from its phase)",
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--interval",
        default="1s",
        help="every scaler's spec.interval (default 1s: the controller saturated); 1m: the target's own, "
        "where the figure is whether the controller keeps up",
    )
    parser.add_argument("--shards", type=int, default=0, help="also measure this many sharing processes (0: no)")
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    interval = parse_duration(args.interval).total_seconds()
    if interval >= 60 and args.seconds % interval:
        # Right after the warm-up every scaler's phase lies within it: a window of whole intervals
        # evaluates each scaler that keeps up the same number of times, so the spacing printed from
        # the rate is the one kept (a 70 s window at 1m would count one evaluation per 70 s).
        args.seconds = math.ceil(args.seconds / interval) * interval
        print(f"measured window rounded up to whole intervals: {args.seconds:.0f} s")

    prom = PrometheusServer()
    for j in range(SERIES):
        prom.add_series("app_demand", {"job": f"j{j}"}, samples())
    with KubeControlPlane(ensure_kube_binaries()) as plane, prom:
        install_crds(plane)
        plane.kubectl("create", "namespace", NAMESPACE)
        plane.kubectl("apply", "-f", "-", input=json.dumps(seasonal_backend("bench")))
        started = time.perf_counter()
        plane.kubectl("apply", "-f", "-", input=objects(args.scalers, prom.url, args.interval), timeout=600)
        created = time.perf_counter() - started
        print(f"created {args.scalers} Deployments + PredictiveScalers in {created:.1f}s", flush=True)

        def baseline() -> tuple[float, float]:
            return asyncio.run(baseline_rate(prom.url, min(args.seconds, 15.0), args.concurrency))

        servers = {**plane.pids, **({"prometheus": prom.pid} if prom.pid is not None else {})}
        # The baseline is measured before and after each controller run, and each run is compared
        # with the mean of the two beside it: this machine's speed drifts by tens of percent over
        # minutes, and a baseline taken minutes away would carry that drift into the ratio.
        baselines = [baseline()]
        tail = interval if interval >= 60 and args.seconds > interval else args.seconds / 2
        run = asyncio.run(controller_rate(plane, servers, args.seconds, args.concurrency, args.scalers, tail))
        baselines.append(baseline())
        every = asyncio.run(
            controller_rate(plane, servers, args.seconds, args.concurrency, args.scalers, tail, WRITES_EVERY_EVALUATION)
        )
        baselines.append(baseline())
        rate, cpu_ms, memory = run.rate, run.cpu_ms, run.memory_mib
        written = json.loads(
            plane.kubectl(
                "get", "predictivescaler", "s00000", "-n", NAMESPACE, "-o", "json", "--show-managed-fields"
            ).stdout
        )
        decode_ms, handled_ms = asyncio.run(foreign_event_ms(written))
        # One process and the shards, alternated SHARD_ROUNDS times: one run of each differs from the
        # next by as much as sharding does (a window that happens to hold more status writes, or a
        # saturated process's timeouts), so each is compared as the mean of its runs.
        sharded: dict[int, list[ProcessesRun]] = {}
        for _ in range(SHARD_ROUNDS if args.shards > 1 else 0):
            for n in (1, args.shards):
                sharded.setdefault(n, []).append(processes_rate(plane, args.seconds, args.concurrency, args.scalers, n))

    base, base_cpu = (statistics.fmean(b[i] for b in baselines[:2]) for i in (0, 1))
    every_base_cpu = statistics.fmean(b[1] for b in baselines[1:])
    rows = [
        (f"baseline: evaluate() only, no Kubernetes ({when})", f"{base_rate:.1f}", f"{base_ms:.2f}")
        for when, (base_rate, base_ms) in zip(("before", "between", "after"), baselines, strict=True)
    ]
    rows += [
        ("controller: evaluate + status (watched counts)", f"{rate:.1f}", f"{cpu_ms:.2f}"),
        ("controller, every status written", f"{every.rate:.1f}", f"{every.cpu_ms:.2f}"),
    ]
    lines = [
        f"- created {args.scalers} Deployments + PredictiveScalers in {created:.1f}s",
        f"- ratio controller/baseline (the mean of the baselines before and after it): {rate / base:.2f} (rate), "
        f"{cpu_ms / base_cpu:.2f} (CPU per evaluation; goal <= 2: {'met' if cpu_ms / base_cpu <= 2 else 'NOT met'}); "
        f"every status written: {every.cpu_ms / every_base_cpu:.2f}",
        f"- status writes per evaluation: {run.writes_per_evaluation:.2f} (unchanged statuses held for the next "
        f"evaluation) against {every.writes_per_evaluation:.2f}; {run.rate / every.rate:.2f}x the evaluations/s, "
        f"{run.cpu_ms / every.cpu_ms:.2f}x the controller's CPU per evaluation",
    ]
    bound = StalenessBound().max_age(timedelta(seconds=interval)).total_seconds()
    lines += [
        f"- oldest recommendation served over the window (sampled every 5 s): "
        f"{run.oldest_served.total_seconds():.0f} s, every status written: {every.oldest_served.total_seconds():.0f} s "
        f"(KEDA's staleness bound at a {args.interval} interval: {bound:.0f} s)",
        f"- evaluations in flight on average: {run.in_flight:.1f} of --concurrency {args.concurrency} (every status "
        f"written: {every.in_flight:.1f}); at the concurrency they wait for a slot, below it for CPU or the servers",
        f"- one core of presage alone would sustain ~{1000 / cpu_ms:.0f} evaluations/s at that CPU cost",
    ]
    for what, measured in (("", run), (", every status written", every)):
        shares = ", ".join(f"{name} {ms:.2f}" for name, ms in measured.servers_ms.items())
        total = measured.cpu_ms + sum(measured.servers_ms.values())
        lines.append(
            f"- the servers' CPU per evaluation in the same window{what}, ms: {shares}; with the controller's, "
            f"{total:.2f} ms, i.e. {measured.rate * total / 1000:.2f} of this machine's {os.cpu_count()} cores busy"
        )
    lines += [
        f"- cycle collector: {run.collector_ms:.3f} ms CPU per evaluation ({100 * run.collector_ms / cpu_ms:.1f} % "
        f"of the controller's), collections by generation {list(run.collections)}",
        f"- memory: {memory:.1f} MiB RSS for {args.scalers} scalers ({memory * 1000 / args.scalers:.1f} MiB per 1,000)",
        f"- another shard's status event ({len(json.dumps(written))} bytes): {handled_ms:.3f} ms CPU to decode and "
        f"handle, of which {decode_ms:.3f} ms decoding",
    ]
    for n, runs in sharded.items():
        what = "1 process (presage run)" if n == 1 else f"{n} processes (presage run --shards {n})"
        lines += [
            f"- {what}, run {k}: {measured.rate:.1f} evaluations/s, {measured.cpu_ms:.2f} CPU ms/eval, "
            f"{measured.writes_per_evaluation:.2f} status writes per evaluation, RSS {measured.rss_mib:.0f} MiB "
            "per process"
            for k, measured in enumerate(runs, 1)
        ]
    if sharded:
        (one, one_cpu), (many, many_cpu) = (
            (statistics.fmean(r.rate for r in sharded[n]), statistics.fmean(r.cpu_ms for r in sharded[n]))
            for n in (1, args.shards)
        )
        lines.append(f"- {args.shards} shards / 1: {many / one:.2f}x the evaluations/s on this machine's shared cores")
        # What carries over to replicas on cores of their own: each shard's CPU per evaluation, its
        # share of the other shards' status events included, against one process's.
        capacity = args.shards * one_cpu / many_cpu
        lines.append(
            f"- CPU capacity of {args.shards} shards, each on a core of its own: {capacity:.2f}x one process's "
            f"({args.shards} x {one_cpu:.2f} ms / {many_cpu:.2f} ms per evaluation, means of {SHARD_ROUNDS} runs "
            f"each; goal >= {0.9 * args.shards:.1f}x: {'met' if capacity >= 0.9 * args.shards else 'NOT met'})"
        )
    if interval >= 60:
        # The rate over the window is what was due in it: right after a fresh install's first round
        # (every status written, slower than an interval at 10,000) fewer fall due per second than
        # in the steady state. How late the evaluations started says whether the controller keeps up.
        spacing = interval + run.start_delay
        keeping = "keeping up" if spacing <= 1.05 * interval else "behind"
        lines.append(
            f"- at a {args.interval} interval, over the window's last {tail:.0f} s: {run.tail_rate:.1f} "
            f"evaluations/s (every status written: {every.tail_rate:.1f}/s), started {run.start_delay:.2f}s after "
            f"they were due on average (every status written: {every.start_delay:.2f}s), so each scaler was "
            f"evaluated every {spacing:.1f}s (the interval counts from the start of the previous evaluation): "
            f"{keeping} with {args.scalers} scalers"
        )
    target = 10_000 / 60
    if interval == 60:
        met = args.scalers >= 10_000 and spacing <= 1.05 * interval
        lines.append(
            f"- target: 10,000 scalers at 1m on one process: {'met' if met else 'NOT met'} ({args.scalers} scalers, "
            f"{'keeping up' if spacing <= 1.05 * interval else 'behind'})"
        )
    else:
        lines.append(
            f"- target ~{target:.0f} evaluations/s (10,000 scalers at 1m): {'met' if rate >= target else 'NOT met'}; "
            f"one process covers {rate * 60:.0f} scalers at a 1m interval"
        )
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (f"{baselines[0][0]:.1f}", f"{baselines[0][1]:.2f}"),
        {"Throughput": [*PATHS.render(rows), "", *lines]},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

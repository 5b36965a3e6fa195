"""GetMetrics latency and throughput on loopback, against an echo server built the same way.

Both servers use grpc.aio, the same generated stubs and the same server options; the echo server's
GetMetrics returns a prebuilt constant, so the ratio isolates presage's own per-request work
(metadata validation, store lookup, staleness check, response building).

Each server runs in its own process (one core), the load generator in this one. Two phases:

* open loop at a fixed rate (default 1,000 req/s): latency measured from the *scheduled* send time,
  so a client or server that falls behind shows up in the tail instead of being hidden;
* closed loop with N concurrent callers (default 50): maximum throughput.

Usage: .venv/bin/python benchmarks/bench_keda_grpc.py [--rate 1000] [--seconds 5] [--concurrency 50]; writes
``benchmarks/results/bench_keda_grpc.md`` (``--check`` verifies it), with the echo server's figures as
the machine's calibration. Target: open-loop p99 < 2 ms at 1,000 req/s and within 2x of the echo
baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import results

from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.keda import StaticScaledObjectTriggers, metric_name
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef

NS, SCALER, SO = "bench", "web", "web-so"
SERVER_OPTIONS = [("grpc.so_reuseport", 0)]


class EchoServicer(pb_grpc.ExternalScalerServicer):
    """The baseline: same framework, same messages, no work."""

    def __init__(self) -> None:
        self.response = pb.GetMetricsResponse(
            metricValues=[pb.MetricValue(metricName=metric_name(SCALER), metricValue=7, metricValueFloat=7.0)]
        )

    async def GetMetrics(self, request, context):
        return self.response


async def _run_server(kind: str, mode: str, conn: Connection) -> None:
    if kind == "echo":
        server = grpc.aio.server(options=SERVER_OPTIONS)
        pb_grpc.add_ExternalScalerServicer_to_server(EchoServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
    else:
        from presage_scaler.serving.grpc_server import serve

        store = RecommendationStore()
        await store.put(
            StoredRecommendation(
                namespace=NS,
                name=SCALER,
                mode=mode,  # type: ignore[arg-type]
                target=TargetRef("apps/v1", "Deployment", SCALER),
                recommended_replicas=7,
                current_replicas=7,
                generated_at=datetime.now(UTC),
                interval=timedelta(hours=1),  # stays fresh for the whole run
                min_replicas=1,
                max_replicas=100,
            )
        )
        running = await serve(store, StaticScaledObjectTriggers({(NS, SO): 1}), host="127.0.0.1", port=0)
        server, port = running.server, running.port
    conn.send(port)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, conn.recv)  # any message: stop
    await server.stop(0)


def _pin(cpu: int) -> None:
    """Server on one core, load generator on another, so they do not steal each other's time slices."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


def _server_main(kind: str, mode: str, conn: Connection) -> None:
    _pin(0)
    asyncio.run(_run_server(kind, mode, conn))


@dataclass
class Result:
    label: str
    rate: float
    sent: int
    errors: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    throughput: float  # closed loop, req/s
    closed_p50_ms: float
    closed_p99_ms: float


def _pct(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _request() -> pb.GetMetricsRequest:
    ref = pb.ScaledObjectRef(
        name=SO, namespace=NS, scalerMetadata={"scalerAddress": "x:9090", "predictiveScaler": SCALER}
    )
    return pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric_name(SCALER))


async def _load(port: int, label: str, rate: float, seconds: float, concurrency: int, channels: int) -> Result:
    chans = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(channels)]
    stubs = [pb_grpc.ExternalScalerStub(c) for c in chans]
    request = _request()
    errors = 0

    async def one(stub: pb_grpc.ExternalScalerStub, scheduled: float, out: list[float]) -> None:
        nonlocal errors
        try:
            resp = await stub.GetMetrics(request, timeout=5)
            if resp.metricValues[0].metricValue != 7:
                errors += 1
        except grpc.aio.AioRpcError:
            errors += 1
        out.append(time.perf_counter() - scheduled)

    # warm-up
    await asyncio.gather(*(one(stubs[i % channels], time.perf_counter(), []) for i in range(500)))
    errors = 0

    # open loop at a fixed rate
    open_lat: list[float] = []
    tasks: list[asyncio.Task[None]] = []
    total = int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(stubs[i % channels], scheduled, open_lat)))
    await asyncio.gather(*tasks)

    # closed loop: `concurrency` callers back to back
    closed_lat: list[float] = []
    deadline = time.perf_counter() + seconds

    async def caller(k: int) -> None:
        while time.perf_counter() < deadline:
            await one(stubs[k % channels], time.perf_counter(), closed_lat)

    t0 = time.perf_counter()
    await asyncio.gather(*(caller(k) for k in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await asyncio.gather(*(c.close() for c in chans))
    return Result(
        label=label,
        rate=rate,
        sent=total,
        errors=errors,
        p50_ms=_pct(open_lat, 0.50),
        p99_ms=_pct(open_lat, 0.99),
        max_ms=max(open_lat) * 1000,
        throughput=len(closed_lat) / elapsed,
        closed_p50_ms=_pct(closed_lat, 0.50),
        closed_p99_ms=_pct(closed_lat, 0.99),
    )


def _bench(kind: str, mode: str, args: argparse.Namespace) -> Result:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_server_main, args=(kind, mode, child), daemon=True)
    proc.start()
    try:
        port = parent.recv()
        label = "echo" if kind == "echo" else f"presage ({mode})"
        return asyncio.run(_load(port, label, args.rate, args.seconds, args.concurrency, args.channels))
    finally:
        parent.send("stop")
        proc.join(10)


def _median(results: list[Result]) -> Result:
    def med(attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in results)

    first = results[0]
    return Result(
        label=first.label,
        rate=first.rate,
        sent=sum(r.sent for r in results),
        errors=sum(r.errors for r in results),
        p50_ms=med("p50_ms"),
        p99_ms=med("p99_ms"),
        max_ms=max(r.max_ms for r in results),
        throughput=med("throughput"),
        closed_p50_ms=med("closed_p50_ms"),
        closed_p99_ms=med("closed_p99_ms"),
    )


SERVERS = results.Table(
    (
        "server",
        "errors",
        "p50 ms",
        "p99 ms",
        "max ms",
        "max req/s",
        "closed-loop p50 ms",
        "closed-loop p99 ms",
    )
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("grpcio", "echo open-loop p99 ms", "echo max req/s"),
    sections=(results.Section("Servers", (SERVERS,)), results.Section("Against the echo server")),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="open-loop requests per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each phase")
    parser.add_argument("--concurrency", type=int, default=50, help="closed-loop concurrent callers")
    parser.add_argument("--channels", type=int, default=4, help="client channels (connections)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--shadow", action="store_true", help="also measure Shadow mode (one trigger lookup)")
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)

    runs = [("echo", "Enforce"), ("presage", "Enforce")]
    if args.shadow:
        runs.append(("presage", "Shadow"))
    _pin(1)
    rounds = [[_bench(kind, mode, args) for kind, mode in runs] for _ in range(args.rounds)]
    measured = [_median([r[i] for r in rounds]) for i in range(len(runs))]

    echo = measured[0]
    ok = True
    against = []
    for r in measured[1:]:
        p99_ratio = r.p99_ms / echo.p99_ms
        tput_ratio = echo.throughput / r.throughput
        against.append(
            f"- {r.label}: open-loop p99 ratio vs echo {p99_ratio:.2f}x, "
            f"p50 ratio {r.p50_ms / echo.p50_ms:.2f}x, throughput ratio (echo/presage) {tput_ratio:.2f}x"
        )
        ok &= r.errors == 0 and r.p99_ms < 2.0 and p99_ratio <= 2.0
    against.append(
        "- target (p99 < 2 ms at the open-loop rate, within 2x of echo, no errors): " + ("MET" if ok else "NOT MET")
    )
    table = SERVERS.render(
        (
            r.label,
            r.errors,
            f"{r.p50_ms:.3f}",
            f"{r.p99_ms:.3f}",
            f"{r.max_ms:.2f}",
            f"{r.throughput:.0f}",
            f"{r.closed_p50_ms:.3f}",
            f"{r.closed_p99_ms:.3f}",
        )
        for r in measured
    )
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (grpc.__version__, f"{echo.p99_ms:.3f}", f"{echo.throughput:.0f}"),
        {
            "Servers": [
                f"Median of {args.rounds} interleaved rounds; open loop {args.rate:.0f} req/s x {args.seconds:.0f}s; "
                f"closed loop {args.concurrency} callers on {args.channels} channels.",
                "",
                *table,
            ],
            "Against the echo server": against,
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

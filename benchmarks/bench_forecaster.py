"""Throughput and latency of presage-forecaster on CPU: batched against unbatched, by batch and context size.

    .venv/bin/python benchmarks/bench_forecaster.py [--contexts 512,1024,4096] [--batch-sizes 1,8,32]
        [--rounds 1] [--dtype float32|bfloat16] [--no-flip-invariance] [--checkpoint DIR]

The published weights are not downloaded: the full-size TimesFM 2.5 architecture (231M parameters,
925 MB float32) is built with random weights once and cached under ``$PRESAGE_CACHE/forecaster-bench``;
speed and memory do not depend on the weights' values. For each context length two real servers
run over HTTP, one after the other: the baseline with ``--max-batch-size 1`` (every series its own
forward pass) and the batched one (``--max-batch-size 32``, 10 ms window). Each round sends B
concurrent requests of one series each (B scalers evaluating at once); series/s is B over the round's
wall time, latency is per request. Target on CPU: at least 5 series/s per core at context 1024,
batched. Writes ``benchmarks/results/bench_forecaster.md`` (``--check`` verifies it), with the load
average at the start and the end as the machine's state.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import results

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.cache import cache_dir
from tests.harness.forecaster import ForecasterServer, build_checkpoint, ensure_forecaster_venv

HORIZON = 64
TARGET_PER_CORE = 5.0


def checkpoint(python: Path) -> Path:
    """The cached full-size random-weight checkpoint, built on first use."""
    target = cache_dir("forecaster-bench") / "timesfm-2.5-200m-random-seed0"
    if not (target / "model.safetensors").exists():
        print(f"building the full-size random checkpoint in {target} (925 MB) ...", flush=True)
        build_checkpoint(python, target, full_size=True)
    return target


def rss_mb(server: ForecasterServer) -> float:
    """The server's peak resident memory (VmHWM)."""
    if server.pid is None:
        return float("nan")
    for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_round(client: httpx.AsyncClient, url: str, series: list[list[float]]) -> tuple[float, list[float]]:
    async def call(values: list[float]) -> float:
        began = time.perf_counter()
        response = await client.post(
            f"{url}/v1/forecast", json={"horizon": HORIZON, "quantiles": [0.5, 0.9], "series": [{"values": values}]}
        )
        response.raise_for_status()
        return time.perf_counter() - began

    began = time.perf_counter()
    latencies = await asyncio.gather(*(call(v) for v in series))
    return time.perf_counter() - began, list(latencies)


async def measure(url: str, context: int, batch_sizes: list[int], rounds: int) -> dict[int, tuple[float, float]]:
    rng = np.random.default_rng(context)
    out = {}
    async with httpx.AsyncClient(timeout=1800) as client:
        await one_round(client, url, [list(100 + rng.normal(0, 5, context))])  # warm-up
        for b in batch_sizes:
            walls, latencies = [], []
            for _ in range(rounds):
                series = [
                    list(100 + 20 * np.sin(np.arange(context) / 24) + rng.normal(0, 5, context)) for _ in range(b)
                ]
                wall, lat = await one_round(client, url, series)
                walls.append(wall)
                latencies += lat
            out[b] = (b * rounds / sum(walls), statistics.median(latencies))
    return out


MODES = results.Table(
    (
        "context",
        "B",
        "unbatched series/s",
        "unbatched p50 latency",
        "batched series/s",
        "batched p50 latency",
        "speed-up",
        "batched series/s per core",
    )
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("load average at start", "load average at end"),
    sections=(results.Section("Throughput", (MODES,)),),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="512,1024,4096")
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--no-flip-invariance", action="store_true")
    parser.add_argument("--checkpoint", type=Path)
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    contexts = [int(c) for c in args.contexts.split(",")]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    cores = len(os.sched_getaffinity(0))

    python = ensure_forecaster_venv()
    weights = args.checkpoint or checkpoint(python)
    common = ["--max-horizon", str(HORIZON), "--dtype", args.dtype]
    if args.no_flip_invariance:
        common.append("--no-flip-invariance")
    load_at_start = os.getloadavg()[0]
    setup = (
        f"presage-forecaster on {cores} CPU cores, {args.dtype}, flip invariance "
        f"{'off' if args.no_flip_invariance else 'on'}, horizon {HORIZON}, {args.rounds} round(s)"
    )
    print(setup, flush=True)
    measured: dict[tuple[int, str], dict[int, tuple[float, float]]] = {}
    memory: dict[tuple[int, str], float] = {}
    began = time.monotonic()
    for context in contexts:
        for mode, flags in (("unbatched", ["--max-batch-size", "1"]), ("batched", ["--max-batch-size", "32"])):
            server = ForecasterServer(
                python, weights, "--max-context", str(context), "--batch-window-ms", "10", *flags, *common
            )
            server.start(timeout=600)
            try:
                measured[context, mode] = asyncio.run(measure(server.url, context, batch_sizes, args.rounds))
                memory[context, mode] = rss_mb(server)
            finally:
                server.stop()
            for b, (rate, latency) in measured[context, mode].items():
                print(
                    f"  context {context} {mode:9} B={b:<3} {rate:6.2f} series/s  p50 latency {latency:6.2f}s",
                    flush=True,
                )

    rows = []
    for context in contexts:
        for b in batch_sizes:
            u_rate, u_lat = measured[context, "unbatched"][b]
            b_rate, b_lat = measured[context, "batched"][b]
            rows.append(
                (
                    context,
                    b,
                    f"{u_rate:.2f}",
                    f"{u_lat:.2f}s",
                    f"{b_rate:.2f}",
                    f"{b_lat:.2f}s",
                    f"{b_rate / u_rate:.2f}x",
                    f"{b_rate / cores:.2f}",
                )
            )
    lines = [f"{setup}.", "", *MODES.render(rows), ""]
    lines.append(f"- peak server RSS {max(memory.values()):.0f} MB; {time.monotonic() - began:.0f}s")
    if 1024 in contexts:
        best = max(measured[1024, "batched"].values())[0] / cores
        verdict = "met" if best >= TARGET_PER_CORE else "NOT met"
        lines.append(
            f"- target >= {TARGET_PER_CORE} series/s per core at context 1024 batched: {best:.2f} -> {verdict}"
        )
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (f"{load_at_start:.1f}", f"{os.getloadavg()[0]:.1f}"),
        {"Throughput": lines},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

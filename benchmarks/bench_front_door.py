"""How long the README's first command takes on a fresh checkout: installing presage, then the backtest.

The README promises a one-command look at whether presage would have helped; this measures that
promise as a new user meets it. The committed tree (``git archive HEAD``) is unpacked into a fresh
directory, and the README's first ``sh`` block runs there unchanged, split at its last ``&&`` into the
install (a new virtual environment and ``pip install``, with pip's cache off so every package is
downloaded as on a new machine) and the backtest itself. The backtest's CPU time is the figure
machines agree on best; the install's wall time depends mostly on the network.

Usage: .venv/bin/python benchmarks/bench_front_door.py [--runs 1]; writes
``benchmarks/results/bench_front_door.md`` (``--check`` verifies it).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import results

REPOSITORY = Path(__file__).resolve().parents[1]


def first_command() -> str:
    """The README's first ``sh`` block (one line)."""
    lines = (REPOSITORY / "README.md").read_text().splitlines()
    start = lines.index("```sh") + 1
    block = lines[start : lines.index("```", start)]
    if len(block) != 1:
        raise ValueError(f"the README's first sh block has {len(block)} lines; this benchmark expects one")
    return block[0]


@dataclass(frozen=True)
class Run:
    install_wall: float
    backtest_wall: float
    backtest_cpu: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``command`` run by sh in ``cwd``; raises when it fails."""
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{command!r} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - wall, _children_cpu() - cpu


def run_once(command: str) -> Run:
    install, _, backtest = command.rpartition(" && ")
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    with tempfile.TemporaryDirectory(prefix="presage-front-door-") as scratch:
        checkout = Path(scratch)
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPOSITORY, capture_output=True, check=True)
        subprocess.run(["tar", "-x"], cwd=checkout, input=archive.stdout, check=True)
        install_wall, _ = _timed(install, checkout, env)
        backtest_wall, backtest_cpu = _timed(backtest, checkout, env)
    return Run(install_wall, backtest_wall, backtest_cpu)


RUNS = results.Table(("run", "install (venv + pip), s wall", "backtest, s wall", "backtest, CPU s", "total, s wall"))
LAYOUT = results.Layout(script=Path(__file__), machine=(), sections=(results.Section("Runs", (RUNS,)),))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="how many fresh checkouts to time (default: 1)")
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    command = first_command()
    runs = [run_once(command) for _ in range(args.runs)]
    rows = [
        (
            k,
            f"{r.install_wall:.0f}",
            f"{r.backtest_wall:.1f}",
            f"{r.backtest_cpu:.1f}",
            f"{r.install_wall + r.backtest_wall:.0f}",
        )
        for k, r in enumerate(runs, 1)
    ]
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (),
        {
            "Runs": [
                "The README's first command on a fresh `git archive HEAD` checkout, pip's cache off:",
                "",
                f"    {command}",
                "",
                *RUNS.render(rows),
            ]
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

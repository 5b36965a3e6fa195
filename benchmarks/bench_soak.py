"""Chaos soak: presage for a long run with faults injected together, and what it must never do.

Real etcd, kube-apiserver (with an audit log), Prometheus and two ``presage run`` replicas sharing a
Lease, with ``--scalers`` PredictiveScalers, for ``--minutes``, while a schedule kills -9 the leader,
restarts Prometheus, restarts kube-apiserver, SIGSTOPs etcd for 30 s and holds a thousand idle
connections against the leader's webhook port, in turn (``tests/harness/soak.py`` has the details).
It prints and writes to ``results/bench_soak.md``:

* every KEDA ``GetMetrics`` answer, judged: a count no older than the staleness bound, or
  UNAVAILABLE; never a stale count, never a made-up 0;
* status writes by a non-leader (from the API server's audit log);
* shadow buckets lost across restarts;
* evaluations stuck past their deadline (a spec change no status reached);
* the leader's and the standby's resident memory at minute 5 and at the end;
* liveness probe failures (the health port, 1 s timeout, every 2 s);
* the longest any scaler went without a count from any replica after each fault, against the bound.

Options: ``--minutes`` (30), ``--scalers`` (1000), ``--sampled`` scalers KEDA's calls are made for
(100), ``--interval`` of the scalers in seconds (60), ``--busy`` processes spinning on the CPU beside
the run (0), ``--workdir`` to keep the logs (a temporary directory otherwise), ``--check``. The suite
runs a two-minute version (``tests/integration/test_soak.py``).
Exit status 1 when a figure that must be 0 is not.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")  # replicas are started while gRPC channels are open

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results

from tests.harness.soak import Figures, SoakConfig, run

FIGURES = results.Table(("figure", "measured", "required"))
FAULTS = results.Table(
    ("fault", "longest without a count (s)", "scaler", "of it once the fault had ended (s)", "scaler", "bound (s)")
)
MEMORY = results.Table(("role", "RSS early (MiB)", "RSS at the end (MiB)", "change"))
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("load average at start",),
    sections=(
        results.Section("Figures", (FIGURES,)),
        results.Section("After each fault", (FAULTS,)),
        results.Section("Memory", (MEMORY,)),
    ),
)


def _sections(figures: Figures) -> dict[str, list[str]]:
    a, c = figures.answers, figures.config
    health, webhook = figures.probes["health port /healthz"], figures.probes["webhook port /healthz"]
    rows = [
        (
            "GetMetrics answers (counts / UNAVAILABLE / other errors)",
            f"{a.counts} / {a.unavailable} / {sum(a.other_errors.values())}",
            "other errors 0",
        ),
        ("slowest GetMetrics answer (s) / answers over 1 s", f"{a.slowest:.2f} / {a.over_a_second}", "-"),
        ("stale counts answered", len(a.stale), 0),
        ("made-up 0s answered", len(a.zeros), 0),
        ("counts no generation pinned", len(a.made_up), 0),
        ("status writes by a non-leader", f"{len(figures.non_leader)} of {figures.status_writes}", 0),
        ("shadow buckets lost across restarts", f"{figures.buckets_lost} of {figures.buckets_seen}", 0),
        (
            f"evaluations stuck past their deadline (spec changes seen over {c.evaluation_allowance:g}s before "
            "the end that no status reached)",
            f"{len(figures.stuck)} of {figures.generations}",
            0,
        ),
        ("slowest spec change to be evaluated, through the faults (s)", f"{figures.slowest_evaluation:.1f}", "-"),
        ("liveness probe failures (health port)", f"{health[1]} of {health[0]}", 0),
        ("/healthz failures on the attacked webhook port", f"{webhook[1]} of {webhook[0]}", 0),
    ]
    rows += [
        ("idle-connection attacks: connections opened / closed by presage", f"{t.opened} / {t.closed_by_server}", "-")
        for t in figures.attacks
    ]
    faults = [
        (name, f"{seconds:.1f}", scaler or "-", f"{after:.1f}", late or "-", f"{c.bound:g}")
        for (name, (seconds, scaler)), (after, late) in zip(
            figures.without.items(), figures.after.values(), strict=True
        )
    ]
    memory = []
    for role in ("leader", "standby"):
        early, late = figures.memory.get(role, (None, None))
        change = figures.memory_change(role)
        memory.append(
            (
                role,
                f"{early:.0f}" if early else "-",
                f"{late:.0f}" if late else "-",
                f"{change:+.1%}" if change is not None else "-",
            )
        )
    verdict = figures.violations()
    return {
        "Figures": [
            f"{c.scalers} PredictiveScalers every {c.interval}s on two replicas for {c.minutes:g} minutes; "
            f"GetMetrics for {c.sampled} of them on each replica every {c.poll:g}s; staleness bound {c.bound:g}s; "
            f"{c.busy} processes spinning on the CPU beside the run.",
            "",
            *FIGURES.render(rows),
            "",
            "- every figure that must be 0: " + ("0" if not verdict else "NOT 0: " + "; ".join(verdict)),
        ],
        "After each fault": [
            "The longest any sampled scaler went without a count from any replica (KEDA reaches whichever "
            "the Service picks), over the gaps whose first missed answer came after the fault began and "
            "before the next one, and the part of that gap after the fault had ended, which must be within the "
            "bound (the age past which a count must be refused).",
            "",
            *FAULTS.render(faults),
        ],
        "Memory": [
            f"Resident memory of the replica leading and the one standing by, at {c.early_memory / 60:g} minutes "
            "and at the end (the leader evaluates; a killed replica restarts as the standby).",
            "",
            *MEMORY.render(memory),
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--scalers", type=int, default=1000)
    parser.add_argument("--sampled", type=int, default=100)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on the CPU beside the run")
    parser.add_argument("--workdir", type=Path)
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    config = replace(
        SoakConfig(),
        minutes=args.minutes,
        scalers=args.scalers,
        sampled=min(args.sampled, args.scalers),
        interval=args.interval,
        busy=args.busy,
    )
    config = replace(config, rotate=config.bound)  # a count changes about once per bound
    load = os.getloadavg()[0]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="presage-soak-"))
    print(f"soak in {workdir}: {config}", flush=True)
    figures = asyncio.run(run(config, workdir, lambda line: print(line, flush=True)))
    print("\n".join(figures.lines()))
    results.write(LAYOUT, datetime.now(UTC), sys.argv[1:], (f"{load:.1f}",), _sections(figures))
    return 1 if figures.violations() else 0


if __name__ == "__main__":
    sys.exit(main())

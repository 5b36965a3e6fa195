"""``presage advise``: its flags; the run itself is :mod:`presage_scaler.tune.in_cluster_advisor`, imported only
when advise runs. It needs the runtime dependencies alone (no pandas or plotly: the scaler's image runs it)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.memory import parse_size
from presage_scaler.cli.flag_types import parse_flag_duration, typed
from presage_scaler.cli.kube_flags import add_kubeconfig_arguments
from presage_scaler.cli.trace_flags import add_memory_argument, add_split_arguments
from presage_scaler.clients.kube import credentials as kube_config

NAME = "advise"
HELP = "tune every advised PredictiveScaler (Shadow by default) on its own history and write status.advice"
INDEX_VARIABLE = "JOB_COMPLETION_INDEX"
"""Set by Kubernetes in each pod of an indexed Job: that pod's index, the default --shard."""
DEFAULT_CACHE_SIZE = "2Gi"
"""--cache-size by default: about 95 scalers at a 28-day lookback, one-minute interval (docs/operations.md)."""
DEFAULT_DEADLINE = timedelta(minutes=10)
"""One advice's total time by default (``--deadline``): about ten times what one advice at the
default lookback costs (28d at one-minute resolution: four range requests, and the tuning that
benchmarks/results/bench_tune.md times on its 30-day one-minute trace), so a slower node or a finer
resolution fits; and short enough that a scaler whose Prometheus never answers holds a pod for under
a fifth of the chart's hourly run (``advise.activeDeadlineSeconds``)."""
SHARD_DIGITS = 9
"""The most digits of a shard index: far more shards than pods any Job runs, and well inside the
digits ``int`` converts."""

DESCRIPTION = f"""\
Tune each advised PredictiveScaler's policy on its own signal's history exactly as `presage tune
--scaler` does, and write the spec to apply, the saving and the figures behind them into its
status.advice, with an AdviceReady Event. A scaler in Shadow is advised unless it sets
spec.advice.enabled: false, with spec.advice's defaults when it sets none (every 24h, lookback 28d,
serviceLevel 1%); a scaler in Enforce is advised only when it sets spec.advice. A Shadow scaler in the
multi-signal form without spec.advice is skipped (one line saying why; not a failure). The spec is
never changed here; nothing of a scaler that is not advised is read, and one whose ForecastBackend is
not SeasonalNaive fails with the reason before its signal is read.

Each scaler is advised when due: never advised, its spec changed since, its last attempt failed, or
spec.advice.every passed since status.advice.time (a time that is unparsable, out of range or later
than now makes it due, and its advice writes a true one). Pods of an indexed Job split the scalers
between them: pod --shard of --shards takes the scalers whose namespace/name hashes to it (--shard
defaults to ${INDEX_VARIABLE}, which Kubernetes sets in each pod; a value that is not a whole number
in ASCII digits is refused, exit 2, rather than taken as 0, which would advise one shard many times
and miss the others).

Nothing about one scaler stops the others: each due scaler is attempted, scalers whose last attempt
failed after the rest, and one that cannot be advised gets the reason in status.advice.error and an
AdviceFailed Event. Each advice has --deadline to read and tune: every request still going then is
cancelled, and tuning stops at its next progress report (with --jobs above 1, once the forecasts in
worker processes end). A scaler whose history is still too short to choose on and hold out a part
gets the reason in status.advice.error too, but waits rather than fails: it is tried again at every
run. The last line on stdout always counts what was done:
"shard I of N: A advised, F failed, D not due, W waiting for history, S skipped".

Exit status: 0 when every due scaler was advised (its status.advice written with a verdict) or waits
for history; 1 when any scaler failed (the reason in its status.advice.error and on stdout, also when
even that could not be written) or the scalers could not all be listed (those listed were still
advised); 2 for a bad flag or ${INDEX_VARIABLE}.
"""


def _shard_index(raw: str) -> int:
    """--shard, or ``JOB_COMPLETION_INDEX`` when --shard is not given (argparse converts a string
    default only when the subcommand is parsed, so a bad value never stops --help or another command)."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= SHARD_DIGITS):
        raise argparse.ArgumentTypeError(
            f"{raw[:40]!r} is not a shard index: a whole number from 0 in ASCII digits (from --shard, or "
            f"${INDEX_VARIABLE} when --shard is not given)"
        )
    return int(raw)


def _deadline(raw: str) -> timedelta:
    deadline = parse_flag_duration(raw)
    if deadline <= timedelta(0):
        raise ValueError(f"the deadline {raw!r} must be more than 0s")
    return deadline


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The advise subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--shard",
        type=_shard_index,
        default=os.environ.get(INDEX_VARIABLE, "0"),
        help=f"this run's share (default: ${INDEX_VARIABLE} or 0)",
    )
    parser.add_argument("--shards", type=int, default=1, help="how many runs share the scalers (default: 1)")
    parser.add_argument("-n", "--namespace", help="only this namespace (default: every namespace)")
    add_split_arguments(parser, "each scaler's lookback")
    parser.add_argument("--jobs", type=int, default=1, help="processes that forecast at once (default: 1)")
    add_memory_argument(parser)
    parser.add_argument(
        "--deadline",
        type=typed(_deadline),
        default=DEFAULT_DEADLINE,
        help="most time one scaler's advice may take, its reads and its tuning, e.g. 5m "
        f"(default: {format_duration(DEFAULT_DEADLINE)})",
    )
    parser.add_argument(
        "--prometheus", metavar="URL", help="replace every scaler's query address (for a run outside the cluster)"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="keep each scaler's forecasts here for its next advice, which forecasts again only the decisions whose "
        "history changed "
        "(a directory that outlives the run, e.g. a PersistentVolumeClaim; default: none, every advice forecasts "
        "all of its lookback)",
    )
    parser.add_argument(
        "--cache-size",
        type=typed(parse_size),
        metavar="BYTES",
        default=parse_size(DEFAULT_CACHE_SIZE),
        help=f"most bytes the --cache-dir files take; the least recently advised scalers' go first "
        f"(default: {DEFAULT_CACHE_SIZE})",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print this shard's advised scalers and whether each is due, and those skipped; read nothing",
    )
    add_kubeconfig_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Advise as the flags say."""
    if args.shards < 1 or not 0 <= args.shard < args.shards:
        print(
            f"presage advise: --shard {args.shard} must be at least 0 and below --shards {args.shards}", file=sys.stderr
        )
        return 2
    try:
        config = kube_config.load(args.kubeconfig, args.context)
    except kube_config.KubeConfigError as err:
        print(f"presage advise: {err}", file=sys.stderr)
        return 2
    # Imported only now: the tuning's modules are most of presage, and no other command needs them.
    from presage_scaler.tune.forecast_cache import ForecastCache
    from presage_scaler.tune.in_cluster_advisor import AdviseOptions, advise_cluster

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    options = AdviseOptions(
        shard=args.shard,
        shards=args.shards,
        namespace=args.namespace,
        warmup=args.warmup,
        holdout=args.holdout,
        jobs=max(1, args.jobs),
        prometheus=args.prometheus,
        deadline=args.deadline,
        memory_budget=args.memory_budget,
        cache=None if args.cache_dir is None else ForecastCache(args.cache_dir, args.cache_size),
    )
    return asyncio.run(advise_cluster(config, options, listing_only=args.list, clock=lambda: datetime.now(UTC)))

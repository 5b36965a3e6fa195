"""``presage advise``: its flags; the run itself is :mod:`presage_scaler.tune.advisor`, imported once
:func:`presage_scaler.backtest.extra.require` has passed."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from datetime import UTC, datetime

from presage_scaler.backtest import extra
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.clients.kube import config as kube_config
from presage_scaler.tune.command import add_split_arguments

ADVISE_IMAGE = "Dockerfile.scaler built with --build-arg EXTRAS='[backtest]'"
INDEX_VARIABLE = "JOB_COMPLETION_INDEX"
"""Set by Kubernetes in each pod of an indexed Job: that pod's index, the default --shard."""

DESCRIPTION = f"""\
Advise every PredictiveScaler that asks for it (spec.advice): tune its policy on its own signal's
history exactly as `presage tune --scaler` does, and write the spec to apply, the saving and the
figures behind them into its status.advice, with an AdviceReady Event. The spec is never changed;
a scaler without spec.advice is never read.

Each scaler is advised when due: never advised, its spec changed since, its last attempt failed, or
spec.advice.every passed. Pods of an indexed Job split the scalers between them: pod --shard of
--shards takes the scalers whose namespace/name hashes to it (--shard defaults to
${INDEX_VARIABLE}, which Kubernetes sets in each pod).

Exit status: 0 when every due scaler got its status.advice written (a scaler that could not be
advised gets the reason in status.advice.error and an AdviceFailed Event); 1 when a status could not
be written or the scalers could not be listed; 2 for a bad flag.
"""


def _shard_default() -> int:
    raw = os.environ.get(INDEX_VARIABLE, "0")
    return int(raw) if raw.isdigit() else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The advise subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--shard", type=int, default=_shard_default(), help=f"this run's share (default: ${INDEX_VARIABLE} or 0)"
    )
    parser.add_argument("--shards", type=int, default=1, help="how many runs share the scalers (default: 1)")
    parser.add_argument("-n", "--namespace", help="only this namespace (default: every namespace)")
    add_split_arguments(parser, "each scaler's lookback")
    parser.add_argument("--jobs", type=int, default=1, help="processes that forecast at once (default: 1)")
    parser.add_argument(
        "--prometheus", metavar="URL", help="replace every scaler's query address (for a run outside the cluster)"
    )
    parser.add_argument(
        "--list", action="store_true", help="print this shard's opted-in scalers and whether each is due; read nothing"
    )
    kube_config.add_kubeconfig_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Advise as the flags say."""
    if args.shards < 1 or not 0 <= args.shard < args.shards:
        print(
            f"presage advise: --shard {args.shard} must be at least 0 and below --shards {args.shards}", file=sys.stderr
        )
        return 2
    try:
        extra.require()
    except BacktestError as err:
        print(f"presage advise: {err}; the advise image is {ADVISE_IMAGE}", file=sys.stderr)
        return 2
    try:
        config = kube_config.load(args.kubeconfig, args.context)
    except kube_config.KubeConfigError as err:
        print(f"presage advise: {err}", file=sys.stderr)
        return 2
    # Imported only now: tuning reads traces with pandas, from the backtest extra.
    from presage_scaler.tune.advisor import AdviseOptions, advise_cluster

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    options = AdviseOptions(
        shard=args.shard,
        shards=args.shards,
        namespace=args.namespace,
        warmup=args.warmup,
        holdout=args.holdout,
        jobs=max(1, args.jobs),
        prometheus=args.prometheus,
    )
    return asyncio.run(advise_cluster(config, options, listing_only=args.list, clock=lambda: datetime.now(UTC)))

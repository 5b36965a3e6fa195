"""``presage tune``: its flags, read into a :class:`~presage_scaler.tune.request.TuneRequest` that
:mod:`presage_scaler.tune.invocation` runs once the backtest extra is checked."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from presage_scaler.backtest.config import Overrides
from presage_scaler.cli.flag_types import DURATION, typed
from presage_scaler.cli.kube_flags import add_kubeconfig_arguments
from presage_scaler.cli.trace_flags import (
    add_capacity_arguments,
    add_max_replicas_argument,
    add_memory_argument,
    add_progress_argument,
    add_prometheus_arguments,
    add_split_arguments,
    add_trace_arguments,
    add_trigger_argument,
    backtest_extra_missing,
    trace_request,
)
from presage_scaler.tune.request import HELD_OUT_FAILED, ClusterScaler, TuneRequest
from presage_scaler.tune.search import Slo

NAME = "tune"
HELP = "find the cheapest policy that meets a service level on a demand trace (or a live scaler)"
DEFAULT_LOOKBACK = timedelta(days=28)

DESCRIPTION = f"""\
Find the cheapest PredictiveScaler policy that meets a service level on your own history: the
least replica-hours whose under-provisioned time is at most --slo (and, with --slo-unserved, whose
unserved demand is at most that share). It searches targetQuantile, headroom, the scale-down
uncertainty guard, scaleDownWindow, maxScaleDownRate and SeasonalNaive's season and cycles,
replaying each candidate through the same simulator and decision code as `presage backtest`.

It chooses on the earlier part of the trace and reports the chosen spec on a later part it never
looked at (by default the last 7 days), beside your spec's and a reactive HPA's figures there, and
the seasonal trigger a KEDA user writes by hand with its target utilization tuned on the same days.
Writes spec.yaml (apply it; `presage backtest TRACE --spec spec.yaml` replays it), tune.json (every
candidate) and tune.html to --out; none of them is a file `presage backtest` writes, so one --out
can hold both commands' results.

The starting spec is --spec, or the API's defaults with --per-replica and --lead-time, or with
--scaler NAME a PredictiveScaler read from the cluster together with its signal's history.

Exit status: 0 when the chosen spec held up on the held-out part; {HELD_OUT_FAILED} when, there, it
missed the service level or cost more than the starting spec it was chosen to undercut (the files
are still written, and one line says what to do: a longer history, a looser service level, or the
starting spec); 2 when nothing was tuned (a bad flag, trace or spec).
"""


def parse_percent(text: str) -> float:
    """A share of time or demand in percent, strictly between 0 and 100: ``1%``, ``0.5``."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 100.0:
        raise ValueError(f"{text!r} is not a percentage between 0 and 100 (exclusive), such as 1%")
    return value


def percent_flag(flag: str) -> Callable[[str], object]:
    """The argparse type of a percentage flag (:func:`parse_percent`). A bare number below 1 is read as
    a percentage, as documented, but with a warning on stderr: ``--slo 0.01`` is far more often the
    fraction 0.01 (1 %) written the way many SLO tools take it than a deliberate 0.01 %."""

    def convert(text: str) -> float:
        value = parse_percent(text)
        if value < 1 and not text.strip().endswith("%"):
            print(
                f"presage tune: warning: {flag} {text} means {value:g} % (a number without % is a percentage); "
                f"for {100 * value:g} % write {flag} {100 * value:g}%, and write {flag} {value:g}% to keep "
                f"{value:g} % without this warning",
                file=sys.stderr,
            )
        return value

    return typed(convert)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The tune subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_trace_arguments(parser)
    parser.add_argument(
        "--slo",
        type=percent_flag("--slo"),
        required=True,
        help="most under-provisioned time allowed, in percent, e.g. 1%%; a bare number is a percentage too "
        "(0.01 is 0.01 %%, not 1 %%: below 1 it is warned about)",
    )
    parser.add_argument(
        "--slo-unserved",
        type=percent_flag("--slo-unserved"),
        help="most unserved demand allowed too, in percent, e.g. 0.1%%",
    )
    add_capacity_arguments(parser)
    parser.add_argument("--interval", type=DURATION, help="time between decisions (default: the spec's, or 1m)")
    add_max_replicas_argument(parser)
    add_split_arguments(parser, "the trace")
    parser.add_argument("--spec", type=Path, help="starting PredictiveScaler YAML (whole object or just its spec)")
    parser.add_argument("--backend-spec", type=Path, help="starting ForecastBackend YAML (default: SeasonalNaive)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes that forecast at once (default: all CPUs)"
    )
    add_progress_argument(parser)
    add_trigger_argument(parser)
    add_memory_argument(parser)
    add_prometheus_arguments(parser)
    live = parser.add_argument_group(
        "tuning a PredictiveScaler in the cluster (its spec, backend and query; --prometheus replaces the "
        "query's address when it is not reachable from here)"
    )
    live.add_argument("--scaler", metavar="NAME", help="the PredictiveScaler to read")
    live.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's)")
    live.add_argument(
        "--lookback",
        type=DURATION,
        default=DEFAULT_LOOKBACK,
        help="how much of its signal's history to read, ending now (default: 28d)",
    )
    add_kubeconfig_arguments(live)


def request_from(args: argparse.Namespace) -> TuneRequest:
    """The tuning run the flags ask for, nothing checked yet."""
    scaler = None
    if args.scaler is not None:
        scaler = ClusterScaler(args.scaler, args.namespace, args.lookback, args.kubeconfig, args.context)
    return TuneRequest(
        out=args.out,
        trace=trace_request(args),
        slo=Slo(args.slo, args.slo_unserved),
        overrides=Overrides(
            per_replica=args.per_replica,
            lead_time=args.lead_time,
            interval=args.interval,
            max_replicas=args.max_replicas,
        ),
        scaler=scaler,
        spec=args.spec,
        backend_spec=args.backend_spec,
        warmup=args.warmup,
        holdout=args.holdout,
        jobs=args.jobs,
        trigger_utilization=args.trigger_utilization,
        memory_budget=args.memory_budget,
        progress=not args.no_progress,
    )


def run(args: argparse.Namespace) -> int:
    """Tune as the flags say; 2 with one line on stderr when it cannot run."""
    if backtest_extra_missing("tune"):
        return 2
    # Imported only now: it reads traces with pandas and draws with plotly, from the backtest extra.
    from presage_scaler.tune import invocation

    return invocation.run(request_from(args))

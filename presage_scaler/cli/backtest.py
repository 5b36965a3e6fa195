"""``presage backtest``: its flags, read into a :class:`~presage_scaler.backtest.request.BacktestRequest`
that :mod:`presage_scaler.backtest.invocation` runs once the backtest extra is checked."""

from __future__ import annotations

import argparse
from pathlib import Path

from presage_scaler.api.quantities import parse_amount, parse_quantile
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides
from presage_scaler.backtest.request import BacktestRequest
from presage_scaler.cli.flag_types import DURATION, typed
from presage_scaler.cli.trace_flags import (
    add_capacity_arguments,
    add_max_replicas_argument,
    add_memory_argument,
    add_progress_argument,
    add_prometheus_arguments,
    add_trace_arguments,
    add_trigger_argument,
    backtest_extra_missing,
    trace_request,
)

NAME = "backtest"
HELP = "replay a demand trace through presage and compare it with reactive scaling and an oracle"
DESCRIPTION = """\
Replay a demand trace through presage's own evaluator, backend and policy on a simulated clock, and
compare it with a reactive HPA, an HPA with its headroom raised until it costs as much as presage,
the seasonal trigger a KEDA user writes by hand (last week's demand, at --trigger-utilization; also
cost-matched), a static count and an oracle that knows the future. Writes summary.json,
decisions.csv and report.html to --out.

Without --spec the scaler is the API's defaults with the flags' capacity and lead time. With --spec
(a PredictiveScaler, or just its spec) the file is validated like the cluster would, and --lead-time
is the pods' real boot delay (default: the spec's lead time). The trace step is the signal's
resolution unless the spec's resolution is a multiple of it (then the trace is averaged to it).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The backtest subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_trace_arguments(parser)
    add_capacity_arguments(parser)
    parser.add_argument(
        "--interval",
        type=DURATION,
        help="time between decisions (default: 1m, or the trace step if coarser; rounded up to whole steps)",
    )
    parser.add_argument(
        "--warmup",
        type=DURATION,
        default=DEFAULT_WARMUP,
        help="leading time not counted in the metrics, e.g. 7d or 36h (default: 7d)",
    )
    parser.add_argument("--spec", type=Path, help="PredictiveScaler YAML (whole object or just its spec)")
    parser.add_argument("--backend-spec", type=Path, help="ForecastBackend YAML (default: SeasonalNaive)")
    parser.add_argument("--target-quantile", type=typed(parse_quantile), help="override policy.targetQuantile")
    parser.add_argument("--headroom", help='override policy.headroom, e.g. "10%%" or 5')
    parser.add_argument(
        "--reactive-headroom", type=typed(parse_amount), help="the reactive HPA's headroom (default: policy.headroom)"
    )
    add_max_replicas_argument(parser)
    parser.add_argument("--season", type=DURATION, help="SeasonalNaive season, e.g. 24h or 7d")
    parser.add_argument("--cycles", type=int, help="SeasonalNaive cycles")
    add_progress_argument(parser)
    add_trigger_argument(parser)
    add_memory_argument(parser)
    add_prometheus_arguments(parser)


def request_from(args: argparse.Namespace) -> BacktestRequest:
    """The backtest the flags ask for, nothing checked yet."""
    return BacktestRequest(
        out=args.out,
        trace=trace_request(args),
        overrides=Overrides(
            per_replica=args.per_replica,
            lead_time=args.lead_time,
            interval=args.interval,
            target_quantile=args.target_quantile,
            headroom=args.headroom,
            max_replicas=args.max_replicas,
        ),
        spec=args.spec,
        backend_spec=args.backend_spec,
        season=args.season,
        cycles=args.cycles,
        warmup=args.warmup,
        reactive_headroom=args.reactive_headroom,
        trigger_utilization=args.trigger_utilization,
        memory_budget=args.memory_budget,
        progress=not args.no_progress,
    )


def run(args: argparse.Namespace) -> int:
    """Run the backtest the flags describe; 2 with one line on stderr when it cannot run."""
    if backtest_extra_missing("backtest"):
        return 2
    # Imported only now: it reads traces with pandas and draws with plotly, from the backtest extra.
    from presage_scaler.backtest import invocation

    return invocation.run(request_from(args))

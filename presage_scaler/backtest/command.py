"""``presage backtest``: its flags, and the run from flags to the files in ``--out``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from presage_scaler.api.parse import SpecError
from presage_scaler.api.quantities import parse_amount, parse_duration, parse_quantile
from presage_scaler.api.types import FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.backends.base import BackendError
from presage_scaler.backtest.config import (
    Overrides,
    backend_spec,
    load_object,
    make_backend,
    parse_per_replica,
    parse_span,
    scaler_spec,
)
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.output import table, write_decisions, write_summary
from presage_scaler.backtest.progress import ProgressBar
from presage_scaler.backtest.report import write_report
from presage_scaler.backtest.runner import DEFAULT_WARMUP, Setup, run_backtest
from presage_scaler.backtest.trace import Trace, load_csv, load_prometheus, parse_timestamp
from presage_scaler.leadtime import HorizonError
from presage_scaler.prometheus import PrometheusError

DESCRIPTION = """\
Replay a demand trace through presage's own evaluator, backend and policy on a simulated clock, and
compare it with a reactive HPA, an HPA with its headroom raised until it costs as much as presage,
and an oracle that knows the future. Writes summary.json, decisions.csv and report.html to --out.

Without --spec the scaler is the API's defaults with the flags' capacity and lead time. With --spec
(a PredictiveScaler, or just its spec) the file is validated like the cluster would, and --lead-time
is the pods' real boot delay (default: the spec's lead time). The trace step is the signal's
resolution unless the spec's resolution is a multiple of it (then the trace is averaged to it).
"""


def _typed(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type that reports the parser's own message."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The backtest subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("trace", nargs="?", type=Path, help="CSV with a header timestamp,value (or ts,value)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results (created if missing)")
    parser.add_argument(
        "--per-replica", type=_typed(parse_per_replica), help="units of demand one replica serves (spec.capacity)"
    )
    parser.add_argument(
        "--lead-time", type=_typed(parse_duration), help="how long a new pod takes to become ready, e.g. 5m"
    )
    parser.add_argument(
        "--interval",
        type=_typed(parse_duration),
        help="time between decisions (default: 1m, or the trace step if coarser; rounded up to whole steps)",
    )
    parser.add_argument(
        "--warmup",
        type=_typed(parse_span),
        default=DEFAULT_WARMUP,
        help="leading time not counted in the metrics, e.g. 7d or 36h (default: 7d)",
    )
    parser.add_argument("--spec", type=Path, help="PredictiveScaler YAML (whole object or just its spec)")
    parser.add_argument("--backend-spec", type=Path, help="ForecastBackend YAML (default: SeasonalNaive)")
    parser.add_argument("--target-quantile", type=_typed(parse_quantile), help="override policy.targetQuantile")
    parser.add_argument("--headroom", help='override policy.headroom, e.g. "10%%" or 5')
    parser.add_argument(
        "--reactive-headroom", type=_typed(parse_amount), help="the reactive HPA's headroom (default: policy.headroom)"
    )
    parser.add_argument("--max-replicas", type=int, help="override policy.maxReplicas (default: 10x the oracle's peak)")
    parser.add_argument("--season", type=_typed(parse_span), help="SeasonalNaive season, e.g. 24h or 7d")
    parser.add_argument("--cycles", type=int, help="SeasonalNaive cycles")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (drawn only when stderr is a TTY)")
    source = parser.add_argument_group("reading the trace from Prometheus instead of a file")
    source.add_argument("--prometheus", metavar="URL", help="base URL of a Prometheus-compatible query API")
    source.add_argument("--query", help="PromQL returning exactly one series")
    source.add_argument("--start", type=_typed(parse_timestamp), help="ISO-8601 or Unix seconds")
    source.add_argument("--end", type=_typed(parse_timestamp), help="ISO-8601 or Unix seconds")
    source.add_argument("--step", type=_typed(parse_duration), default=timedelta(minutes=1), help="default: 1m")


def _trace(args: argparse.Namespace) -> Trace:
    if args.prometheus is None:
        if args.trace is None:
            raise BacktestError("give a TRACE file, or --prometheus with --query, --start and --end")
        return load_csv(args.trace)
    if args.trace is not None:
        raise BacktestError("give either a TRACE file or --prometheus, not both")
    if args.query is None or args.start is None or args.end is None:
        raise BacktestError("--prometheus needs --query, --start and --end")
    return asyncio.run(load_prometheus(args.prometheus, args.query, args.start, args.end, args.step))


def _setup(args: argparse.Namespace, trace: Trace) -> Setup:
    spec_data = load_object(args.spec, PREDICTIVE_SCALER.name) if args.spec else None
    overrides = Overrides(
        per_replica=args.per_replica,
        lead_time=args.lead_time,
        interval=args.interval,
        target_quantile=args.target_quantile,
        headroom=args.headroom,
        max_replicas=args.max_replicas,
    )
    backend_data = load_object(args.backend_spec, FORECAST_BACKEND.name) if args.backend_spec else None
    return Setup(
        spec=scaler_spec(trace, spec_data, overrides),
        backend=make_backend(backend_spec(backend_data, args.season, args.cycles)),
        boot_delay=args.lead_time,
        warmup=args.warmup,
        reactive_headroom=args.reactive_headroom,
    )


def run(args: argparse.Namespace) -> int:
    """Run the backtest the flags describe; 2 with a message on stderr when it cannot run."""
    try:
        with ProgressBar(enabled=not args.no_progress and sys.stderr.isatty()) as progress:
            trace = _trace(args)
            result = run_backtest(trace, _setup(args, trace), progress)
        out: Path = args.out
        out.mkdir(parents=True, exist_ok=True)
        write_summary(result, out / "summary.json")
        write_decisions(result, out / "decisions.csv")
        write_report(result, out / "report.html")
    except (BacktestError, SpecError, HorizonError, BackendError, PrometheusError, OSError) as err:
        print(f"presage backtest: {err}", file=sys.stderr)
        return 2
    print(table(result))
    gaps = int(trace.gaps.sum())
    if gaps:
        print(
            f"\nnote: {gaps} of {len(trace)} steps ({gaps / len(trace):.1%}) of the trace had no numeric value; "
            "they were filled in (interpolated between values, the last value repeated at the end)"
        )
    print(f"\nwrote {out / 'summary.json'}, {out / 'decisions.csv'} and {out / 'report.html'}")
    return 0

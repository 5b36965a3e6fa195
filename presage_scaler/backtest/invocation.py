"""``presage backtest`` from its parsed flags to the terminal table and the files in ``--out``.

Needs the ``backtest`` extra: :mod:`presage_scaler.backtest.command` imports this module only once
:func:`presage_scaler.backtest.extra.require` has passed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from presage_scaler.api.kinds import FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.api.parse import SpecError
from presage_scaler.backends.base import BackendError
from presage_scaler.backtest.command import check_out, writing_into
from presage_scaler.backtest.config import (
    Overrides,
    backend_beside,
    backend_name,
    backend_spec,
    load_document,
    load_object,
    make_backend,
    scaler_spec,
)
from presage_scaler.backtest.connection_flags import connection_flags, connection_from_flags
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.memory import Footprint, points_between
from presage_scaler.backtest.output import table, write_decisions, write_summary
from presage_scaler.backtest.progress import ProgressBar
from presage_scaler.backtest.report import write_report
from presage_scaler.backtest.runner import Setup, run_backtest
from presage_scaler.backtest.trace import Trace, load_csv, load_prometheus, parse_timestamp
from presage_scaler.clients.prometheus import PrometheusError
from presage_scaler.engine.leadtime import HorizonError


def _trace(args: argparse.Namespace) -> Trace:
    if args.prometheus is None:
        if args.trace is None:
            raise BacktestError("give a TRACE file, or --prometheus with --query, --start and --end")
        if given := connection_flags(args):
            raise BacktestError(f"{', '.join(given)} apply to --prometheus, not to a TRACE file")
        return load_csv(args.trace, args.resample)
    if args.trace is not None:
        raise BacktestError("give either a TRACE file or --prometheus, not both")
    if args.resample is not None:
        raise BacktestError("--resample places a TRACE file on a grid; Prometheus answers on the --step grid")
    if args.query is None or args.start is None or args.end is None:
        raise BacktestError("--prometheus needs --query, --start and --end")
    start, end = parse_timestamp(args.start, "--start"), parse_timestamp(args.end, "--end")
    Footprint(points_between(end - start, args.step), args.step).check(args.memory_budget)
    connection = connection_from_flags(args)
    return asyncio.run(load_prometheus(args.prometheus, args.query, start, end, args.step, connection=connection))


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
    name = "default"
    if args.backend_spec:
        document = load_document(args.backend_spec, FORECAST_BACKEND.name)
        backend_data, name = document["spec"], backend_name(document)
    else:  # the backend the spec names, when its file holds it (presage tune writes both)
        backend_data = backend_beside(args.spec, spec_data) if args.spec and spec_data else None
    return Setup(
        spec=scaler_spec(trace, spec_data, overrides),
        backend=make_backend(backend_spec(backend_data, args.season, args.cycles), name),
        boot_delay=args.lead_time,
        warmup=args.warmup,
        reactive_headroom=args.reactive_headroom,
        trigger_utilization=args.trigger_utilization,
    )


def run_from_flags(args: argparse.Namespace) -> int:
    """Run the backtest the flags describe; 2 with one line on stderr when it cannot run."""
    out: Path = args.out
    try:
        check_out(out)
        with ProgressBar(enabled=not args.no_progress and sys.stderr.isatty()) as progress:
            trace = _trace(args)
            Footprint(len(trace), trace.step).check(args.memory_budget)
            result = run_backtest(trace, _setup(args, trace), progress)
        with writing_into(out):
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

"""``presage backtest`` from its request to the terminal table and the files in ``--out``.

Needs the ``backtest`` extra: :mod:`presage_scaler.cli.backtest` imports this module only once
:func:`presage_scaler.backtest.extra.require` has passed.
"""

from __future__ import annotations

import asyncio
import sys

from presage_scaler.api.kinds import FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.api.parse import SpecError
from presage_scaler.backends.base import BackendError
from presage_scaler.backtest.config import (
    backend_beside,
    backend_name,
    backend_spec,
    load_document,
    load_object,
    make_backend,
    scaler_spec,
)
from presage_scaler.backtest.connection import connection_of
from presage_scaler.backtest.csv_trace import load_csv, parse_timestamp
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.memory import Footprint, points_between
from presage_scaler.backtest.out_dir import check_out, writing_into
from presage_scaler.backtest.output import table, write_decisions, write_summary
from presage_scaler.backtest.progress import ProgressBar
from presage_scaler.backtest.report import write_report
from presage_scaler.backtest.request import BacktestRequest, TraceRequest
from presage_scaler.backtest.runner import Setup, run_backtest
from presage_scaler.backtest.trace import Trace, load_prometheus
from presage_scaler.clients.prometheus import PrometheusError
from presage_scaler.engine.leadtime import HorizonError


def load_trace(request: TraceRequest, memory_budget: int) -> Trace:
    """The trace ``request`` names, read from its file or its Prometheus; a range query estimated to
    take more than ``memory_budget`` bytes is refused before it is sent. ``presage tune`` reads its
    trace here too."""
    if request.prometheus is None:
        if request.file is None:
            raise BacktestError("give a TRACE file, or --prometheus with --query, --start and --end")
        if given := request.connection.given():
            raise BacktestError(f"{', '.join(given)} apply to --prometheus, not to a TRACE file")
        return load_csv(request.file, request.resample)
    if request.file is not None:
        raise BacktestError("give either a TRACE file or --prometheus, not both")
    if request.resample is not None:
        raise BacktestError("--resample places a TRACE file on a grid; Prometheus answers on the --step grid")
    if request.query is None or request.start is None or request.end is None:
        raise BacktestError("--prometheus needs --query, --start and --end")
    start, end = parse_timestamp(request.start, "--start"), parse_timestamp(request.end, "--end")
    Footprint(points_between(end - start, request.step), request.step).check(memory_budget)
    connection = connection_of(request.connection)
    return asyncio.run(
        load_prometheus(request.prometheus, request.query, start, end, request.step, connection=connection)
    )


def _setup(request: BacktestRequest, trace: Trace) -> Setup:
    spec_data = load_object(request.spec, PREDICTIVE_SCALER.name) if request.spec else None
    name = "default"
    if request.backend_spec:
        document = load_document(request.backend_spec, FORECAST_BACKEND.name)
        backend_data, name = document["spec"], backend_name(document)
    else:  # the backend the spec names, when its file holds it (presage tune writes both)
        backend_data = backend_beside(request.spec, spec_data) if request.spec and spec_data else None
    return Setup(
        spec=scaler_spec(trace, spec_data, request.overrides),
        backend=make_backend(backend_spec(backend_data, request.season, request.cycles), name),
        boot_delay=request.overrides.lead_time,
        warmup=request.warmup,
        reactive_headroom=request.reactive_headroom,
        trigger_utilization=request.trigger_utilization,
    )


def run(request: BacktestRequest) -> int:
    """Run the backtest ``request`` describes; 2 with one line on stderr when it cannot run."""
    out = request.out
    try:
        check_out(out)
        with ProgressBar(enabled=request.progress and sys.stderr.isatty()) as progress:
            trace = load_trace(request.trace, request.memory_budget)
            Footprint(len(trace), trace.step).check(request.memory_budget)
            result = run_backtest(trace, _setup(request, trace), progress)
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

"""``presage tune`` from its request to the terminal table and the files in ``--out``.

Needs the ``backtest`` extra: :mod:`presage_scaler.cli.tune` imports this module only once
:func:`presage_scaler.backtest.extra.require` has passed.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from presage_scaler.api.kinds import FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.backtest.config import backend_beside, backend_spec, load_document, load_object
from presage_scaler.backtest.invocation import load_trace
from presage_scaler.backtest.out_dir import check_out, writing_into
from presage_scaler.backtest.progress import ProgressBar
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.errors import ERRORS, TuneError
from presage_scaler.tune.from_cluster import read_live
from presage_scaler.tune.held_out import check
from presage_scaler.tune.output import StartingSpec, table, write_document, write_spec
from presage_scaler.tune.read_window import warmup_for
from presage_scaler.tune.report import write_report
from presage_scaler.tune.request import HELD_OUT_FAILED, TuneRequest
from presage_scaler.tune.tuner import TuneResult, TuneSetup, tune


@dataclass(frozen=True)
class Start:
    """Where the search starts: the trace, the scaler (metadata and spec, or None for the API's
    defaults) and the ForecastBackend spec (None for the default SeasonalNaive)."""

    trace: Trace
    metadata: dict[str, Any]
    spec: dict[str, Any] | None
    backend: dict[str, Any] | None
    stored: bool = False
    """Whether ``spec`` was read from the cluster (every default filled in by the API server)."""


def _start(request: TuneRequest) -> Start:
    backend = load_object(request.backend_spec, FORECAST_BACKEND.name) if request.backend_spec else None
    trace = request.trace
    if request.scaler is not None:
        if trace.file is not None or request.spec is not None or trace.query is not None or trace.resample is not None:
            raise TuneError(
                "--scaler reads the spec and the trace from the cluster: give no TRACE, --spec, --query or --resample"
            )
        if given := trace.connection.given():
            raise TuneError(
                f"--scaler reads its query's headers, credentials and TLS from the cluster: give no {', '.join(given)}"
            )
        scaler = request.scaler
        live = asyncio.run(
            read_live(
                scaler.name,
                scaler.namespace,
                scaler.lookback,
                datetime.now(UTC),
                warmup=request.warmup,
                kubeconfig=scaler.kubeconfig,
                context=scaler.context,
                prometheus=trace.prometheus,
                memory_budget=request.memory_budget,
                jobs=max(1, request.jobs),
                backend=backend,
            )
        )
        return Start(live.trace, live.metadata, live.spec, live.backend, stored=True)
    loaded = load_trace(trace, request.memory_budget)
    if request.spec is None:
        return Start(loaded, {}, None, backend)
    document = load_document(request.spec, PREDICTIVE_SCALER.name)
    spec = document["spec"]
    metadata: object = document.get("metadata")  # whatever the file holds: only a mapping is kept
    return Start(
        loaded, metadata if isinstance(metadata, dict) else {}, spec, backend or backend_beside(request.spec, spec)
    )


def _setup(request: TuneRequest, start: Start) -> TuneSetup:
    warmup = request.warmup
    if request.scaler is not None:  # read before its lookback too (tune.read_window)
        warmup = warmup_for(len(start.trace) * start.trace.step, request.scaler.lookback, warmup)
    return TuneSetup(
        spec=start.spec,
        overrides=request.overrides,
        backend=backend_spec(start.backend),
        slo=request.slo,
        boot_delay=request.overrides.lead_time,
        warmup=warmup,
        holdout=request.holdout,
        jobs=max(1, request.jobs),
        memory_budget=request.memory_budget,
        trigger_utilization=request.trigger_utilization,
    )


REPORT = "tune.html"
"""The tune report's file name: not ``presage backtest``'s report.html, so that one --out can hold both
commands' files (tune after a backtest with the same flags overwrites nothing of it)."""


def _write(result: TuneResult, start: Start, out: Path) -> None:
    with writing_into(out):
        starting = StartingSpec(start.spec, start.stored)
        write_spec(result, start.metadata, out / "spec.yaml", starting)
        write_document(result, out / "tune.json")
        write_report(result, out / REPORT, start.metadata, starting)


def run(request: TuneRequest) -> int:
    """Tune as ``request`` says; 2 with one line on stderr when it cannot run, HELD_OUT_FAILED when the chosen
    spec failed the held-out check (:mod:`presage_scaler.tune.held_out`)."""
    out = request.out
    try:
        check_out(out)
        with ProgressBar(enabled=request.progress and sys.stderr.isatty()) as progress:
            start = _start(request)
            result = tune(start.trace, _setup(request, start), progress)
        _write(result, start, out)
    except ERRORS as err:
        print(f"presage tune: {err}", file=sys.stderr)
        return 2
    print(table(result))
    print(f"\nwrote {out / 'spec.yaml'}, {out / 'tune.json'} and {out / REPORT}")
    return HELD_OUT_FAILED if check(result).failed else 0

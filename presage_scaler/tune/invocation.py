"""``presage tune`` from its parsed flags to the terminal table and the files in ``--out``.

Needs the ``backtest`` extra: :mod:`presage_scaler.tune.command` imports this module only once
:func:`presage_scaler.backtest.extra.require` has passed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from presage_scaler.api.kinds import FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.api.parse import SpecError
from presage_scaler.backends.base import BackendError
from presage_scaler.backtest.command import check_out, writing_into
from presage_scaler.backtest.config import (
    Overrides,
    backend_beside,
    backend_spec,
    load_document,
    load_object,
)
from presage_scaler.backtest.connection_flags import connection_flags
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.from_flags import _trace as trace_from_flags
from presage_scaler.backtest.progress import ProgressBar
from presage_scaler.backtest.trace import Trace
from presage_scaler.clients.kube.scaler_lookup import CommandError
from presage_scaler.clients.kube.secrets import SecretError
from presage_scaler.clients.prometheus import PrometheusError
from presage_scaler.engine.evaluator import EvaluationError
from presage_scaler.engine.leadtime import HorizonError
from presage_scaler.tune.command import HELD_OUT_FAILED
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.from_cluster import read_live
from presage_scaler.tune.held_out import check
from presage_scaler.tune.output import StartingSpec, table, write_document, write_spec
from presage_scaler.tune.report import write_report
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import TuneResult, TuneSetup, tune

ERRORS = (
    BacktestError,
    SpecError,
    HorizonError,
    BackendError,
    PrometheusError,
    CommandError,
    SecretError,
    EvaluationError,
    OSError,
)
"""What a run can fail with for a reason the user can act on: reported in one line, exit 2."""


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


def _start(args: argparse.Namespace) -> Start:
    backend = load_object(args.backend_spec, FORECAST_BACKEND.name) if args.backend_spec else None
    if args.scaler is not None:
        if args.trace is not None or args.spec is not None or args.query is not None or args.resample is not None:
            raise TuneError(
                "--scaler reads the spec and the trace from the cluster: give no TRACE, --spec, --query or --resample"
            )
        if given := connection_flags(args):
            raise TuneError(
                f"--scaler reads its query's headers, credentials and TLS from the cluster: give no {', '.join(given)}"
            )
        live = asyncio.run(
            read_live(
                args.scaler,
                args.namespace,
                args.lookback,
                datetime.now(UTC),
                kubeconfig=args.kubeconfig,
                context=args.context,
                prometheus=args.prometheus,
                memory_budget=args.memory_budget,
                jobs=max(1, args.jobs),
            )
        )
        return Start(live.trace, live.metadata, live.spec, backend or live.backend, stored=True)
    trace = trace_from_flags(args)
    if args.spec is None:
        return Start(trace, {}, None, backend)
    document = load_document(args.spec, PREDICTIVE_SCALER.name)
    spec = document["spec"]
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    return Start(trace, metadata, spec, backend or backend_beside(args.spec, spec))


def _setup(args: argparse.Namespace, start: Start) -> TuneSetup:
    overrides = Overrides(
        per_replica=args.per_replica,
        lead_time=args.lead_time,
        interval=args.interval,
        max_replicas=args.max_replicas,
    )
    return TuneSetup(
        spec=start.spec,
        overrides=overrides,
        backend=backend_spec(start.backend),
        slo=Slo(args.slo, args.slo_unserved),
        boot_delay=args.lead_time,
        warmup=args.warmup,
        holdout=args.holdout,
        jobs=max(1, args.jobs),
        memory_budget=args.memory_budget,
        trigger_utilization=args.trigger_utilization,
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


def run_from_flags(args: argparse.Namespace) -> int:
    """Tune as the flags say; 2 with one line on stderr when it cannot run, HELD_OUT_FAILED when the chosen
    spec failed the held-out check (:mod:`presage_scaler.tune.held_out`)."""
    try:
        check_out(args.out)
        with ProgressBar(enabled=not args.no_progress and sys.stderr.isatty()) as progress:
            start = _start(args)
            result = tune(start.trace, _setup(args, start), progress)
        _write(result, start, args.out)
    except ERRORS as err:
        print(f"presage tune: {err}", file=sys.stderr)
        return 2
    print(table(result))
    print(f"\nwrote {args.out / 'spec.yaml'}, {args.out / 'tune.json'} and {args.out / REPORT}")
    return HELD_OUT_FAILED if check(result).failed else 0

"""What ``presage backtest`` is asked to do, as typed values: the command line fills these from its
flags (:mod:`presage_scaler.cli.backtest`) and :mod:`presage_scaler.backtest.invocation` carries them
out. Nothing here is checked yet: a combination that cannot work is refused by the invocation, in the
order a run meets it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.baselines import DEFAULT_TRIGGER_UTILIZATION
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides
from presage_scaler.backtest.connection import ConnectionOptions
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET


@dataclass(frozen=True)
class TraceRequest:
    """Where the demand trace comes from: a CSV ``file`` (put on a ``resample`` grid when given), or a
    range ``query`` to the Prometheus at ``prometheus`` from ``start`` to ``end`` (as written: ISO-8601
    or Unix seconds) every ``step``, over ``connection``."""

    file: Path | None = None
    resample: timedelta | None = None
    prometheus: str | None = None
    query: str | None = None
    start: str | None = None
    end: str | None = None
    step: timedelta = timedelta(minutes=1)
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)


@dataclass(frozen=True)
class BacktestRequest:
    """One backtest: the trace, the scaler (``spec`` or the API's defaults, with ``overrides``), its
    backend (``backend_spec`` or SeasonalNaive, with ``season`` and ``cycles``), the baselines' settings,
    and where the results go."""

    out: Path
    trace: TraceRequest
    overrides: Overrides
    spec: Path | None = None
    backend_spec: Path | None = None
    season: timedelta | None = None
    cycles: int | None = None
    warmup: timedelta = DEFAULT_WARMUP
    reactive_headroom: Amount | None = None
    trigger_utilization: float = DEFAULT_TRIGGER_UTILIZATION
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    progress: bool = True
    """Whether to draw the progress bar (only ever drawn when stderr is a TTY)."""

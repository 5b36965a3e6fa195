"""What ``presage tune`` is asked to do, as typed values, and the exit status it answers when the
choice did not hold up. The command line fills these from its flags (:mod:`presage_scaler.cli.tune`)
and :mod:`presage_scaler.tune.invocation` carries them out. Nothing here is checked yet: a
combination that cannot work is refused by the invocation, in the order a run meets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from presage_scaler.backtest.baselines import DEFAULT_TRIGGER_UTILIZATION
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET
from presage_scaler.backtest.request import TraceRequest
from presage_scaler.tune.search import Slo

HELD_OUT_FAILED = 3
"""The status when the chosen spec failed the held-out check (:mod:`presage_scaler.tune.held_out`);
the files are still written. Distinct from 0 (a choice that held up) and 2 (nothing tuned)."""


@dataclass(frozen=True)
class ClusterScaler:
    """A PredictiveScaler to tune as it runs: read from the cluster with ``lookback`` of its signal's
    history, ending now (``namespace`` None: the kubeconfig context's)."""

    name: str
    namespace: str | None
    lookback: timedelta
    kubeconfig: Path | None = None
    context: str | None = None


@dataclass(frozen=True)
class TuneRequest:
    """One tuning run: the trace (or ``scaler`` read from the cluster, trace and spec together), the
    starting spec (``spec`` or the API's defaults, with ``overrides``) and backend, the service level,
    how the trace is split, and where the results go."""

    out: Path
    trace: TraceRequest
    slo: Slo
    overrides: Overrides
    scaler: ClusterScaler | None = None
    spec: Path | None = None
    backend_spec: Path | None = None
    warmup: timedelta = DEFAULT_WARMUP
    holdout: timedelta | None = None
    jobs: int = 1
    trigger_utilization: float = DEFAULT_TRIGGER_UTILIZATION
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    progress: bool = True
    """Whether to draw the progress bar (only ever drawn when stderr is a TTY)."""

"""The errors of ``presage tune`` and ``presage advise``: their own type, for input they cannot tune on,
and every error a run can fail with for a reason the user can act on (:data:`ERRORS`)."""

from __future__ import annotations

from presage_scaler.api.parse import SpecError
from presage_scaler.backends.base import BackendError
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.clients.kube.scaler_lookup import CommandError
from presage_scaler.clients.kube.secrets import SecretError
from presage_scaler.clients.prometheus import PrometheusError
from presage_scaler.engine.evaluator import EvaluationError
from presage_scaler.engine.leadtime import HorizonError


class TuneError(BacktestError):
    """A tuning run that cannot go ahead as asked; the message says what to change."""


class HistoryTooShort(TuneError):
    """The history is too short to choose on and hold out a part: a signal that has not recorded enough
    yet, which time cures (``presage advise`` counts such a scaler as waiting, not failed)."""


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
"""What a run can fail with for a reason the user can act on: ``presage tune`` reports it in one line
(exit 2), ``presage advise`` writes it to the scaler's ``status.advice.error`` without a traceback."""

"""The one error type of ``presage tune``: input it cannot tune on, with a message for the user."""

from __future__ import annotations

from presage_scaler.backtest.errors import BacktestError


class TuneError(BacktestError):
    """A tuning run that cannot go ahead as asked; the message says what to change."""


class HistoryTooShort(TuneError):
    """The history is too short to choose on and hold out a part: a signal that has not recorded enough
    yet, which time cures (``presage advise`` counts such a scaler as waiting, not failed)."""

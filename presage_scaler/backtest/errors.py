"""The one error type of the backtest: a trace or a setup it cannot run, with a message for the user."""

from __future__ import annotations


class BacktestError(ValueError):
    """A backtest that cannot run as asked; the message says what to change."""

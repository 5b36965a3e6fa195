"""The optional ``backtest`` extra: pandas (reading and resampling traces) and plotly (the report).

The scaler image does not carry them. A command that needs them calls :func:`require` before it
imports any module that uses them, so that without the extra it says how to install it instead of
raising ImportError.
"""

from __future__ import annotations

import importlib

from presage_scaler.backtest.errors import BacktestError

PACKAGES = ("pandas", "plotly")
INSTALL = "pip install 'presage-scaler[backtest]' (in a checkout: pip install -e '.[backtest]')"


def require() -> None:
    """Raise :class:`BacktestError` naming what is missing and how to install it."""
    missing = []
    for name in PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise BacktestError(f"{' and '.join(missing)} {verb} not installed: install the 'backtest' extra, {INSTALL}")

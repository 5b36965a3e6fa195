"""Backtests: replay a demand trace through presage's production decision path on a simulated clock.

``trace`` loads demand, ``config`` builds the scaler and backend (YAML or flags), ``simulator`` models
pods booting and being removed, ``baselines`` holds the oracle and the reactive (HPA) policies,
``replay`` drives :func:`presage_scaler.engine.evaluator.decide`, ``runner`` puts them together, ``metrics``
scores them, ``output`` / ``report`` (with ``plots``) write the results into ``out_dir``. ``request``
is what ``presage backtest`` asks (its flags are read in :mod:`presage_scaler.cli.backtest`),
``connection`` the Prometheus connection it asks for, and ``invocation`` carries a request out.
"""

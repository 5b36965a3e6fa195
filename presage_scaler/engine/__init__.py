"""The decision engine: signals to a forecast, the forecast to a recommendation (evaluator, policy, lead
time, calibration, the shadow ledger). Pure but for the signal source it is handed."""

"""The scaler's Prometheus metric families. Imports no domain code: the controller records into them."""

"""Time-series arithmetic shared by the engine, the backends and the Prometheus client (grids, rolling
windows)."""

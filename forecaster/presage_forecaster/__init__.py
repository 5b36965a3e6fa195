"""presage-forecaster: TimesFM 2.5 behind an HTTP API with micro-batching (see docs/forecaster.md)."""

__version__ = "0.1.0"

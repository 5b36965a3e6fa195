"""Generated stubs for KEDA's external scaler contract; regenerate with ``generate.py``, never edit."""

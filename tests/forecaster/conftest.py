"""presage-forecaster's tests: over real HTTP against the server in its own venv (torch, timesfm).

Its torch-free modules (quantiles, protocol, settings) are also imported directly from
``forecaster/`` for table tests; that import never pulls torch into the scaler's venv.
"""

import sys
from pathlib import Path

FORECASTER_DIR = Path(__file__).resolve().parents[2] / "forecaster"
if str(FORECASTER_DIR) not in sys.path:
    sys.path.insert(0, str(FORECASTER_DIR))

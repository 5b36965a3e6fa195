"""The server's decode path agrees with timesfm's own ``forecast()`` (run in the forecaster's venv)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.harness.forecaster import forecaster_env

pytestmark = pytest.mark.integration

SCRIPT = """
import json, sys
import numpy as np
from presage_forecaster.engine import Engine
from presage_forecaster.loading import load
from presage_forecaster.settings import Settings

settings = Settings(model=sys.argv[1], max_context=256, max_horizon=24, max_batch_size=4)
loaded = load(settings)
rng = np.random.default_rng(0)
series = [100 + 10 * np.sin(np.arange(n) / 7) + rng.normal(0, 1, n) for n in (20, 100, 256, 300)]
ours = Engine(loaded, 24).forecast([s[-256:] for s in series], 24)
# timesfm pads every series to max_context and runs batches of per_core_batch_size; it appends
# padding series to the list it is given, hence the copy.
_, theirs = loaded.model.forecast(24, [s.copy() for s in series])
rel = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
print(json.dumps({"max_rel": float(rel.max()), "shape": list(ours.shape)}))
"""


def test_engine_matches_timesfm_forecast(forecaster_python, tiny_checkpoint):
    result = subprocess.run(
        [str(forecaster_python), "-c", SCRIPT, str(tiny_checkpoint)],
        env=forecaster_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["shape"] == [4, 24, 10]
    assert answer["max_rel"] < 1e-5

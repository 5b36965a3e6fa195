"""The scaler's HTTP server alone in its own process, so what clients cost it shows in its memory.

``python -m tests.harness.scaler_http PORT`` serves :func:`serve_http` on ``127.0.0.1:PORT`` with
REVIEW's Fleet recommended 7 replicas until SIGTERM; :class:`ScalerHttpProcess` starts it and
reads its resident memory from ``/proc`` (Linux).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.http_server import serve_http
from presage_scaler.serving.store import RecommendationStore
from tests.harness.agones import fleet_recommendation
from tests.harness.process import LoopbackServer

REPO = Path(__file__).resolve().parents[2]


class ScalerHttpUnavailable(RuntimeError):
    """The server process did not come up."""


class ScalerHttpProcess(LoopbackServer):
    name = "scaler-http"
    error = ScalerHttpUnavailable

    def start(self) -> None:
        argv = [sys.executable, "-m", "tests.harness.scaler_http", str(self.port)]
        self.launch(argv, ["/healthz"], time.monotonic() + 30, cwd=REPO)


async def _serve(port: int) -> None:
    store = RecommendationStore()
    await store.put(fleet_recommendation(datetime.now(UTC)))
    server = await serve_http(store, ScalerMetrics(), host="127.0.0.1", port=port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(grace=1.0)


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1])))

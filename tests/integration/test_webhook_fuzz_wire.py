"""Hostile webhook bodies over a real socket, to the scaler's HTTP server in its own process.

A quarter as many examples as the in-memory suite (tests/unit/test_webhook_fuzz.py), through real
uvicorn and h11: each answer is documented (``assert_documented_answer``), the server's peak memory
stays within a few MiB of where it started, and it keeps answering a valid review afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from presage_scaler.serving.agones import PATH
from tests.harness.agones import FULL, REVIEW, assert_documented_answer
from tests.harness.hostile_json import bodies
from tests.harness.scaler_http import ScalerHttpProcess

pytestmark = pytest.mark.integration

MAX_GROWTH_KIB = 32 << 10


@pytest.fixture(scope="module")
def server() -> Iterator[ScalerHttpProcess]:
    with ScalerHttpProcess() as process:
        yield process


def test_hostile_bodies_on_the_wire(server: ScalerHttpProcess) -> None:
    before = server.memory_kib("VmHWM")
    with httpx.Client(base_url=server.url, timeout=10.0) as client:

        @settings(
            deadline=None,
            max_examples=max(settings.default.max_examples // 4, 10),
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(bodies([REVIEW, FULL]))
        def send(body: bytes) -> None:
            response = client.post(PATH, content=body, headers={"content-type": "application/json"})
            assert_documented_answer(body, response.status_code, response.content)

        send()
        response = client.post(PATH, content=json.dumps(REVIEW))
        assert response.status_code == 200
    growth = server.memory_kib("VmHWM") - before
    assert growth < MAX_GROWTH_KIB, f"peak RSS grew by {growth} KiB"
    assert server.running

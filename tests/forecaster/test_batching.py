"""Micro-batching: concurrent requests share forward passes, and each gets what it would get alone.

Batch-size-dependent results are a known complaint about TimesFM deployments; this is the
regression test. Series of different lengths (so different padding), horizons and levels are sent
concurrently, then one by one, and must agree within float tolerance.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from tests.harness.forecaster import metric, seasonal

pytestmark = pytest.mark.integration

MAX_BATCH = 8


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def server(request, module_forecaster_factory):
    # A long window so that concurrent requests certainly meet; a small bound so that they overflow it.
    return module_forecaster_factory(
        "--max-context",
        "512",
        "--max-horizon",
        "64",
        "--batch-window-ms",
        "250",
        "--max-batch-size",
        str(MAX_BATCH),
        "--dtype",
        request.param,
    )


def bodies() -> list[dict]:
    rng = np.random.default_rng(42)
    out = []
    for i in range(12):
        n_series = 1 + i % 3
        out.append(
            {
                "horizon": int(rng.integers(1, 65)),
                "quantiles": [[0.5, 0.9], [0.1, 0.95], [0.25, 0.75, 0.99]][i % 3],
                "series": [
                    {"id": f"r{i}s{j}", "values": seasonal(int(rng.integers(5, 700)), level=10.0**j, seed=i * 10 + j)}
                    for j in range(n_series)
                ],
            }
        )
    return out


def histogram(text: str, name: str) -> tuple[float, float, dict[str, float]]:
    """count, sum and buckets (le → cumulative count) of a histogram without labels."""
    buckets = {}
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            le = line.split('le="')[1].split('"')[0]
            buckets[le] = float(line.rpartition(" ")[2])
    return metric(text, f"{name}_count"), metric(text, f"{name}_sum"), buckets


async def send_all(url: str, payloads: list[dict]) -> list[dict]:
    async with httpx.AsyncClient(timeout=120) as client:
        responses = await asyncio.gather(*(client.post(f"{url}/v1/forecast", json=p) for p in payloads))
    for response in responses:
        assert response.status_code == 200, response.text
    return [r.json() for r in responses]


def assert_same(batched: dict, alone: dict) -> None:
    assert batched["quantiles"] == alone["quantiles"]
    for b, a in zip(batched["series"], alone["series"], strict=True):
        assert b["id"] == a["id"] and b["context"] == a["context"]
        np.testing.assert_allclose(b["point"], a["point"], rtol=1e-4, atol=1e-6)
        assert b["quantiles"].keys() == a["quantiles"].keys()
        for key in a["quantiles"]:
            np.testing.assert_allclose(b["quantiles"][key], a["quantiles"][key], rtol=1e-4, atol=1e-6)


async def test_concurrent_requests_are_batched_and_equal_to_alone(server):
    payloads = bodies()
    total = sum(len(p["series"]) for p in payloads)
    before = httpx.get(f"{server.url}/metrics").text
    batched = await send_all(server.url, payloads)
    mid = httpx.get(f"{server.url}/metrics").text
    alone = [(await send_all(server.url, [p]))[0] for p in payloads]

    count0, sum0, _ = histogram(before, "presage_forecaster_batch_size")
    count1, sum1, buckets = histogram(mid, "presage_forecaster_batch_size")
    passes, series = count1 - count0, sum1 - sum0
    assert series == total
    assert passes <= -(-total // MAX_BATCH) + 1, f"{total} series took {passes} forward passes"
    assert buckets[f"{float(MAX_BATCH)}"] == count1, "a forward pass exceeded --max-batch-size"
    for b, a in zip(batched, alone, strict=True):
        assert_same(b, a)


async def test_one_request_larger_than_a_batch(server):
    payload = {
        "horizon": 10,
        "quantiles": [0.9],
        "series": [{"id": str(i), "values": seasonal(30 + 20 * i, seed=i)} for i in range(2 * MAX_BATCH + 3)],
    }
    [together] = await send_all(server.url, [payload])
    for i, s in enumerate(payload["series"]):
        [alone] = (await send_all(server.url, [{**payload, "series": [s]}]))[0]["series"]
        np.testing.assert_allclose(together["series"][i]["point"], alone["point"], rtol=1e-4, atol=1e-6)


async def test_window_zero_still_answers_concurrent_requests(forecaster_factory):
    server = forecaster_factory("--batch-window-ms", "0", "--max-context", "128", "--max-horizon", "16")
    payloads = [{"horizon": 4, "series": [{"values": seasonal(50, seed=i)}]} for i in range(6)]
    results = await send_all(server.url, payloads)
    assert [len(r["series"][0]["point"]) for r in results] == [4] * 6

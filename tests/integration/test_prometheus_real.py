"""The Prometheus client against a real, backfilled Prometheus.

Needs the ``tests.harness.fixtures_prometheus`` plugin (registered in ``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.clients.prometheus import (
    Connection,
    NoData,
    PrometheusClient,
    PrometheusUnreachable,
    QueryFailed,
    TooManySeries,
    history_window,
)
from presage_scaler.clients.prometheus_connection import resolve_connection
from tests.harness.certs import issue
from tests.harness.fixtures_prometheus import PrometheusFactory
from tests.harness.prometheus import PrometheusServer, Series

pytestmark = pytest.mark.integration

T0 = datetime(2024, 3, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
FIVE = timedelta(minutes=5)
TWO_DAYS = 2 * 24 * 60  # one-minute samples


def demand(i: int) -> float:
    """A daily wave plus a trend, sampled at minute ``i`` after T0."""
    return round(100 + 50 * math.sin(2 * math.pi * i / 1440) + 0.01 * i, 3)


def minutes(values: dict[int, float]) -> list[tuple[datetime, float]]:
    return [(T0 + i * MINUTE, v) for i, v in values.items()]


@pytest.fixture(scope="module")
def prometheus(module_prometheus_factory: PrometheusFactory) -> PrometheusServer:
    return module_prometheus_factory(
        Series("demand", {"app": "web"}, minutes({i: demand(i) for i in range(TWO_DAYS)})),
        Series("two", {"instance": "a"}, minutes({i: 1.0 for i in range(10)})),
        Series("two", {"instance": "b"}, minutes({i: 2.0 for i in range(10)})),
        # Minutes 60..89 are missing.
        Series("gappy", {}, minutes({i: float(i) for i in range(120) if not 60 <= i < 90})),
        Series("nanny", {}, minutes({i: math.nan if i == 60 else float(i * i) for i in range(120)})),
    )


@pytest.fixture
async def prom(prometheus: PrometheusServer) -> AsyncIterator[PrometheusClient]:
    async with PrometheusClient(prometheus.url) as client:
        yield client


async def test_two_days_at_one_minute_read_back_at_five_minutes(prom: PrometheusClient):
    start, end = history_window(timedelta(days=2), FIVE, None, T0 + TWO_DAYS * MINUTE - timedelta(seconds=30))
    assert (start, end) == (T0, T0 + (TWO_DAYS - 5) * MINUTE)

    series = await prom.query_range("demand", start, end, FIVE)

    expected = [demand(i) for i in range(0, TWO_DAYS, 5)]
    assert len(series.values) == 576
    np.testing.assert_array_equal(series.values, expected)
    assert series.gap_steps == 0
    assert series.labels == {"__name__": "demand", "app": "web"}
    assert series.latest == demand(TWO_DAYS - 5)


async def test_range_longer_than_prometheus_point_limit_is_fetched_in_chunks(prom: PrometheusClient):
    step = timedelta(seconds=10)  # 17,280 points: above Prometheus's 11,000 per request
    series = await prom.query_range("demand", T0, T0 + TWO_DAYS * MINUTE - step, step)

    assert len(series.values) == TWO_DAYS * 6
    np.testing.assert_array_equal(series.values, [demand(k // 6) for k in range(TWO_DAYS * 6)])
    assert series.gap_steps == 0


async def test_two_series_is_too_many(prom: PrometheusClient):
    with pytest.raises(TooManySeries, match="'two' returned 2 series") as caught:
        await prom.query_range("two", T0, T0 + 9 * MINUTE, MINUTE)
    assert caught.value.count == 2


async def test_missing_half_hour_is_interpolated_and_counted(prom: PrometheusClient):
    series = await prom.query_range("gappy", T0, T0 + 115 * MINUTE, FIVE)

    # Grid point 60m still sees the 59m sample (5m lookback); 65m..85m see nothing.
    assert series.gap_steps == 5
    filled = series.values[12:19]
    np.testing.assert_allclose(filled, np.linspace(59.0, 90.0, 7))
    np.testing.assert_array_equal(series.values[:12], np.arange(0, 60, 5))
    np.testing.assert_array_equal(series.values[19:], np.arange(95, 120, 5))


async def test_nan_sample_is_interpolated_and_counted(prom: PrometheusClient):
    series = await prom.query_range("nanny", T0, T0 + 119 * MINUTE, MINUTE)

    assert series.gap_steps == 1
    assert series.values[60] == (59.0**2 + 61.0**2) / 2
    np.testing.assert_array_equal(np.delete(series.values, 60), [i * i for i in range(120) if i != 60])


async def test_series_younger_than_the_window_starts_at_its_first_sample(prom: PrometheusClient):
    series = await prom.query_range("gappy", T0 - 60 * MINUTE, T0 + 55 * MINUTE, FIVE)

    assert series.start == T0 and series.leading_gaps_dropped == 12
    np.testing.assert_array_equal(series.values, np.arange(0, 60, 5))
    assert series.gap_steps == 0


async def test_instant_query_returns_one_value(prom: PrometheusClient):
    assert await prom.query_instant("demand", T0 + 100 * MINUTE) == demand(100)
    assert await prom.query_instant('sum(demand{app="web"}) * 2', T0 + 100 * MINUTE) == 2 * demand(100)


async def test_instant_query_on_missing_metric_is_no_data(prom: PrometheusClient):
    with pytest.raises(NoData, match="'no_such_metric'"):
        await prom.query_instant("no_such_metric", T0 + 100 * MINUTE)


async def test_range_query_on_missing_metric_is_no_data(prom: PrometheusClient):
    with pytest.raises(NoData):
        await prom.query_range("no_such_metric", T0, T0 + 60 * MINUTE, FIVE)


async def test_syntax_error_is_query_failed_with_server_message(prom: PrometheusClient):
    with pytest.raises(QueryFailed, match=r"bad_data.*parse error") as caught:
        await prom.query_instant("sum(demand", T0)
    assert caught.value.status_code == 400


async def test_stopped_prometheus_is_unreachable_then_recovers(prometheus_factory: PrometheusFactory):
    server = prometheus_factory(Series("up_once", {}, minutes({0: 7.0})))
    async with PrometheusClient(server.url, timeout=5.0) as client:
        assert await client.query_instant("up_once", T0) == 7.0

        server.stop()
        with pytest.raises(PrometheusUnreachable, match=server.url.replace(".", r"\.")):
            await client.query_instant("up_once", T0)

        server.start()  # same port and data
        assert await client.query_instant("up_once", T0) == 7.0


async def test_restart_with_new_data(prometheus_factory: PrometheusFactory):
    server = prometheus_factory(Series("changing", {}, minutes({0: 1.0})))
    server.clear()
    server.add_series("changing", {}, minutes({0: 2.0}))
    server.start()
    async with PrometheusClient(server.url) as client:
        assert await client.query_instant("changing", T0) == 2.0


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A tiny HTTP server answering every query with a scalar and recording request headers."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(dict(self.headers))
            body = b'{"status":"success","data":{"resultType":"scalar","result":[0,"1"]}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


async def test_bearer_token_is_sent(recording_server: tuple[str, list[dict[str, str]]]):
    url, seen = recording_server
    async with PrometheusClient(url, connection=Connection((("Authorization", "Bearer s3cret"),))) as client:
        assert await client.query_instant("q") == 1.0
    assert seen[0]["Authorization"] == "Bearer s3cret"


@pytest.fixture
async def self_signed_prometheus(prometheus: PrometheusServer, tmp_path) -> AsyncIterator[str]:
    """The module's Prometheus behind a TLS listener whose certificate no CA signed (a private CA, as
    an in-cluster Prometheus often has, looks the same to a client that trusts only the system's)."""
    pem = issue("prometheus", hosts=["127.0.0.1"])
    pem.write(tmp_path / "tls.crt", tmp_path / "tls.key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", prometheus.port)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0, ssl=context)
    yield f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    server.close()
    await server.wait_closed()


async def test_insecure_skip_verify_reads_a_prometheus_whose_certificate_is_not_trusted(self_signed_prometheus: str):
    """The reference: "InsecureSkipVerify disables TLS verification." With it the query is answered;
    without it the certificate is refused and the scaler would be PrometheusUnreachable."""
    at = T0 + 100 * MINUTE
    skipping = PrometheusQuery(address=self_signed_prometheus, query="demand", insecure_skip_verify=True)
    async with PrometheusClient(skipping.address, connection=await resolve_connection(skipping, None)) as client:
        assert await client.query_instant(skipping.query, at) == demand(100)
    verifying = PrometheusQuery(address=self_signed_prometheus, query="demand")
    async with PrometheusClient(verifying.address, connection=await resolve_connection(verifying, None)) as client:
        with pytest.raises(PrometheusUnreachable, match="certificate verify failed"):
            await client.query_instant(verifying.query, at)

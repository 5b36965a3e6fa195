"""Unit tests of the Prometheus client: gap filling, parsing, error mapping.

Queries go over real HTTP to a local aiohttp server that hands each request to the test's handler.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from presage_scaler.api.prometheus_query import PrometheusQuery, SecretKeyRef
from presage_scaler.backends.base import History
from presage_scaler.clients.httppool import MAX_CONNECTIONS
from presage_scaler.clients.prometheus import (
    MAX_POINTS_PER_QUERY,
    MAX_POINTS_PER_REQUEST,
    AnswerTooLarge,
    Connection,
    InvalidValue,
    NoData,
    PrometheusClient,
    PrometheusClientPool,
    PrometheusError,
    PrometheusUnreachable,
    QueryFailed,
    TooManySeries,
    fill_gaps,
    history_window,
)
from presage_scaler.clients.prometheus_connection import resolve_connection
from tests.harness.in_memory_secrets import InMemorySecrets

T0 = datetime(2024, 3, 1, tzinfo=UTC)
STEP = timedelta(minutes=5)
NAN = math.nan


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; ``form`` holds the form-encoded body's fields."""

    method: str
    path: str
    form: dict[str, str]
    headers: Mapping[str, str]


Handler = Callable[[Recorded], web.Response | Awaitable[web.Response]]


class FakePrometheus:
    """A local HTTP server that passes every request, whatever its path, to ``handler``.

    An exception in a handler (a failed assertion) is answered with HTTP 500 and kept in
    ``errors``; the ``server`` fixture re-raises it so it cannot pass for a client-side error.
    """

    def __init__(self) -> None:
        self.url = ""
        self.handler: Handler | None = None
        self.errors: list[BaseException] = []
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._dispatch)
        # Handlers are cancelled when the client hangs up (the timeout test leaves one sleeping).
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _dispatch(self, request: web.Request) -> web.Response:
        fields = await request.post()
        recorded = Recorded(
            method=request.method,
            path=request.path,
            form={key: str(fields.getone(key)) for key in fields},
            headers=request.headers,
        )
        assert self.handler is not None, "no handler set"
        try:
            reply = self.handler(recorded)
            return await reply if inspect.isawaitable(reply) else reply
        except Exception as exc:
            self.errors.append(exc)
            return web.Response(status=500, text=f"handler failed: {exc!r}")


@pytest.fixture
async def server() -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    await fake.start()
    yield fake
    await fake.stop()
    if fake.errors:
        raise fake.errors[0]


@pytest.fixture
def client(server: FakePrometheus) -> Callable[..., PrometheusClient]:
    """``client(handler, **kwargs)``: a client for the local server, which answers with ``handler``."""

    def make(handler: Handler, **kwargs: Any) -> PrometheusClient:
        server.handler = handler
        return PrometheusClient(server.url, **kwargs)

    return make


@pytest.fixture
def refused_address() -> Iterator[str]:
    """An address whose port is bound but not listening, so connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def ok(data: dict) -> web.Response:
    return web.json_response({"status": "success", "data": data})


def matrix(*series: tuple[dict, list[tuple[datetime, str]]]) -> dict:
    result = [
        {"metric": labels, "values": [[at.timestamp(), value] for at, value in samples]} for labels, samples in series
    ]
    return {"resultType": "matrix", "result": result}


def grid(n: int) -> list[datetime]:
    return [T0 + i * STEP for i in range(n)]


# --- gap filling -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected", "gaps"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 0),
        ([1.0, NAN, NAN, 4.0], [1.0, 2.0, 3.0, 4.0], 2),
        ([NAN, NAN, 5.0, 7.0], [5.0, 5.0, 5.0, 7.0], 2),
        ([5.0, 7.0, NAN, math.inf], [5.0, 7.0, 7.0, 7.0], 2),
        ([-math.inf, 2.0, math.inf, 4.0], [2.0, 2.0, 3.0, 4.0], 2),
        ([NAN], [NAN], 1),
    ],
)
def test_fill_gaps_rule(raw, expected, gaps):
    filled, count = fill_gaps(np.array(raw))
    np.testing.assert_array_equal(filled, expected)
    assert count == gaps


@given(st.lists(st.one_of(st.floats(-1e9, 1e9), st.just(NAN), st.just(math.inf)), min_size=1, max_size=50))
def test_fill_gaps_keeps_valid_values_and_stays_within_their_range(raw):
    values = np.array(raw)
    valid = np.isfinite(values)
    filled, count = fill_gaps(values)
    assert count == int((~valid).sum())
    if valid.any():
        assert np.isfinite(filled).all()
        np.testing.assert_array_equal(filled[valid], values[valid])
        assert values[valid].min() <= filled.min() and filled.max() <= values[valid].max()


# --- history window --------------------------------------------------------------------------


def test_history_window_aligns_end_down_and_counts_points():
    now = datetime(2024, 3, 1, 12, 7, 31, tzinfo=UTC)
    start, end = history_window(timedelta(days=2), STEP, None, now)
    assert end == datetime(2024, 3, 1, 12, 5, tzinfo=UTC)
    assert (end - start) // STEP + 1 == 576
    assert history_window(timedelta(days=2), STEP, None, now + timedelta(minutes=2)) == (start, end)


def test_history_window_caps_points_at_max_context():
    now = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    start, end = history_window(timedelta(days=60), STEP, 16_384, now)
    assert end == now
    assert (end - start) // STEP + 1 == 16_384


def test_history_window_rejects_naive_now():
    with pytest.raises(ValueError, match="timezone-aware"):
        history_window(timedelta(days=1), STEP, None, datetime(2024, 3, 1))


# --- query_range -----------------------------------------------------------------------------


async def test_query_range_places_samples_on_grid_and_fills_gaps(client):
    times = grid(6)
    samples = [(times[0], "1"), (times[1], "NaN"), (times[2], "3"), (times[4], "+Inf"), (times[5], "6")]

    def handler(request: Recorded) -> web.Response:
        assert request.method == "POST"
        assert request.path == "/api/v1/query_range"
        params = request.form
        assert params["query"] == "sum(up)"
        assert float(params["start"]) == T0.timestamp()
        assert float(params["end"]) == times[5].timestamp()
        assert float(params["step"]) == 300
        return ok(matrix(({"job": "x"}, samples)))

    async with client(handler) as prom:
        series = await prom.query_range("sum(up)", T0, times[5] + timedelta(minutes=2), STEP)
    np.testing.assert_array_equal(series.values, [1, 2, 3, 4, 5, 6])
    assert series.values.dtype == np.float64
    assert series.gap_steps == 3
    assert series.trailing_gap_steps == 0
    assert series.labels == {"job": "x"}
    assert series.start == T0 and series.end == times[5] and series.step == STEP
    assert series.latest == 6.0
    history = series.history()
    assert isinstance(history, History) and history.step == STEP
    np.testing.assert_array_equal(history.values, series.values)


async def test_query_range_trailing_gap_is_stale_latest(client):
    times = grid(4)

    async with client(lambda _: ok(matrix(({}, [(times[0], "2"), (times[1], "4")])))) as prom:
        series = await prom.query_range("q", T0, times[3], STEP)
    np.testing.assert_array_equal(series.values, [2, 4, 4, 4])
    assert (series.gap_steps, series.trailing_gap_steps, series.latest) == (2, 2, 4.0)


async def test_query_range_drops_leading_gaps_instead_of_inventing_history(client):
    times = grid(6)
    samples = [(times[0], "NaN"), (times[3], "5"), (times[5], "7")]

    async with client(lambda _: ok(matrix(({}, samples)))) as prom:
        series = await prom.query_range("new_workload", T0, times[5], STEP)
    np.testing.assert_array_equal(series.values, [5, 6, 7])
    assert series.start == times[3] and series.end == times[5]
    assert (series.leading_gaps_dropped, series.gap_steps, series.trailing_gap_steps) == (3, 1, 0)


async def test_query_range_two_series_is_too_many(client):
    times = grid(2)
    data = matrix(({"pod": "a"}, [(times[0], "1")]), ({"pod": "b"}, [(times[0], "1")]))
    async with client(lambda _: ok(data)) as prom:
        with pytest.raises(TooManySeries, match=r"'rate\(x\[5m\]\)' returned 2 series") as caught:
            await prom.query_range("rate(x[5m])", T0, times[1], STEP)
    assert caught.value.count == 2
    assert caught.value.reason == "TooManySeries"


@pytest.mark.parametrize("result", [[], [{"metric": {}, "values": [[T0.timestamp(), "NaN"]]}]])
async def test_query_range_empty_or_all_nan_is_no_data(result, client):
    async with client(lambda _: ok({"resultType": "matrix", "result": result})) as prom:
        with pytest.raises(NoData, match="'missing_metric'") as caught:
            await prom.query_range("missing_metric", T0, T0 + STEP, STEP)
    assert caught.value.reason == "NoData"


async def test_query_range_splits_long_ranges_and_spots_series_across_chunks(client):
    points = MAX_POINTS_PER_REQUEST + 5
    requests: list[dict[str, str]] = []

    def handler(request: Recorded) -> web.Response:
        params = request.form
        requests.append(params)
        start, end = float(params["start"]), float(params["end"])
        samples = [(datetime.fromtimestamp(start, UTC), "1"), (datetime.fromtimestamp(end, UTC), "1")]
        labels = {"chunk": str(len(requests))} if params["query"] == "churn" else {}
        return ok(matrix((labels, samples)))

    end = T0 + (points - 1) * STEP
    async with client(handler) as prom:
        series = await prom.query_range("steady", T0, end, STEP)
        assert len(series.values) == points
        assert [round((float(r["end"]) - float(r["start"])) / 300) + 1 for r in requests] == [
            MAX_POINTS_PER_REQUEST,
            5,
        ]
        assert float(requests[1]["start"]) == (T0 + MAX_POINTS_PER_REQUEST * STEP).timestamp()
        with pytest.raises(TooManySeries) as caught:
            await prom.query_range("churn", T0, end, STEP)
        assert caught.value.count == 2


async def test_a_range_past_the_points_cap_is_refused_before_any_request(client):
    """28 days at 1s (the longest legitimate query) is within the cap; one point more than the cap is
    refused with the figures and what to change, before a request is sent or the grid allocated."""
    asked: list[Recorded] = []

    def handler(request: Recorded) -> web.Response:
        asked.append(request)
        return ok(matrix())

    second = timedelta(seconds=1)
    assert timedelta(days=28) // second <= MAX_POINTS_PER_QUERY
    async with client(handler) as prom:
        with pytest.raises(AnswerTooLarge) as caught:
            await prom.query_range("q", T0, T0 + MAX_POINTS_PER_QUERY * second, second)
    assert asked == []
    assert caught.value.reason == "QueryFailed" and isinstance(caught.value, QueryFailed)
    assert f"is {MAX_POINTS_PER_QUERY + 1} points, over the limit of {MAX_POINTS_PER_QUERY} points per query" in str(
        caught.value
    )
    assert "'q'" in str(caught.value) and "a coarser resolution or a shorter history" in str(caught.value)


def one_sample_at(timestamp: str) -> str:
    """A range answer of one sample whose timestamp is ``timestamp``, as raw JSON text."""
    return (
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [['
        + timestamp
        + ', "1"]]}]}}'
    )


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("[" * 200_000 + "]" * 200_000, "non-Prometheus body"),
        (one_sample_at("1e400"), "OverflowError"),
        (one_sample_at("1" + "0" * 400), "OverflowError"),
        (one_sample_at("1" + "0" * 5000), "non-Prometheus body"),
    ],
    ids=["nested-200000-deep", "timestamp-1e400", "timestamp-10**400", "timestamp-5000-digits"],
)
async def test_answers_past_parsing_limits_are_query_failed(client, body, detail):
    """Nesting past the recursion limit and numbers past float range or Python's digit limit are a
    malformed answer with a reason, never an exception of their own."""
    async with client(lambda _: web.Response(body=body.encode(), content_type="application/json")) as prom:
        with pytest.raises(QueryFailed, match=detail) as caught:
            await prom.query_range("q", T0, T0 + STEP, STEP)
    assert caught.value.reason == "QueryFailed" and len(str(caught.value)) < 1000


async def test_query_range_rejects_naive_times(client):
    async with client(lambda _: ok(matrix())) as prom:
        with pytest.raises(ValueError, match="timezone-aware"):
            await prom.query_range("q", datetime(2024, 3, 1), datetime(2024, 3, 2), STEP)


# --- query_instant ---------------------------------------------------------------------------


async def test_query_instant_vector_and_time_parameter(client):
    def handler(request: Recorded) -> web.Response:
        assert request.path == "/api/v1/query"
        assert float(request.form["time"]) == T0.timestamp()
        return ok({"resultType": "vector", "result": [{"metric": {}, "value": [T0.timestamp(), "42.5"]}]})

    async with client(handler) as prom:
        assert await prom.query_instant("q", T0) == 42.5


async def test_query_instant_scalar_without_time(client):
    def handler(request: Recorded) -> web.Response:
        assert "time" not in request.form
        return ok({"resultType": "scalar", "result": [T0.timestamp(), "3"]})

    async with client(handler) as prom:
        assert await prom.query_instant("scalar(1+2)") == 3.0


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"resultType": "vector", "result": []}, NoData),
        (
            {
                "resultType": "vector",
                "result": [{"metric": {"a": "1"}, "value": [0, "1"]}, {"metric": {"a": "2"}, "value": [0, "1"]}],
            },
            TooManySeries,
        ),
        ({"resultType": "vector", "result": [{"metric": {}, "value": [0, "NaN"]}]}, InvalidValue),
        ({"resultType": "scalar", "result": [0, "+Inf"]}, InvalidValue),
        ({"resultType": "string", "result": [0, "hello"]}, QueryFailed),
        ({"resultType": "vector", "result": [{"metric": {}, "histogram": [0, {}]}]}, QueryFailed),
    ],
)
async def test_query_instant_result_errors(data, error, client):
    async with client(lambda _: ok(data)) as prom:
        with pytest.raises(error, match="'the_query'") as caught:
            await prom.query_instant("the_query")
    assert isinstance(caught.value, PrometheusError)
    assert caught.value.reason == error.__name__


# --- transport and HTTP errors ---------------------------------------------------------------


async def test_server_error_carries_error_type_and_message(client):
    body = {"status": "error", "errorType": "bad_data", "error": "1:5: parse error: unclosed left parenthesis"}
    async with client(lambda _: web.json_response(body, status=400)) as prom:
        with pytest.raises(QueryFailed, match=r"bad_data.*unclosed left parenthesis.*fix the PromQL") as caught:
            await prom.query_instant("sum(")
    assert (caught.value.status_code, caught.value.error_type) == (400, "bad_data")


async def test_status_error_with_http_200_is_query_failed(client):
    body = {"status": "error", "errorType": "execution", "error": "boom"}
    async with client(lambda _: web.json_response(body)) as prom:
        with pytest.raises(QueryFailed, match="boom"):
            await prom.query_instant("q")


async def test_non_prometheus_body_is_query_failed(client):
    async with client(lambda _: web.Response(status=502, text="<html>Bad Gateway</html>")) as prom:
        with pytest.raises(QueryFailed, match=r"HTTP 502.*Bad Gateway") as caught:
            await prom.query_instant("q")
    assert caught.value.status_code == 502


async def test_connection_refused_is_unreachable_and_names_the_address(refused_address):
    async with PrometheusClient(refused_address) as prom:
        with pytest.raises(
            PrometheusUnreachable, match=f"cannot reach Prometheus at {re.escape(refused_address)}: "
        ) as caught:
            await prom.query_range("q", T0, T0, STEP)
    assert caught.value.reason == "PrometheusUnreachable"
    assert "check the address, the Service and any NetworkPolicy" in str(caught.value)


async def test_timeout_is_unreachable_and_names_the_address(server, client):
    async def slow(request: Recorded) -> web.Response:
        await asyncio.sleep(30)  # cancelled when the client gives up
        return ok(matrix())

    async with client(slow, timeout=0.2) as prom:
        with pytest.raises(PrometheusUnreachable, match=f"Prometheus at {re.escape(server.url)} timed out") as caught:
            await prom.query_range("q", T0, T0, STEP)
    assert caught.value.reason == "PrometheusUnreachable"
    assert "check that it is healthy, or make the query cheaper" in str(caught.value)


async def test_waiting_for_a_pooled_connection_is_not_counted_as_prometheus_timing_out(server, client):
    """Five times as many queries at once as the pool has connections, each answered in 0.2 s: the
    last wave waits 0.8 s for a connection, past the 0.5 s timeout, and still succeeds, since the
    timeout bounds Prometheus's answer, not presage's own queue."""

    async def steady(request: Recorded) -> web.Response:
        await asyncio.sleep(0.2)
        return ok(matrix(({}, [(T0, "1")])))

    async with client(steady, timeout=0.5) as prom:
        started = asyncio.get_running_loop().time()
        answers = await asyncio.gather(*(prom.query_range("q", T0, T0, STEP) for _ in range(5 * MAX_CONNECTIONS)))
        took = asyncio.get_running_loop().time() - started
    assert [series.latest for series in answers] == [1.0] * (5 * MAX_CONNECTIONS)
    assert took >= 1.0  # the waves did queue for connections, longer than the timeout


async def test_connection_closed_without_an_answer_is_unreachable():
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    listener = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    address = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    async with listener, PrometheusClient(address) as prom:
        with pytest.raises(PrometheusUnreachable, match=f"cannot reach Prometheus at {re.escape(address)}: ") as caught:
            await prom.query_instant("q")
    assert caught.value.reason == "PrometheusUnreachable"


@pytest.mark.parametrize(
    "data",
    [
        {"resultType": "matrix", "result": [{"metric": {}, "values": [["x"]]}]},
        {"resultType": "matrix", "result": "nope"},
    ],
)
async def test_malformed_range_response_is_query_failed(data, client):
    async with client(lambda _: ok(data)) as prom:
        with pytest.raises(QueryFailed, match="malformed response"):
            await prom.query_range("q", T0, T0 + STEP, STEP)


async def test_malformed_instant_response_is_query_failed(client):
    async with client(lambda _: ok({"resultType": "scalar", "result": None})) as prom:
        with pytest.raises(QueryFailed, match="malformed response"):
            await prom.query_instant("q")


# --- headers, address, pooling ---------------------------------------------------------------


async def test_bearer_token_header_and_path_prefix(server):
    seen: list[Recorded] = []

    def handler(request: Recorded) -> web.Response:
        seen.append(request)
        return ok({"resultType": "scalar", "result": [0, "1"]})

    server.handler = handler
    query = PrometheusQuery(
        address=f"{server.url}/select/0/prometheus/",
        query="q",
        bearer_token_secret_ref=SecretKeyRef(name="s", key="token"),
    )
    secrets = InMemorySecrets({"s": {"token": b"s3cret\n"}})
    async with PrometheusClient(query.address, connection=await resolve_connection(query, secrets)) as prom:
        await prom.query_instant("q")
    async with PrometheusClient(server.url) as prom:
        await prom.query_instant("q")
    assert seen[0].headers["Authorization"] == "Bearer s3cret"
    assert seen[0].path == "/select/0/prometheus/api/v1/query"
    assert seen[0].headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert seen[0].form == {"query": "q"}
    assert "Authorization" not in seen[1].headers
    assert seen[1].path == "/api/v1/query"


async def test_pool_shares_one_session_per_address_and_sends_each_token(server):
    """A rotated (or another tenant's) token opens no new pool: it travels with the request."""
    seen: list[Recorded] = []

    def handler(request: Recorded) -> web.Response:
        seen.append(request)
        return ok({"resultType": "scalar", "result": [0, "1"]})

    server.handler = handler
    pool = PrometheusClientPool(timeout=5.0)
    a = PrometheusQuery(address=server.url, query="x")
    b = PrometheusQuery(address=f"{server.url}/", query="y")
    other = PrometheusQuery(address="http://thanos:9090", query="x")
    for token in ("t1", "t2", None, "t3"):
        headers = (("Authorization", f"Bearer {token}"),) if token else ()
        await pool.get(a.address, Connection(headers)).query_instant("x")
    await pool.get(b.address).query_instant("y")
    assert pool.sessions == 1
    pool.get(other.address)
    assert pool.sessions == 2
    assert [r.headers.get("Authorization") for r in seen] == ["Bearer t1", "Bearer t2", None, "Bearer t3", None]
    await pool.aclose()


def test_reasons_are_distinct_camel_case():
    errors = [PrometheusUnreachable, QueryFailed, TooManySeries, NoData, InvalidValue]
    reasons = [e.reason for e in errors]
    assert len(set(reasons)) == len(reasons)
    assert all(r[0].isupper() and r.isalnum() for r in reasons)
    assert all(issubclass(e, PrometheusError) for e in errors)

"""The scaler's HTTP server on a real socket: probes, /metrics, and the Agones webhook, plain and TLS.

Webhook bodies are byte-for-byte what Agones' ``applyWebhookPolicy`` posts (a FleetAutoscaleReview
with ``"response": null``), and answers are checked as raw JSON, as Agones' Go decoder reads them.
"""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import re
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.agones import MAX_BODY_BYTES, PATH
from presage_scaler.serving.http_server import HttpLimits, HttpServer, TLSFiles, serve_http
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef
from presage_scaler.serving.store_metrics import served_metrics
from tests.harness.agones import NS, REVIEW, UID
from tests.harness.certs import Pem, issue

pytestmark = pytest.mark.integration


def review(*, counters: bool = False, lists: bool = False, labels: bool = False, **request: str) -> bytes:
    body = copy.deepcopy(REVIEW)
    body["request"].update(request)
    status = body["request"]["status"]
    if counters:
        status["counters"] = {"rooms": {"count": 9, "capacity": 20, "allocatedCount": 9, "allocatedCapacity": 10}}
    if lists:
        status["lists"] = {"players": {"count": 3, "capacity": 8, "allocatedCount": 3, "allocatedCapacity": 4}}
    if labels:
        body["request"]["labels"] = {"app": "arena"}
        body["request"]["annotations"] = {"team": "netcode"}
    # Go's encoding/json: compact, no spaces.
    return json.dumps(body, separators=(",", ":")).encode()


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def fleet_rec(
    name: str = "arena-ps",
    *,
    clock: Clock,
    namespace: str = NS,
    mode: str = "Enforce",
    recommended: int = 7,
    age: timedelta = timedelta(seconds=10),
) -> StoredRecommendation:
    return StoredRecommendation(
        namespace=namespace,
        name=name,
        mode=mode,  # type: ignore[arg-type]
        target=TargetRef("agones.dev/v1", "Fleet", "arena"),
        recommended_replicas=recommended,
        current_replicas=4,
        generated_at=clock.now - age,
        interval=timedelta(minutes=1),
        min_replicas=1,
        max_replicas=50,
        agones_max_age=timedelta(minutes=5),
    )


@dataclass
class Running:
    store: RecommendationStore
    metrics: ScalerMetrics
    server: HttpServer
    client: httpx.AsyncClient
    clock: Clock
    readiness: list[bool | str]


@pytest.fixture
async def h() -> AsyncIterator[Running]:
    store, clock, readiness = RecommendationStore(), Clock(), [False]
    metrics = served_metrics(ScalerMetrics(), store, clock)
    server = await serve_http(
        store, metrics, host="127.0.0.1", port=0, ready=lambda: readiness[0], now=clock, grace=1.0
    )
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=5.0) as client:
        try:
            yield Running(store, metrics, server, client, clock, readiness)
        finally:
            await server.stop(grace=1.0)


async def post(h: Running, body: bytes) -> httpx.Response:
    return await h.client.post(PATH, content=body, headers={"Content-Type": "application/json"})


# --- probes and /metrics ------------------------------------------------------------------------


async def test_port_zero_reports_the_bound_port(h: Running) -> None:
    assert h.server.port > 0
    assert (await h.client.get("/healthz")).status_code == 200


async def test_readiness_follows_the_callable(h: Running) -> None:
    response = await h.client.get("/readyz")
    assert (response.status_code, response.text) == (503, "not ready\n")
    h.readiness[0] = "waiting for the first store sync"
    response = await h.client.get("/readyz")
    assert (response.status_code, response.text) == (503, "waiting for the first store sync\n")
    h.readiness[0] = True
    assert (await h.client.get("/readyz")).status_code == 200
    assert (await h.client.get("/healthz")).status_code == 200


async def test_metrics_exposition(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock, age=timedelta(seconds=42)))
    response = await h.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    assert 'presage_recommendation_age_seconds{namespace="games",scaler="arena-ps"} 42.0' in response.text
    assert "# TYPE presage_webhook_requests_total counter" in response.text


async def test_a_taken_port_fails_loudly(h: Running) -> None:
    with pytest.raises(OSError):
        await serve_http(h.store, h.metrics, host="127.0.0.1", port=h.server.port)


async def test_stop_releases_the_port() -> None:
    store = RecommendationStore()
    server = await serve_http(store, ScalerMetrics(), host="127.0.0.1", port=0)
    await server.stop(grace=1.0)
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{server.port}/healthz")


# --- the webhook --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [{}, {"counters": True}, {"lists": True}, {"labels": True}, {"counters": True, "lists": True, "labels": True}],
    ids=["plain", "counters", "lists", "labels", "everything"],
)
async def test_enforce_answers_with_an_integer(h: Running, shape: dict[str, bool]) -> None:
    await h.store.put(fleet_rec(clock=h.clock, recommended=7))
    response = await post(h, review(**shape))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"response": {"uid": UID, "scale": True, "replicas": 7}}
    assert re.search(rb'"replicas":7[,}]', response.content), response.content


async def test_stale_recommendation(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock, age=timedelta(minutes=4)))
    assert (await post(h, review())).status_code == 200
    h.clock.now += timedelta(minutes=2)  # time alone makes it stale
    response = await post(h, review())
    assert response.status_code == 503
    assert response.json()["reason"] == "StaleRecommendation"
    assert "games/arena-ps" in response.json()["message"]


async def test_shadow_mode(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock, mode="Shadow"))
    response = await post(h, review(labels=True))
    assert response.status_code == 409
    assert response.json()["reason"] == "ShadowMode"


async def test_unknown_fleet(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    response = await post(h, review(name="lobby"))
    assert response.status_code == 404
    body = response.json()
    assert body["reason"] == "NoPredictiveScaler" and "'lobby'" in body["message"]


async def test_wrong_namespace(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock, namespace="other"))
    response = await post(h, review())
    assert response.status_code == 404
    assert "'games'" in response.json()["message"]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b'{"request":null,"response":null}',
        json.dumps({"request": {"uid": UID, "name": "arena", "namespace": NS}}).encode(),
        review().replace(b'"replicas":4', b'"replicas":"4"'),
        review().replace(f'"uid":"{UID}",'.encode(), b""),
    ],
    ids=["empty", "not-json", "null-request", "no-status", "string-count", "no-uid"],
)
async def test_malformed_is_400(h: Running, body: bytes) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    response = await post(h, body)
    assert response.status_code == 400
    assert response.json()["reason"] == "MalformedRequest"


async def test_webhook_accepts_post_only(h: Running) -> None:
    assert (await h.client.get(PATH)).status_code == 405


async def test_webhook_requests_are_counted(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    for body in (review(), review(), b"{}", review(name="lobby")):
        await post(h, body)

    def count(code: str) -> float | None:
        return h.metrics.registry.get_sample_value("presage_webhook_requests_total", {"code": code})

    assert (count("200"), count("400"), count("404")) == (2, 1, 1)
    assert h.metrics.registry.get_sample_value("presage_webhook_request_duration_seconds_count") == 4


# --- TLS ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certs:
    ca: Pem
    files: TLSFiles


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    ca = issue("presage-test-ca", ca=True)
    server = issue("presage-scaler", ca, hosts=["localhost", "127.0.0.1"])
    base = tmp_path_factory.mktemp("tls")
    server.write(base / "tls.crt", base / "tls.key")
    return Certs(ca, TLSFiles(base / "tls.crt", base / "tls.key"))


def _trusting(ca: Pem) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca.cert.decode())


async def _tls_server(certs: Certs, store: RecommendationStore) -> HttpServer:
    return await serve_http(store, ScalerMetrics(), host="127.0.0.1", port=0, tls=certs.files)


async def test_tls_webhook_verified_with_the_ca_bundle(certs: Certs) -> None:
    clock = Clock()
    store = RecommendationStore()
    await store.put(fleet_rec(clock=clock, recommended=11))
    server = await _tls_server(certs, store)
    assert server.tls
    try:
        # What Agones does with the FleetAutoscaler's caBundle: verify the server against it.
        async with httpx.AsyncClient(verify=_trusting(certs.ca), timeout=5.0) as client:
            response = await client.post(f"https://localhost:{server.port}{PATH}", content=review(counters=True))
            assert response.status_code == 200
            assert response.json()["response"] == {"uid": UID, "scale": True, "replicas": 11}
    finally:
        await server.stop(grace=1.0)


@pytest.mark.parametrize("client_kind", ["plain-http", "untrusted-ca"])
async def test_tls_refuses_what_it_should(certs: Certs, client_kind: str) -> None:
    server = await _tls_server(certs, RecommendationStore())
    other_ca = issue("another-ca", ca=True)
    scheme, verify = ("http", True) if client_kind == "plain-http" else ("https", _trusting(other_ca))
    try:
        async with httpx.AsyncClient(verify=verify, timeout=5.0) as client:
            with pytest.raises(httpx.TransportError):
                await client.get(f"{scheme}://localhost:{server.port}/healthz")
    finally:
        await server.stop(grace=1.0)


async def test_bad_certificate_fails_at_start(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate")
    (tmp_path / "tls.key").write_text("not a key")
    bad = TLSFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    with pytest.raises(ssl.SSLError):
        await serve_http(RecommendationStore(), ScalerMetrics(), host="127.0.0.1", port=0, tls=bad)


# --- limits: what one client may cost the server ------------------------------------------------


@dataclass
class Raw:
    """A bare TCP connection, to send what no HTTP client library would."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @classmethod
    async def open(cls, port: int, source: str = "127.0.0.1") -> Raw:
        """A connection from ``source``: another loopback address is another peer to the server."""
        return cls(*await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
        """The next response's status, headers (lower-case names) and body."""
        async with asyncio.timeout(timeout):
            head = await self.reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.decode("latin-1").split("\r\n")[:-2]
            headers = dict(line.lower().split(": ", 1) for line in lines)
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return int(status_line.split()[1]), headers, body

    async def closed_by_server(self, timeout: float) -> bool:
        """Whether the server closes the connection within ``timeout`` (anything it sent is skipped)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionResetError:
            pass
        return True

    def gone(self) -> bool:
        """Whether the server has closed the connection, with a FIN (end of stream) or a reset (a
        close with unread bytes of ours in its buffer)."""
        return self.reader.at_eof() or self.reader.exception() is not None

    def close(self) -> None:
        self.writer.close()


def head(length: int | str | None = None, *, path: str = PATH) -> bytes:
    framing = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return f"POST {path} HTTP/1.1\r\nHost: presage\r\nContent-Type: application/json\r\n{framing}\r\n".encode()


@asynccontextmanager
async def limited(h: Running, **limits: Any) -> AsyncIterator[HttpServer]:
    server = await serve_http(h.store, h.metrics, host="127.0.0.1", port=0, now=h.clock, limits=HttpLimits(**limits))
    try:
        yield server
    finally:
        await server.stop(grace=1.0)


async def test_a_huge_content_length_is_refused_before_any_body(h: Running) -> None:
    conn = await Raw.open(h.server.port)
    try:
        await conn.send(head(99999999999999))  # the head alone: the answer must not wait for a body
        status, headers, body = await conn.response(timeout=2.0)
        assert (status, headers["connection"]) == (413, "close")
        assert json.loads(body)["reason"] == "RequestTooLarge"
        assert await conn.closed_by_server(timeout=2.0)
    finally:
        conn.close()


@pytest.mark.parametrize("length", ["abc", "-1", "1e3", "9" * 5000])
async def test_an_invalid_content_length_is_a_bad_request(h: Running, length: str) -> None:
    conn = await Raw.open(h.server.port)
    try:
        await conn.send(head(length))
        status, _, _ = await conn.response(timeout=2.0)
        assert status == 400  # from h11, before the app: plain text
        assert await conn.closed_by_server(timeout=2.0)
    finally:
        conn.close()


async def test_a_chunked_body_is_refused_at_the_limit(h: Running) -> None:
    conn = await Raw.open(h.server.port)
    chunk = b" " * 65536
    try:
        await conn.send(head())
        for _ in range(MAX_BODY_BYTES // len(chunk) + 1):
            await conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        status, headers, body = await conn.response(timeout=2.0)  # no more is sent: it must answer now
        assert (status, headers["connection"], json.loads(body)["reason"]) == (413, "close", "RequestTooLarge")
    finally:
        conn.close()


async def test_a_slow_body_is_refused_after_the_body_timeout(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, body_timeout=0.5) as server:
        conn = await Raw.open(server.port)
        try:
            body = review()
            loop = asyncio.get_running_loop()
            started = loop.time()
            await conn.send(head(len(body)) + body[:10])
            status, headers, content = await conn.response(timeout=3.0)
            assert (status, headers["connection"], json.loads(content)["reason"]) == (408, "close", "RequestTimeout")
            assert 0.5 <= loop.time() - started < 3.0
            assert await conn.closed_by_server(timeout=1.0)
        finally:
            conn.close()


async def test_slowloris_connections_are_closed_after_the_head_timeout(h: Running) -> None:
    """300 clients each trickling a request head a byte at a time: each is closed at the deadline,
    although it never stops sending, and the webhook answers again afterwards."""
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, head_timeout=1.0) as server:
        conns = [await Raw.open(server.port) for _ in range(300)]
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def trickle(conn: Raw) -> float | None:
            """Seconds until the server closed it; None when it still had not after 8 s."""
            for byte in head(1000):
                if conn.gone() or loop.time() - started > 8.0:
                    break
                try:
                    await conn.send(bytes([byte]))
                except ConnectionError:
                    break  # reset: the server closed it
                await asyncio.sleep(0.2)
            return loop.time() - started if await conn.closed_by_server(timeout=0.2) else None

        try:
            closed_after = await asyncio.gather(*(trickle(conn) for conn in conns))
        finally:
            for conn in conns:
                conn.close()
        still_open = sum(seconds is None for seconds in closed_after)
        slowest = max((seconds for seconds in closed_after if seconds is not None), default=None)
        # 1 s is the deadline; the margin is for a loaded machine running client and server on one loop.
        assert still_open == 0 and slowest is not None and slowest < 4.0, (still_open, slowest)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=5.0) as client:
            assert (await client.post(PATH, content=review())).status_code == 200


async def test_the_head_deadline_spares_slow_bodies_and_idle_keep_alive(h: Running) -> None:
    """The head deadline ends with the head: a body may take longer (up to body_timeout), and a
    kept-alive connection gets a fresh deadline after each response."""
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, head_timeout=1.0, body_timeout=5.0) as server:
        conn = await Raw.open(server.port)
        try:
            body = review()
            await conn.send(head(len(body)))
            for piece in (body[:20], body[20:60], body[60:]):
                await asyncio.sleep(0.6)  # 1.8 s in all, well over the head timeout
                await conn.send(piece)
            assert (await conn.response())[0] == 200
            await asyncio.sleep(0.3)
            await conn.send(head(len(body)) + body)
            assert (await conn.response())[0] == 200
            assert await conn.closed_by_server(timeout=2.5)  # idle past the deadline: closed
        finally:
            conn.close()


async def idle(port: int, source: str, count: int) -> list[Raw]:
    """``count`` connections from ``source``, each with a request head that never ends."""
    conns = [await Raw.open(port, source) for _ in range(count)]
    for conn in conns:
        await conn.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    await asyncio.sleep(0.2)  # the server has seen them all
    return conns


async def from_address(port: int, source: str) -> int:
    """A webhook review posted on a fresh connection from ``source``: the status."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", transport=transport, timeout=3.0) as client:
        return (await client.post(PATH, content=review())).status_code


def closed_now(conns: list[Raw]) -> list[bool]:
    return [conn.gone() for conn in conns]


async def test_a_peer_over_its_bound_loses_its_own_oldest_idle_connection(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, max_connections_per_peer=4) as server:
        held = await idle(server.port, "127.0.0.2", 4)
        newest = await idle(server.port, "127.0.0.2", 1)
        try:
            assert closed_now(held + newest) == [True, False, False, False, False]
            assert await from_address(server.port, "127.0.0.1") == 200
        finally:
            for conn in held + newest:
                conn.close()


async def test_a_full_listener_closes_the_largest_holder_not_the_newcomer(h: Running) -> None:
    """Six connections open of six: a seventh, from a third address, is served, and the one closed for
    it is the oldest of the address holding the most."""
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, max_connections=6) as server:
        many = await idle(server.port, "127.0.0.2", 4)
        few = await idle(server.port, "127.0.0.3", 2)
        try:
            assert await from_address(server.port, "127.0.0.4") == 200
            await asyncio.sleep(0.1)
            assert closed_now(many) == [True, False, False, False]
            assert closed_now(few) == [False, False]
        finally:
            for conn in many + few:
                conn.close()


async def test_a_request_being_answered_is_never_closed_for_room(h: Running) -> None:
    """At the bound with only requests in progress besides it, a newcomer is the one that goes."""
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, max_connections_per_peer=2, body_timeout=5.0) as server:
        body = review()
        first, second = await Raw.open(server.port, "127.0.0.2"), await Raw.open(server.port, "127.0.0.2")
        try:
            for conn in (first, second):
                await conn.send(head(len(body)) + body)
                assert (await conn.response())[0] == 200
            await second.send(head(len(body)) + body[:10])  # a body under way: waited on, not answered
            third = await Raw.open(server.port, "127.0.0.2")
            await asyncio.sleep(0.1)
            assert closed_now([first, second, third]) == [True, False, False]  # first was idle, kept alive
            await second.send(body[10:])
            assert (await second.response())[0] == 200
            third.close()
        finally:
            first.close()
            second.close()


async def test_bodies_read_at_once_are_bounded_by_closing_the_largest_reader(h: Running) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    async with limited(h, max_bodies=2, body_timeout=5.0) as server:
        body = review()
        slow = [await Raw.open(server.port, "127.0.0.2") for _ in range(2)]
        other = await Raw.open(server.port, "127.0.0.3")
        try:
            for conn in [*slow, other]:
                await conn.send(head(len(body)) + body[:10])
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)
            assert closed_now([*slow, other]) == [True, False, False]
            await other.send(body[10:])
            assert (await other.response())[0] == 200
        finally:
            for conn in [*slow, other]:
                conn.close()


def post_whole_body_then_read(port: int, size: int) -> tuple[int, bytes]:
    """What Python's http.client does: send the head and the whole body, only then read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", PATH, body=b" " * size, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("size", [2 << 20, 10 << 20])
async def test_a_client_that_sends_a_large_body_before_reading_gets_the_413(h: Running, size: int) -> None:
    status, body = await asyncio.to_thread(post_whole_body_then_read, h.server.port, size)
    assert (status, json.loads(body)["reason"]) == (413, "RequestTooLarge")
    assert (await h.client.get("/healthz")).status_code == 200


async def test_a_body_beyond_the_drain_bound_is_not_read(h: Running) -> None:
    async with limited(h, drain_bytes=2 << 20) as server:
        with pytest.raises(ConnectionError):
            await asyncio.to_thread(post_whole_body_then_read, server.port, 10 << 20)


@pytest.mark.parametrize(("header_bytes", "status"), [(16_000, 200), (100_000, 431), (200_000, 431)])
async def test_a_head_is_bounded_whether_it_arrives_whole_or_in_pieces(
    h: Running, header_bytes: int, status: int
) -> None:
    big = b"X-Padding: " + b"a" * header_bytes + b"\r\n"
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n"
    for pieces in (1, 50):
        conn = await Raw.open(h.server.port)
        try:
            step = -(-len(request) // pieces)
            for at in range(0, len(request), step):
                await conn.send(request[at : at + step])
            got, headers, text = await conn.response()
            assert got == status, (pieces, got, text)
            if status == 431:
                assert headers["connection"] == "close" and b"16384 bytes" in text
        finally:
            conn.close()


@pytest.mark.parametrize(
    "body",
    [
        b'{"request":' * 2_000 + b"null" + b"}" * 2_000,
        review().replace(UID.encode(), b"\\ud800"),
        review().replace(b'"name":"arena"', b'"name":"' + b"a" * 100_000 + b'"'),
        review().replace(b'"replicas":4', b'"replicas":' + b"9" * 5_000),
    ],
    ids=["nested-2000-deep", "lone-surrogate-uid", "100k-name", "5000-digit-count"],
)
async def test_odd_bodies_are_400_on_the_wire(h: Running, body: bytes) -> None:
    await h.store.put(fleet_rec(clock=h.clock))
    response = await post(h, body)
    assert response.status_code == 400
    assert response.json().keys() == {"reason", "message"}
    assert response.json()["reason"] == "MalformedRequest"
    assert len(response.content) < 1024  # nothing long is echoed

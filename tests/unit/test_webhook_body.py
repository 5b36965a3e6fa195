"""How the webhook reads a body, driven in memory: refused by Content-Length before a byte is read,
counted while it streams and refused at the limit, refused when it is too slow."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from presage_scaler.serving.agones import MAX_BODY_BYTES, PATH
from presage_scaler.serving.http_server import HttpLimits
from tests.harness.agones import REVIEW, UID, webhook_in_memory

CHUNK = 64 * 1024


class Upload:
    """A request body produced lazily, counting how many chunks the server pulled."""

    def __init__(self, total: int, *, stall_after: int | None = None) -> None:
        self.total = total
        self.stall_after = stall_after
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        while sent < self.total:
            if self.pulled == self.stall_after:
                await asyncio.sleep(3600)
            self.pulled += 1
            chunk = b" " * min(CHUNK, self.total - sent)
            sent += len(chunk)
            yield chunk


def assert_refused(response: httpx.Response, status: int, reason: str) -> None:
    assert response.status_code == status
    assert response.json()["reason"] == reason and response.json()["message"]
    # The rest of the body stays unread: the connection must not be reused.
    assert response.headers["connection"] == "close"


@pytest.mark.parametrize("declared", [str(MAX_BODY_BYTES + 1), "99999999999999", "9" * 5000, "0" * 30 + "9" * 20])
async def test_a_large_content_length_is_refused_before_reading(declared: str) -> None:
    upload = Upload(MAX_BODY_BYTES * 4)
    async with webhook_in_memory() as client:
        response = await client.post(PATH, content=upload, headers={"content-length": declared})
    assert_refused(response, 413, "RequestTooLarge")
    assert upload.pulled == 0


# b"\xb2" is "²" in latin-1, as Starlette decodes headers: a digit to str.isdigit, not to HTTP.
@pytest.mark.parametrize("declared", ["abc", "-1", "1.5", "12, 12", "", b"\xb2"])
async def test_an_invalid_content_length_is_a_bad_request(declared: str | bytes) -> None:
    async with webhook_in_memory() as client:
        response = await client.post(PATH, content=Upload(10), headers={"content-length": declared})
    assert_refused(response, 400, "MalformedRequest")
    assert "Content-Length" in response.json()["message"]


async def test_a_chunked_body_is_counted_and_refused_at_the_limit() -> None:
    upload = Upload(120 << 20)  # no Content-Length: httpx sends it chunked
    async with webhook_in_memory() as client:
        response = await client.post(PATH, content=upload)
    assert_refused(response, 413, "RequestTooLarge")
    assert upload.pulled == MAX_BODY_BYTES // CHUNK + 1  # the chunk that crossed the limit, no further


@pytest.mark.parametrize("declare", [True, False], ids=["content-length", "chunked"])
async def test_a_body_at_the_limit_is_read(declare: bool) -> None:
    review = json.dumps(REVIEW).encode()
    padded = review + b" " * (MAX_BODY_BYTES - len(review))

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(padded), CHUNK):
            yield padded[start : start + CHUNK]

    headers = {"content-length": str(len(padded))} if declare else {}
    async with webhook_in_memory() as client:
        response = await client.post(PATH, content=chunks(), headers=headers)
        assert response.status_code == 200
        assert response.json()["response"] == {"uid": UID, "scale": True, "replicas": 7}
        assert "connection" not in response.headers
        over = await client.post(PATH, content=padded + b" ")
        assert_refused(over, 413, "RequestTooLarge")


async def test_the_limit_is_an_option() -> None:
    async with webhook_in_memory(HttpLimits(max_body_bytes=100)) as client:
        response = await client.post(PATH, content=json.dumps(REVIEW).encode())
    assert_refused(response, 413, "RequestTooLarge")
    assert "exceeds 100 bytes" in response.json()["message"]


async def test_a_stalled_body_is_refused_after_the_timeout() -> None:
    upload = Upload(10 * CHUNK, stall_after=2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with webhook_in_memory(HttpLimits(body_timeout=0.3)) as client:
        response = await client.post(PATH, content=upload)
    assert_refused(response, 408, "RequestTimeout")
    assert "0.3s" in response.json()["message"]
    assert 0.3 <= loop.time() - started < 3.0

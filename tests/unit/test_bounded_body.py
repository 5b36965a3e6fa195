"""read_body over a real loopback socket (tests/harness/local_http.py): bodies up to the limit arrive
whole in every coding presage accepts, one byte past it is refused by whichever count passes it first,
a gzip bomb is refused after inflating no more than the limit, and undecodable bodies are refused as
such, not as too large."""

from __future__ import annotations

import tracemalloc
import zlib

import aiohttp
import pytest
from aiohttp import web

from presage_scaler.backends.bounded_body import (
    ACCEPT_ENCODING,
    BodyTooLarge,
    UnreadableBody,
    excerpt,
    format_bytes,
    read_body,
)
from tests.harness.hostile_json import gzip_bomb
from tests.harness.local_http import Handler, serving

LIMIT = 64 * 1024
CODINGS = ("identity", "gzip", "deflate", "raw-deflate")


def encoded(body: bytes, coding: str) -> bytes:
    if coding == "identity":
        return body
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}[coding]
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(body) + compressor.flush()


def header(coding: str) -> dict[str, str]:
    """The Content-Encoding a server sends: raw deflate goes by "deflate" too (servers send both kinds)."""
    return {} if coding == "identity" else {"Content-Encoding": coding.removeprefix("raw-")}


def answer(body: bytes, headers: dict[str, str], *, declared: int | None = None, chunked: bool = False) -> Handler:
    """A handler answering ``body``: with its own Content-Length, another one (``declared``), or chunked."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if declared is None and not chunked:
            return web.Response(body=body, headers=headers)
        response = web.StreamResponse(headers=headers)
        if declared is not None:
            response.content_length = declared
        else:
            response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for at in range(0, len(body), 8192):
                await response.write(body[at : at + 8192])
        except ConnectionError:
            pass  # the client stopped reading, as it should
        return response

    return handle


async def read(handler: Handler, limit: int = LIMIT) -> bytes:
    async with (
        serving(handler) as url,
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(url, headers={"Accept-Encoding": ACCEPT_ENCODING}) as response,
    ):
        return await read_body(response, limit)


def sample(size: int) -> bytes:
    """``size`` bytes that compress only a little (a body's length, not its ratio, is under test)."""
    return (bytes(range(251)) * (size // 251 + 1))[:size]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("size", [0, 1, LIMIT])
async def test_bodies_up_to_the_limit_arrive_whole(size: int, coding: str, chunked: bool) -> None:
    body = sample(size)
    assert await read(answer(encoded(body, coding), header(coding), chunked=chunked)) == body


@pytest.mark.parametrize(
    ("coding", "chunked", "where"),
    [
        ("identity", False, f"declared in its Content-Length ({LIMIT + 1} bytes)"),
        ("identity", True, "on the wire"),
        ("gzip", False, "once inflated (gzip)"),
        ("deflate", True, "once inflated (deflate)"),
        ("raw-deflate", False, "once inflated (deflate)"),
    ],
)
async def test_one_byte_past_the_limit_is_refused_by_the_count_it_passes(coding: str, chunked: bool, where: str):
    with pytest.raises(BodyTooLarge) as caught:
        await read(answer(encoded(sample(LIMIT + 1), coding), header(coding), chunked=chunked))
    assert (caught.value.limit, caught.value.where) == (LIMIT, where)
    assert str(caught.value) == f"the answer is over the limit of 64 KiB (65536 bytes) {where}"


async def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read():
    """The server declares 1 GiB and sends a few bytes: nothing waits for the rest."""
    with pytest.raises(BodyTooLarge, match=r"declared in its Content-Length \(1073741824 bytes\)"):
        await read(answer(b"{}", {}, declared=1 << 30))


async def test_a_gzip_bomb_is_refused_having_inflated_no_more_than_the_limit():
    """256 MiB of JSON whitespace in 261 kB of gzip, read with a 1 MiB limit: refused, and the reader's
    peak memory stays within a few times the limit (aiohttp's own inflation would hold all 256 MiB)."""
    bomb = gzip_bomb(b"{", 256 << 20, b"}", level=9)
    assert len(bomb) < 300_000
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge, match=r"once inflated \(gzip\)"):
            await read(answer(bomb, {"Content-Encoding": "gzip"}), limit=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"peak {peak} bytes"


async def test_gzip_members_are_read_one_after_another():
    body = encoded(b'{"a": ', "gzip") + encoded(b"[1, 2]}", "gzip")
    assert await read(answer(body, {"Content-Encoding": "gzip"})) == b'{"a": [1, 2]}'


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        # A gzip header, then a deflate block of the reserved type 3.
        (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 20,
            {"Content-Encoding": "gzip"},
            "gzip data is corrupt",
        ),
        (encoded(sample(5000), "gzip")[:-40], {"Content-Encoding": "gzip"}, "gzip data ends early"),
        (encoded(b"{}", "deflate") + b"more", {"Content-Encoding": "deflate"}, "data after the end of its deflate"),
        (b"{}", {"Content-Encoding": "br"}, "Content-Encoding 'br' is not one presage reads"),
    ],
    ids=["corrupt", "truncated", "trailing", "brotli"],
)
async def test_undecodable_bodies_are_unreadable_not_too_large(body: bytes, headers: dict[str, str], message: str):
    with pytest.raises(UnreadableBody, match=message) as caught:
        await read(answer(body, headers))
    assert not isinstance(caught.value, BodyTooLarge)


def test_figures_and_excerpts_stay_short_and_exact():
    assert format_bytes(4 << 20) == "4 MiB (4194304 bytes)"
    assert format_bytes(1536) == "1.5 KiB (1536 bytes)"
    assert format_bytes(12) == "12 bytes"
    assert excerpt("x" * 80) == "x" * 80
    assert excerpt("x" * 5000, 10) == "xxxxxxxxxx... (5000 characters)"

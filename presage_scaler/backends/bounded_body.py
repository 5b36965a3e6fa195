"""Reading an HTTP answer within a byte bound, on the wire and once inflated.

What presage reads from an endpoint a user names (a PredictiveScaler's Prometheus address, a
ForecastBackend's endpoint) is decided by that endpoint. Read whole, an answer takes as much memory as
it is long, and aiohttp inflates ``Content-Encoding: gzip`` as it arrives: a few hundred kB of gzip
become hundreds of MiB. :func:`read_body` bounds both, so an answer costs at most its ``limit`` in
memory however it is encoded:

* a declared ``Content-Length`` over the limit is refused before any of the body is read;
* the bytes on the wire are counted as they arrive, in chunks of :data:`CHUNK_BYTES`;
* gzip and deflate are inflated here with ``zlib``'s ``max_length``, never more than one byte past the
  limit; the response must have been requested with ``auto_decompress=False`` and
  ``Accept-Encoding:`` :data:`ACCEPT_ENCODING`, so no other coding arrives from a conforming server.

It lives in ``backends`` because that is the lowest package with an HTTP client (the TimesFM
backend); the Prometheus client, above it, reads through the same code.
"""

from __future__ import annotations

import zlib

import aiohttp
from aiohttp import hdrs

ACCEPT_ENCODING = "gzip, deflate"
"""The content codings :func:`read_body` inflates; sent as ``Accept-Encoding`` so servers use no other."""

CHUNK_BYTES = 64 * 1024
"""How much of the body is taken from the connection at a time (aiohttp's own read buffer size)."""


class UnreadableBody(Exception):
    """The body could not be read: a content coding presage does not inflate, or corrupt data."""


class BodyTooLarge(UnreadableBody):
    """The body is over the limit; ``where`` says which count went over it (declared, wire, inflated)."""

    def __init__(self, limit: int, where: str) -> None:
        super().__init__(f"the answer is over the limit of {format_bytes(limit)} {where}")
        self.limit = limit
        self.where = where


def format_bytes(count: int) -> str:
    """``4 MiB (4194304 bytes)``: the figure a user compares with, and the exact one."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:g} {unit} ({count} bytes)"
    return f"{count} bytes"


def excerpt(text: str, length: int = 80) -> str:
    """``text`` cut to ``length`` characters: what an endpoint answers ends up in error and condition
    messages, which must stay short enough to write (and to read)."""
    return text if len(text) <= length else f"{text[:length]}... ({len(text)} characters)"


class _Inflater:
    """gzip or deflate data inflated to at most ``limit`` bytes in all; gzip members may follow each
    other (RFC 1952), and a deflate body may come with or without its zlib header (servers send both)."""

    def __init__(self, coding: str, limit: int) -> None:
        self._coding = coding
        self._room = limit
        self._limit = limit
        self._zlib: zlib._Decompress | None = None

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        while data:
            if self._zlib is None:
                self._zlib = zlib.decompressobj(self._wbits(data))
            try:
                # One byte past the room left proves the limit is passed without inflating further.
                piece = self._zlib.decompress(data, self._room + 1)
            except zlib.error as err:
                raise UnreadableBody(f"the answer's {self._coding} data is corrupt ({err})") from err
            if len(piece) > self._room:
                raise BodyTooLarge(self._limit, f"once inflated ({self._coding})")
            self._room -= len(piece)
            out += piece
            # Output under max_length means every input byte was used, up to the end of a member.
            data = self._zlib.unused_data if self._zlib.eof else b""
            if self._zlib.eof:
                if data and self._coding == "deflate":
                    raise UnreadableBody("the answer has data after the end of its deflate stream")
                self._zlib = None
        return bytes(out)

    def finish(self) -> None:
        if self._zlib is not None and not self._zlib.eof:
            raise UnreadableBody(f"the answer's {self._coding} data ends early")

    def _wbits(self, data: bytes) -> int:
        if self._coding == "gzip":
            return 16 + zlib.MAX_WBITS
        # A zlib header's first byte names method 8 (deflate) in its low bits; raw deflate has none.
        return zlib.MAX_WBITS if data[0] & 0x0F == 8 else -zlib.MAX_WBITS


def _inflater(response: aiohttp.ClientResponse, limit: int) -> _Inflater | None:
    coding = response.headers.get(hdrs.CONTENT_ENCODING, "identity").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip"):
        return _Inflater("gzip", limit)
    if coding == "deflate":
        return _Inflater("deflate", limit)
    raise UnreadableBody(f"the answer's Content-Encoding {coding[:40]!r} is not one presage reads ({ACCEPT_ENCODING})")


async def read_body(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body of ``response``, inflated, when it is at most ``limit`` bytes on the wire and inflated.

    Raises :class:`BodyTooLarge` as soon as a count passes ``limit`` (what was read is dropped; leaving
    the response's context then closes the connection instead of draining it), and
    :class:`UnreadableBody` for a coding it does not inflate or corrupt data. Transport errors and
    timeouts are aiohttp's, as from ``response.read()``.
    """
    declared = response.content_length
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit, f"declared in its Content-Length ({declared} bytes)")
    inflater = _inflater(response, limit)
    body = bytearray()
    wire = 0
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        wire += len(chunk)
        if wire > limit:
            raise BodyTooLarge(limit, "on the wire")
        body += chunk if inflater is None else inflater.feed(chunk)
    if inflater is not None:
        inflater.finish()
    return bytes(body)

"""What large webhook bodies cost the scaler's HTTP server, measured in its own process.

Six 120 MiB bodies posted at once, streamed lazily so the client never holds one: the server must
stop reading each at the 1 MiB limit, so its peak resident memory grows by a few MiB, not by the
720 MiB it would take to buffer them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from presage_scaler.serving.agones import PATH
from tests.harness.agones import REVIEW
from tests.harness.scaler_http import ScalerHttpProcess

pytestmark = pytest.mark.integration

UPLOADS = 6
UPLOAD_BYTES = 120 << 20
CHUNK = 64 * 1024
MAX_GROWTH_KIB = 32 << 10


@pytest.fixture(scope="module")
def server() -> Iterator[ScalerHttpProcess]:
    with ScalerHttpProcess() as process:
        yield process


async def chunks(sent: list[int]) -> AsyncIterator[bytes]:
    """120 MiB of valid-looking JSON whitespace, 64 KiB at a time, counting what left the client."""
    chunk = b" " * CHUNK
    while sent[0] < UPLOAD_BYTES:
        sent[0] += CHUNK
        yield chunk


async def upload(client: httpx.AsyncClient, sent: list[int], declared: bool) -> int | str:
    """The status, or the transport error's name when the server closed before the client read it."""
    headers = {"content-length": str(UPLOAD_BYTES)} if declared else {}
    try:
        response = await client.post(PATH, content=chunks(sent), headers=headers)
    except httpx.TransportError as exc:
        return type(exc).__name__
    return response.status_code


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
async def test_concurrent_huge_bodies_do_not_grow_memory(server: ScalerHttpProcess, declared: bool) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as client:
        assert (await client.post(PATH, content=json.dumps(REVIEW))).status_code == 200
        before = server.memory_kib("VmHWM")
        sent = [[0] for _ in range(UPLOADS)]
        outcomes = await asyncio.gather(*(upload(client, count, declared) for count in sent))
        after = server.memory_kib("VmHWM")
        print(f"peak RSS {before} KiB -> {after} KiB; outcomes {outcomes}; sent MiB {[s[0] >> 20 for s in sent]}")
        assert after - before < MAX_GROWTH_KIB, outcomes
        # Refused at the limit: no client got its whole body through.
        assert all(count[0] < UPLOAD_BYTES for count in sent), outcomes
        assert all(outcome in (413, "WriteError", "RemoteProtocolError", "ReadError") for outcome in outcomes)
        assert (await client.post(PATH, content=json.dumps(REVIEW))).status_code == 200

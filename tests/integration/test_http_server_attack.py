"""One address holding a thousand idle connections starves no other client of the scaler's HTTP server.

The server runs in its own process with its default limits; the attacker in another
(:mod:`tests.harness.idle_connections`), from 127.0.0.2, keeps reopening every connection the server
closes (after 1 s on average: several hundred connections a second, where the attack reported
against the unbounded server reconnected 7.5 a second). The client measured here connects from 127.0.0.1 (Linux
routes all of 127/8 to the loopback interface, so the server sees two peers). Every probe and every
Agones review for a minute must be answered 200 within a second, on a fresh connection each, as the
kubelet makes its probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterator

import httpx
import pytest

from presage_scaler.serving.agones import PATH
from presage_scaler.serving.http_server import ACCEPTS_PER_TURN, DEFAULT_LIMITS
from tests.harness.agones import REVIEW
from tests.harness.idle_connections import IdleConnections, raise_open_files_limit
from tests.harness.scaler_http import ScalerHttpProcess

pytestmark = pytest.mark.integration

ATTACKER = "127.0.0.2"
CLIENT = "127.0.0.1"
CONNECTIONS = 1000
REOPEN_AFTER = 1.0
SECONDS = 60.0
ANSWER_WITHIN = 1.0


@pytest.fixture(scope="module")
def server() -> Iterator[ScalerHttpProcess]:
    raise_open_files_limit(CONNECTIONS + 256)
    with ScalerHttpProcess() as process:
        yield process


def open_sockets(pid: int) -> int:
    """The sockets process ``pid`` has open (those closed while counting are not)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


async def test_a_thousand_idle_connections_from_one_address_starve_no_other_client(
    server: ScalerHttpProcess, tmp_path
) -> None:
    transport = httpx.AsyncHTTPTransport(local_address=CLIENT, limits=httpx.Limits(max_keepalive_connections=0))
    failures: list[str] = []
    slowest = 0.0
    asked = 0
    most_sockets = 0
    assert server.pid is not None
    with IdleConnections(
        "127.0.0.1", server.port, count=CONNECTIONS, source=ATTACKER, reopen_after=REOPEN_AFTER, workdir=tmp_path
    ) as attack:
        async with httpx.AsyncClient(base_url=server.url, transport=transport, timeout=5.0) as client:
            ended = time.monotonic() + SECONDS
            while time.monotonic() < ended:
                for method, path, body in (("GET", "/healthz", None), ("POST", PATH, json.dumps(REVIEW))):
                    started = time.monotonic()
                    try:
                        response = await client.request(method, path, content=body)
                        outcome = f"{response.status_code} {response.text[:80]!r}"
                        ok = response.status_code == 200
                    except httpx.HTTPError as exc:
                        outcome, ok = repr(exc), False
                    took = time.monotonic() - started
                    asked += 1
                    slowest = max(slowest, took)
                    if not ok or took > ANSWER_WITHIN:
                        failures.append(f"{method} {path} after {took:.2f}s: {outcome}")
                most_sockets = max(most_sockets, open_sockets(server.pid))
                await asyncio.sleep(0.25)
        totals = attack.stop()
    print(f"{asked} requests, slowest {slowest:.3f}s; attacker {totals}; server sockets at most {most_sockets}")
    assert not failures, f"{len(failures)} of {asked} failed or slow, e.g. {failures[:5]}"
    # The attack was real: a thousand connections opened, and the server kept closing them.
    assert totals.opened >= CONNECTIONS and totals.closed_by_server >= CONNECTIONS - 200
    # What it held was bounded by the per-address limit, not by its count. asyncio takes three turns of
    # the loop from accepting a socket to closing it for room (accept; build its transport; our
    # connection_made closes the oldest, whose socket goes a turn later), and each turn accepts up to
    # ACCEPTS_PER_TURN: so at most three turns' worth are open beside those held, plus a few of the
    # server's own (listeners, the client's connection).
    assert most_sockets <= DEFAULT_LIMITS.max_connections_per_peer + 3 * ACCEPTS_PER_TURN + 16

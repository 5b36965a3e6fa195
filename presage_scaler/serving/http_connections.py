"""What one client's connections may cost an HTTP listener, and which connections go when it is full.

Each listener of :mod:`~presage_scaler.serving.http_server` counts its connections by peer address
(the TCP peer, never a header) and knows, of each, whether the server is *waiting on the client*:
for a request head, for the rest of a body, for a response to be read, or while draining a refused
body. Those connections cost the server nothing but memory and a file descriptor, so they are what
goes when a bound is reached; a connection whose request is being answered is never closed for room.

* A peer's connection beyond ``max_connections_per_peer`` closes that peer's oldest waiting one (the
  newcomer itself when it is the peer's only one waiting).
* A connection beyond ``max_connections`` closes the oldest waiting connection of the peer with the
  most waiting connections: one address holding idle connections loses them, and a newcomer from
  any other address is served.
* A body beyond ``max_bodies`` read at once closes the oldest body being read by the peer with the
  most bodies being read, so at most ``max_bodies × max_body_bytes`` of bodies is buffered.

Oldest means waiting longest since the server last answered it or it opened: a client trickling
bytes does not become younger. Nothing is refused for everyone: a newcomer from an address with no
waiting connections is admitted whatever others hold.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from presage_scaler.serving import agones


@dataclass(frozen=True)
class HttpLimits:
    """What clients may cost a listener. The defaults are generous for Agones (a review of ~1 KiB
    every sync period per Fleet), Prometheus and the kubelet, and bound what abusive clients' heads
    and bodies hold to about 100 MiB per listener (1,024 heads of 16 KiB, 64 bodies of 1 MiB); a
    response nobody reads is held for ``response_timeout`` at most."""

    max_body_bytes: int = agones.MAX_BODY_BYTES
    """The largest webhook body read; a larger one is refused with 413."""
    body_timeout: float = 10.0
    """Seconds from the request head to the last byte of its body; a slower body is refused with 408."""
    head_timeout: float = 10.0
    """Seconds a connection may take to send a complete request head, from opening or its last response."""
    max_head_bytes: int = 16 << 10
    """The largest request head (request line and headers); a larger one is refused with 431."""
    drain_bytes: int = 16 << 20
    """After a response that leaves a body unread (413, 408, a body nobody asked for), up to this many
    more bytes are read and discarded before the connection is closed, so that a client that sends its
    whole body before reading sees the status instead of a reset. A declared body longer than this is
    not drained: its connection is closed at once."""
    drain_timeout: float = 5.0
    """Seconds a drain may take."""
    response_timeout: float = 10.0
    """Seconds a client may leave the server's send buffer full (a response it does not read) before
    the connection is closed."""
    max_connections: int = 1024
    """Open connections on one listener; beyond it the waiting connection of the peer with the most
    waiting connections that has waited longest is closed."""
    max_connections_per_peer: int = 128
    """Open connections from one peer address; beyond it that peer's longest-waiting one is closed."""
    max_bodies: int = 64
    """Request bodies read at once on one listener; beyond it the peer reading the most loses its oldest."""


_HEAD_END = re.compile(rb"\n\r?\n")  # where h11 ends a request head: a blank line, CR optional


class _Waiting:
    """Connections by peer, each peer's in the order they began waiting, and which peer has the most."""

    def __init__(self) -> None:
        self._by_peer: dict[str, dict[BoundedH11Protocol, None]] = {}
        # _peers_with[n]: the peers with n connections here; the last entry is never empty.
        self._peers_with: list[dict[str, None]] = [{}]
        self.total = 0

    def add(self, conn: BoundedH11Protocol) -> None:
        """Count ``conn`` as the newest of its peer's; no change when it is counted already."""
        queue = self._by_peer.setdefault(conn.peer, {})
        if conn not in queue:
            queue[conn] = None
            self._resized(conn.peer, len(queue))
            self.total += 1

    def discard(self, conn: BoundedH11Protocol) -> None:
        queue = self._by_peer.get(conn.peer)
        if queue is not None and conn in queue:
            del queue[conn]
            self._resized(conn.peer, len(queue))
            self.total -= 1
            if not queue:
                del self._by_peer[conn.peer]

    def oldest_of(self, peer: str) -> BoundedH11Protocol | None:
        return next(iter(self._by_peer.get(peer, ())), None)

    def oldest_of_the_largest(self) -> BoundedH11Protocol | None:
        """The longest-waiting connection of the peer with the most (ties: whichever came first)."""
        if len(self._peers_with) == 1:
            return None
        return self.oldest_of(next(iter(self._peers_with[-1])))

    def _resized(self, peer: str, size: int) -> None:
        """Move ``peer`` from the bucket of its previous size (one more or one fewer) to ``size``'s."""
        for old in (size - 1, size + 1):
            if 0 < old < len(self._peers_with):
                self._peers_with[old].pop(peer, None)
        if size > 0:
            if size == len(self._peers_with):
                self._peers_with.append({})
            self._peers_with[size][peer] = None
        while len(self._peers_with) > 1 and not self._peers_with[-1]:
            self._peers_with.pop()


class ListenerConnections:
    """One listener's connections, and the bounds of :class:`HttpLimits` applied to them."""

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self._open: dict[str, int] = {}
        self._counted: set[BoundedH11Protocol] = set()
        self._waiting = _Waiting()
        self._bodies = _Waiting()

    def opened(self, conn: BoundedH11Protocol) -> None:
        """Count a new connection (waiting for its first head) and make room for it if need be."""
        self._counted.add(conn)
        self._open[conn.peer] = self._open.get(conn.peer, 0) + 1
        self._waiting.add(conn)
        if self._open[conn.peer] > self.limits.max_connections_per_peer:
            self._close(self._waiting.oldest_of(conn.peer))
        if len(self._counted) > self.limits.max_connections:
            self._close(self._waiting.oldest_of_the_largest())

    def waiting(self, conn: BoundedH11Protocol, *, body: bool) -> None:
        """The server waits on ``conn``'s client; ``body``: for a body it buffers."""
        if conn not in self._counted:
            return
        self._waiting.add(conn)
        if not body:
            self._bodies.discard(conn)
            return
        self._bodies.add(conn)
        if self._bodies.total > self.limits.max_bodies:
            self._close(self._bodies.oldest_of_the_largest())

    def busy(self, conn: BoundedH11Protocol) -> None:
        """The server is answering ``conn``: it is not closed for room."""
        self._waiting.discard(conn)
        self._bodies.discard(conn)

    def closed(self, conn: BoundedH11Protocol) -> None:
        """Stop counting ``conn`` (closed, or closing for room); a second call changes nothing."""
        if conn not in self._counted:
            return
        self._counted.discard(conn)
        self.busy(conn)
        left = self._open[conn.peer] - 1
        if left > 0:
            self._open[conn.peer] = left
        else:
            del self._open[conn.peer]

    def _close(self, conn: BoundedH11Protocol | None) -> None:
        """Close ``conn`` for room, and stop counting it now: the next newcomer of the same batch of
        accepted connections must find the next one, not the same."""
        if conn is not None:
            self.closed(conn)
            conn.transport.close()


class _CycleTransport:
    """The transport as a request's cycle sees it: uvicorn closes it after a ``Connection: close``
    response, and that close goes through :meth:`BoundedH11Protocol.close_after_response`."""

    def __init__(self, protocol: BoundedH11Protocol) -> None:
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        self._protocol.transport.write(data)

    def is_closing(self) -> bool:
        return self._protocol.transport.is_closing()

    def close(self) -> None:
        self._protocol.close_after_response()


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under :class:`ListenerConnections`' bounds, with deadlines, a head
    size limit and a drain before closing on a body left unread.

    uvicorn arms no timer before a connection's first request and restarts its keep-alive timer on
    every byte, so a client sending a header a byte at a time would keep its connection forever: the
    head deadline is armed when the connection opens and after each response, and when it fires the
    connection is closed unanswered (HTTP has no response to a request not yet made). h11 bounds only
    a head that arrives in pieces; the size of each head is counted here as it arrives, whole or not.
    """

    def __init__(self, *args: Any, connections: ListenerConnections, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections = connections
        self._limits = connections.limits
        self.peer = ""
        self._head_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._drain_deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # of the head awaited, so far
        self._head_tail = b""  # its last bytes, where a blank line may begin
        self._drained: int | None = None  # bytes discarded since the drain began; None: not draining
        self._lost = False

    # -- connection events

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self._connections.opened(self)
        self._settle()

    def data_received(self, data: bytes) -> None:
        if self._drained is not None:
            self._drained += len(data)
            if self._drained > self._limits.drain_bytes:
                self.transport.close()
            return
        if self.conn.their_state is h11.IDLE and self._head_too_large(data):
            self._refuse_head()
            return
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._drained is not None:
            self._unset_keepalive_if_required()  # armed by uvicorn; the drain has its own deadline
        elif not self.transport.is_closing() and self.conn.their_state is h11.SEND_BODY:
            self.close_after_response()  # answered before its body ended (a GET with a body)
        else:
            self._settle()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._write_deadline = self.loop.call_later(self._limits.response_timeout, self.transport.close)
        self._connections.waiting(self, body=False)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        self._settle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        for deadline in (self._head_deadline, self._write_deadline, self._drain_deadline):
            if deadline is not None:
                deadline.cancel()
        self._connections.closed(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:
            self.cycle.transport = _CycleTransport(self)  # type: ignore[assignment]

    # -- what the server waits for

    def _settle(self) -> None:
        """Tell the listener whether the server waits on this client, and arm the head deadline
        while it waits for a head."""
        if self._lost or self.transport.is_closing() or self._drained is not None:
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._head_deadline is None:
                self._head_bytes, self._head_tail = 0, b""
                self._head_deadline = self.loop.call_later(self._limits.head_timeout, self.timeout_keep_alive_handler)
            self._connections.waiting(self, body=False)
            return
        self._disarm_head_deadline()
        if self.flow.write_paused:
            self._connections.waiting(self, body=False)
        elif state is h11.SEND_BODY:
            reading = self.cycle is not None and not self.cycle.response_complete
            self._connections.waiting(self, body=reading)
        else:
            self._connections.busy(self)

    def _head_too_large(self, data: bytes) -> bool:
        end = _HEAD_END.search(self._head_tail + data)
        seen = len(data) if end is None else end.end() - len(self._head_tail)
        self._head_bytes += seen
        self._head_tail = (self._head_tail + data)[-2:]
        return self._head_bytes > self._limits.max_head_bytes

    def _refuse_head(self) -> None:
        message = f"request head exceeds {self._limits.max_head_bytes} bytes\n".encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(message)).encode()),
            (b"connection", b"close"),
        ]
        for event in (h11.Response(status_code=431, headers=headers), h11.Data(data=message), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event) or b"")
        self._drain()

    # -- closing

    def close_after_response(self) -> None:
        """Close once the response is out; if the client is still sending a body we may read to its
        end, read and discard it first (bounded), so the client reads the response rather than a reset."""
        declared = dict(self.headers or ()).get(b"content-length", b"").lstrip(b"0")
        limit = self._limits.drain_bytes
        # The length test first: int() refuses strings of more than 4300 digits.
        too_long = declared.isdigit() and (len(declared) > len(str(limit)) or int(declared) > limit)
        if self._lost or self.conn.their_state is not h11.SEND_BODY or too_long:
            self.transport.close()
        else:
            self._drain()

    def _drain(self) -> None:
        self._drained = 0
        self._disarm_head_deadline()
        self._unset_keepalive_if_required()
        self._connections.waiting(self, body=False)
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the response is complete: say so at once
        self.flow.resume_reading()
        self._drain_deadline = self.loop.call_later(self._limits.drain_timeout, self.transport.close)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

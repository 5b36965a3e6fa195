"""The idle-connection attack: many connections from one address, each sending a request head that never ends.

Each connection sends ``GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n`` and no closing blank line, then
waits; whenever the server closes one, it is opened again after ``reopen_after`` seconds on average
(uniformly between none and twice that, so reconnections arrive steadily, not in waves), so the
attacker keeps trying to hold ``count`` connections. It runs as a process of its own
(``python -m tests.harness.idle_connections HOST PORT --count N --source ADDRESS``), so that its work
does not slow the client that measures the server; :class:`IdleConnections` starts it, waits until
it has opened every connection once, and reads what it did when stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.harness.process import ServerProcess

HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
_REPO = Path(__file__).resolve().parents[2]
_HOLDING = "holding"
_TOTALS = re.compile(r"^opened=(\d+) closed_by_server=(\d+) held=(\d+)$", re.MULTILINE)


class AttackFailed(RuntimeError):
    """The attacker process did not start, or did not open its connections."""


@dataclass(frozen=True)
class AttackTotals:
    opened: int
    closed_by_server: int
    held: int  # open when it stopped


def raise_open_files_limit(needed: int) -> None:
    """Raise this process's soft limit on open files to at least ``needed`` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class IdleConnections:
    """The attack as a process, against ``host:port`` from ``source``; a context manager."""

    def __init__(
        self, host: str, port: int, *, count: int, source: str, reopen_after: float = 1.0, workdir: Path | None = None
    ) -> None:
        self.argv = [
            sys.executable,
            "-m",
            "tests.harness.idle_connections",
            host,
            str(port),
            f"--count={count}",
            f"--source={source}",
            f"--reopen-after={reopen_after}",
        ]
        self.log_path = (workdir or Path(tempfile.mkdtemp(prefix="idle-connections-"))) / f"attack-{port}.log"
        self._process: ServerProcess | None = None
        self.totals: AttackTotals | None = None

    def start(self, timeout: float = 60.0) -> IdleConnections:
        self._process = ServerProcess("idle-connections", self.argv, self.log_path, error=AttackFailed, cwd=_REPO)
        deadline = time.monotonic() + timeout
        while _HOLDING not in self._process.log_tail():
            if not self._process.running or time.monotonic() > deadline:
                tail = self._process.log_tail()
                self._process.stop()
                raise AttackFailed(f"the attacker did not open its connections:\n{tail}")
            time.sleep(0.05)
        return self

    def stop(self) -> AttackTotals:
        """Stop the attack; its totals."""
        if self._process is not None:
            self._process.stop()
            self._process = None
            found = _TOTALS.findall(self.log_path.read_text())
            if not found:
                raise AttackFailed(f"the attacker reported nothing:\n{self.log_path.read_text()[-2000:]}")
            self.totals = AttackTotals(*(int(n) for n in found[-1]))
        assert self.totals is not None
        return self.totals

    def __enter__(self) -> IdleConnections:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _attack(host: str, port: int, count: int, source: str, reopen_after: float) -> None:
    opened = closed = 0
    held: set[int] = set()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    first_round = asyncio.Barrier(count + 1)

    async def hold(slot: int) -> None:
        nonlocal opened, closed
        first = True
        while not stop.is_set():
            writer = None
            try:
                reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
                opened += 1
                held.add(slot)
                writer.write(HALF_HEAD)
                if first:
                    first = False
                    await first_round.wait()
                while await reader.read(65536):
                    pass  # whatever the server sends; only its close matters
                closed += 1
            except OSError:
                closed += 1
            finally:
                held.discard(slot)
                if writer is not None:
                    writer.close()
            if first:
                first = False
                await first_round.wait()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(random.uniform(0, 2 * reopen_after)):
                    await stop.wait()

    tasks = [asyncio.create_task(hold(slot)) for slot in range(count)]
    await first_round.wait()
    print(f"{_HOLDING} opened={opened} held={len(held)}", flush=True)
    await stop.wait()
    held_at_stop = len(held)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"opened={opened} closed_by_server={closed} held={held_at_stop}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--source", default="127.0.0.2", help="the address the connections come from")
    parser.add_argument("--reopen-after", type=float, default=1.0, help="mean seconds before a closed one is reopened")
    args = parser.parse_args()
    raise_open_files_limit(args.count + 64)
    # On another machine the attacker's work would cost the server nothing; on this one it yields
    # the CPU to the server and the measuring client whenever they want it.
    os.nice(10)
    asyncio.run(_attack(args.host, args.port, args.count, args.source, args.reopen_after))


if __name__ == "__main__":
    main()

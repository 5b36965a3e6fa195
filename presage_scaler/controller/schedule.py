"""When each scaler is evaluated: a heap of due times, one run per scaler at a time, a bound on
runs in all, and nothing while this replica is not the leader (the heap is kept meanwhile) or,
sharded, for a scaler whose shard it does not own (dropped when due: gaining the shard schedules
its scalers again)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")

Work = Callable[[K], Awaitable[float | None]]
"""One run for a key; returns seconds from the start of this run until its next, or None to schedule
it no more. It must not raise (a raise ends :meth:`Scheduler.run`).

Counted from the start, so a key returning its interval runs once per interval while its runs are
short: counted from their end, each run's duration (and its wait for a free slot) would be added to
every interval, and a controller with 10,000 scalers at 1m, each run a few seconds under load, would
evaluate each every 64 s, not 60. A long run is followed no sooner than its own duration (at most
the delay) after it ends, so a key whose runs hang until their deadline (a scaler whose Prometheus
does not answer) holds one of the ``concurrency`` slots at most half the time, not all of it; a
run that outlasts the delay is followed one delay after it ends.

The scheduler waits with ``asyncio.timeout``, never ``asyncio.wait_for`` (the lint bans it): on
Python 3.11 ``wait_for`` returns its awaitable's result when it is cancelled just as that result
arrives, so a scheduler woken by a finished evaluation at the moment of shutdown would ignore the
cancellation, find itself no longer leading and wait forever, and the process would never exit."""


class Scheduler(Generic[K]):
    """Runs each scheduled key's work when it is due: one run per key at a time, ``concurrency``
    at a time in all, only while ``leading()``."""

    def __init__(
        self, *, concurrency: int, leading: Callable[[], bool], may_run: Callable[[K], bool] = lambda key: True
    ) -> None:
        self._leading = leading
        self._may_run = may_run
        self._semaphore = asyncio.Semaphore(concurrency)
        self._heap: list[tuple[float, int, K]] = []
        self._tickets: dict[K, int] = {}  # the one heap entry per key that counts; older ones are skipped
        self._running: set[K] = set()
        self._sequence = itertools.count()
        self._wake = asyncio.Event()
        self.started = 0  # runs started
        self.started_late = 0.0  # seconds those runs started after they were due, in all

    def schedule(self, key: K, delay: float) -> None:
        """Run ``key`` in ``delay`` seconds, replacing when it was due before."""
        self._schedule_at(key, time.monotonic() + delay)

    def _schedule_at(self, key: K, due: float) -> None:
        ticket = self._tickets[key] = next(self._sequence)
        heapq.heappush(self._heap, (due, ticket, key))
        self._wake.set()

    def forget(self, key: K) -> None:
        """Run ``key`` no more (a run in progress finishes)."""
        self._tickets.pop(key, None)

    @property
    def running(self) -> frozenset[K]:
        """The keys whose run is in progress."""
        return frozenset(self._running)

    def wake(self) -> None:
        """Look at the heap again now (leadership was gained)."""
        self._wake.set()

    async def run(self, work: Work[K]) -> None:
        async with asyncio.TaskGroup() as group:
            while True:
                self._wake.clear()
                if not self._leading() or not self._heap:
                    await self._wake.wait()
                    continue
                due, ticket, key = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await self._wake.wait()
                    continue
                heapq.heappop(self._heap)
                if self._tickets.get(key) != ticket or key in self._running:
                    continue  # forgotten, superseded, or running (that run reschedules it)
                if not self._may_run(key):
                    continue  # another replica's shard
                self._running.add(key)
                await self._semaphore.acquire()
                group.create_task(self._run_one(key, work, due))

    async def _run_one(self, key: K, work: Work[K], due: float) -> None:
        started = time.monotonic()
        self.started += 1
        self.started_late += max(started - due, 0.0)
        try:
            delay = await work(key)
        finally:
            self._running.discard(key)
            self._semaphore.release()
        if delay is not None and key in self._tickets:
            ended = time.monotonic()
            self._schedule_at(key, max(started + delay, ended + min(ended - started, delay)))

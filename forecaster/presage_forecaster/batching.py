"""Micro-batching: series from concurrent requests share one forward pass.

A request's series are queued together. The batching loop takes the first queued series, then keeps
taking more until ``window`` has passed since it took the first, ``max_batch`` series are in hand,
or (when the window is 0) the queue is empty; then it runs them as one batch on a single worker
thread, so the event loop keeps accepting requests — and the queue keeps filling — during the pass.
Each series' result is what it would be alone: the engine pads and scales per series
(see engine.py), and a regression test compares batched results with single ones.

The batch decodes the longest horizon among its series; a shorter request takes its first steps
(the decode always runs to the compiled ``maxHorizon`` anyway, so this costs nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from presage_forecaster.metrics import Metrics

log = logging.getLogger("presage_forecaster")

RunBatch = Callable[[Sequence[np.ndarray], int], np.ndarray]


class Overloaded(Exception):
    """Too many series are already waiting: refuse now rather than queue without bound."""


@dataclass
class _Job:
    values: np.ndarray
    horizon: int
    future: asyncio.Future[np.ndarray]
    queued: float


class MicroBatcher:
    """Coalesces queued series into batches of at most ``max_batch`` within ``window`` seconds."""

    def __init__(self, run: RunBatch, *, window: float, max_batch: int, max_queued: int, metrics: Metrics) -> None:
        self._run = run
        self.window = window
        self.max_batch = max_batch
        self.max_queued = max_queued
        self._metrics = metrics
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forward")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the batching loop on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="micro-batcher")

    async def stop(self) -> None:
        """Stop the loop; queued series fail with ``RuntimeError``."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if not job.future.done():
                job.future.set_exception(RuntimeError("the server is shutting down"))
        self._worker.shutdown(wait=False, cancel_futures=True)

    async def forecast(self, series: Sequence[np.ndarray], horizon: int) -> list[np.ndarray]:
        """Forecasts (``horizon × 10`` each) of ``series``, in order, batched with whatever else is queued.

        Raises :class:`Overloaded` when queueing them would put more than ``max_queued`` series in line.
        """
        waiting = self._queue.qsize()
        if waiting + len(series) > self.max_queued:
            raise Overloaded(
                f"{waiting} series are already waiting for a forward pass and this request adds {len(series)}; "
                f"the limit is {self.max_queued} (--max-queued-series); retry shortly"
            )
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        jobs = [_Job(s, horizon, loop.create_future(), now) for s in series]
        for job in jobs:  # no await in between: a request's series are queued together
            self._queue.put_nowait(job)
        try:
            return list(await asyncio.gather(*(job.future for job in jobs)))
        finally:
            for job in jobs:  # the caller went away: the loop skips what is still queued
                job.future.cancel()

    async def _collect(self) -> list[_Job]:
        batch = [await self._queue.get()]
        deadline = time.monotonic() + self.window
        while len(batch) < self.max_batch:
            if not self._queue.empty():
                batch.append(self._queue.get_nowait())
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    batch.append(await self._queue.get())
            except TimeoutError:
                break
        return [job for job in batch if not job.future.done()]

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            if not batch:
                continue
            began = time.monotonic()
            for job in batch:
                self._metrics.queue_wait.observe(began - job.queued)
            self._metrics.batch_size.observe(len(batch))
            horizon = max(job.horizon for job in batch)
            try:
                out = await loop.run_in_executor(self._worker, self._run, [job.values for job in batch], horizon)
            except Exception as err:
                log.exception("forward pass failed batch=%d", len(batch))
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(err)
                continue
            finally:
                self._metrics.forward_seconds.observe(time.monotonic() - began)
            for job, result in zip(batch, out, strict=True):
                if not job.future.done():
                    job.future.set_result(result[: job.horizon])

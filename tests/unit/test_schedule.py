"""The controller's scheduler: due order, one run per key, the concurrency bound, leadership, forget."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from presage_scaler.controller.schedule import Scheduler

Work = Callable[[str], Awaitable[float | None]]


@contextlib.asynccontextmanager
async def running(scheduler: Scheduler[str], work: Work) -> AsyncIterator[None]:
    task = asyncio.create_task(scheduler.run(work))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_keys_run_in_due_order():
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: True)
    started: list[str] = []
    done = asyncio.Event()

    async def work(key: str) -> None:
        started.append(key)
        if len(started) == 3:
            done.set()

    scheduler.schedule("a", 0.06)
    scheduler.schedule("b", 0.0)
    scheduler.schedule("c", 0.03)
    async with running(scheduler, work):
        await asyncio.wait_for(done.wait(), 5)
    assert started == ["b", "c", "a"]


async def test_a_key_runs_once_at_a_time_and_its_run_reschedules_it():
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: True)
    release, first_started, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()
    runs, in_flight, most = 0, 0, 0

    async def work(key: str) -> float | None:
        nonlocal runs, in_flight, most
        runs += 1
        in_flight += 1
        most = max(most, in_flight)
        first_started.set()
        await release.wait()
        in_flight -= 1
        if runs == 2:
            finished.set()
            return None
        return 0.0

    scheduler.schedule("a", 0.0)
    async with running(scheduler, work):
        await asyncio.wait_for(first_started.wait(), 5)
        scheduler.schedule("a", 0.0)  # due again while running: that run's answer decides
        for _ in range(20):
            await asyncio.sleep(0)
        assert runs == 1
        release.set()
        await asyncio.wait_for(finished.wait(), 5)
    assert (runs, most) == (2, 1)


async def test_no_more_runs_than_the_concurrency_at_once():
    scheduler: Scheduler[str] = Scheduler(concurrency=2, leading=lambda: True)
    release, two_running, all_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    in_flight, most, done = 0, 0, 0

    async def work(key: str) -> None:
        nonlocal in_flight, most, done
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 2:
            two_running.set()
        await release.wait()
        in_flight -= 1
        done += 1
        if done == 5:
            all_done.set()

    for key in "abcde":
        scheduler.schedule(key, 0.0)
    async with running(scheduler, work):
        await asyncio.wait_for(two_running.wait(), 5)
        for _ in range(20):
            await asyncio.sleep(0)
        assert in_flight == 2
        release.set()
        await asyncio.wait_for(all_done.wait(), 5)
    assert most == 2


async def test_nothing_runs_while_not_leading_and_the_schedule_is_kept():
    leading = False
    scheduler: Scheduler[str] = Scheduler(concurrency=1, leading=lambda: leading)
    ran = asyncio.Event()

    async def work(key: str) -> None:
        ran.set()

    scheduler.schedule("a", 0.0)
    async with running(scheduler, work):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ran.wait(), 0.2)
        leading = True
        scheduler.wake()
        await asyncio.wait_for(ran.wait(), 5)


async def test_a_forgotten_key_does_not_run_and_is_not_rescheduled():
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: True)
    started: list[str] = []
    later = asyncio.Event()

    async def work(key: str) -> float | None:
        started.append(key)
        if key == "b":
            scheduler.forget("b")  # deleted while it runs: its answer is ignored
            return 0.0
        later.set()
        return None

    scheduler.schedule("a", 0.02)
    scheduler.forget("a")
    scheduler.schedule("b", 0.0)
    scheduler.schedule("c", 0.1)  # due after "a" was: by the time it runs, "a" would have
    async with running(scheduler, work):
        await asyncio.wait_for(later.wait(), 5)
        for _ in range(20):
            await asyncio.sleep(0)
    assert started == ["b", "c"]


async def test_a_key_it_may_not_run_is_dropped_until_scheduled_again():
    owned = {"b"}
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: True, may_run=lambda key: key in owned)
    started: list[str] = []
    done = asyncio.Event()

    async def work(key: str) -> None:
        started.append(key)
        done.set()

    scheduler.schedule("a", 0.0)  # another replica's shard: dropped when due
    scheduler.schedule("b", 0.05)
    async with running(scheduler, work):
        await asyncio.wait_for(done.wait(), 5)
        assert started == ["b"]
        done.clear()
        owned.add("a")  # the shard is gained: its keys are scheduled again
        scheduler.schedule("a", 0.0)
        await asyncio.wait_for(done.wait(), 5)
    assert started == ["b", "a"]


async def test_the_next_run_is_counted_from_the_start_of_the_last():
    """A key that returns its interval runs once per interval while its runs are short: counted from
    the end, the 0.25 s runs would come every 0.85 s instead of every 0.6 s."""
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: True)
    starts: list[float] = []
    third = asyncio.Event()

    async def work(key: str) -> float | None:
        starts.append(asyncio.get_running_loop().time())
        if len(starts) == 3:
            third.set()
            return None
        await asyncio.sleep(0.25)
        return 0.6

    scheduler.schedule("a", 0.0)
    async with running(scheduler, work):
        await asyncio.wait_for(third.wait(), 10)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(0.6 <= gap < 0.8 for gap in gaps), gaps


async def test_long_runs_take_at_most_half_the_time_and_one_past_its_delay_waits_the_delay():
    """A run of 0.3 s with a delay of 0.4 s is followed 0.3 s after it ends (not 0.1 s: a key whose
    runs hang holds a slot at most half the time); one of 0.3 s with a delay of 0.1 s, 0.1 s after."""
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: True)
    spans: dict[str, list[tuple[float, float]]] = {"slow": [], "late": []}
    delays = {"slow": 0.4, "late": 0.1}
    done = asyncio.Event()

    async def work(key: str) -> float | None:
        clock = asyncio.get_running_loop().time
        start = clock()
        await asyncio.sleep(0.3)
        spans[key].append((start, clock()))
        if all(len(runs) >= 3 for runs in spans.values()):
            done.set()
        return None if len(spans[key]) >= 3 else delays[key]

    scheduler.schedule("slow", 0.0)
    scheduler.schedule("late", 0.0)
    async with running(scheduler, work):
        await asyncio.wait_for(done.wait(), 10)
    for key, wait in (("slow", 0.3), ("late", 0.1)):
        for (_, end), (start, _) in itertools.pairwise(spans[key]):
            assert end + wait <= start < end + wait + 0.2, (key, spans[key])


async def test_how_late_runs_start_is_counted():
    """Three keys due at once and one slot: the second waits for the first's 0.2 s, the third for both."""
    scheduler: Scheduler[str] = Scheduler(concurrency=1, leading=lambda: True)
    done = asyncio.Event()

    async def work(key: str) -> None:
        await asyncio.sleep(0.2)
        if scheduler.started == 3:
            done.set()

    for key in "abc":
        scheduler.schedule(key, 0.0)
    async with running(scheduler, work):
        await asyncio.wait_for(done.wait(), 5)
    assert scheduler.started == 3
    assert 0.55 <= scheduler.started_late < 5  # 0 + 0.2 + 0.4 at least (a loaded machine adds to it)


async def test_a_cancellation_that_arrives_with_a_wake_up_stops_it():
    """Woken (a run rescheduled) just as it is cancelled at shutdown, the scheduler stops: with
    ``asyncio.wait_for`` on Python 3.11 the cancellation was lost with the wake-up, and the
    scheduler, no longer leading, waited forever."""
    leading = True
    scheduler: Scheduler[str] = Scheduler(concurrency=4, leading=lambda: leading)

    async def work(key: str) -> None:
        return None

    scheduler.schedule("far", 100.0)
    task = asyncio.create_task(scheduler.run(work))
    for _ in range(5):
        await asyncio.sleep(0)  # it waits until "far" is due, or a wake-up
    scheduler.schedule("other", 100.0)  # the wake-up: the wait it is in completes...
    await asyncio.sleep(0)
    leading = False
    task.cancel()  # ...as the shutdown cancels it and releases leadership
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(task), 5)

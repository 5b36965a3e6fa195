"""Enforce: a real KEDA and a real HPA land the Deployment on exactly the count presage recommends.

The ScaledObject is the one `presage scaledobject` prints, applied as printed. Every step waits for
presage's status and the Deployment's ``spec.replicas`` to agree on the expected count.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.e2e.workload import SCALE_DOWN_WINDOW_SECONDS, Workload
from tests.harness.presage_cluster import eventually

pytestmark = pytest.mark.e2e

# Up in steps, among them 10 -> 11 and 12 -> 13: changes of 10 % and 8 %, both within the HPA's
# default tolerance, so they land only because the ScaledObject sets tolerance 0.
UP = (3, 7, 10, 11, 12, 13)
DOWN = 5


async def test_replicas_follow_the_recommendation_up_and_down(workload: Callable[[], Workload]) -> None:
    web = workload()
    web.deploy(replicas=1)
    web.scaler(mode="Enforce", min_replicas=1)
    web.apply_scaled_object(web.scaled_object())
    await web.settles_at(1)

    for count in UP:
        web.scaler(mode="Enforce", min_replicas=count)
        await web.settles_at(count)

    # Down: presage holds the count through its own scale-down window, then drops it in one step.
    lowered = time.monotonic()
    web.scaler(mode="Enforce", min_replicas=DOWN)
    await web.holds(web.replicas, lambda n: n == UP[-1], SCALE_DOWN_WINDOW_SECONDS - 5, "the count through the window")
    await web.settles_at(DOWN)
    assert time.monotonic() - lowered >= SCALE_DOWN_WINDOW_SECONDS

    # Demand, not the policy, moves it now: 150 units at 10 per replica need at least 15 replicas.
    web.demand.set(demand=150.0)
    recommended = await eventually(web.recommended, lambda n: n is not None and n >= 15, timeout=120, what="a rise")
    await eventually(
        lambda: (web.recommended(), web.replicas()),
        lambda pair: pair[0] == pair[1] and pair[0] >= recommended,
        timeout=60,
        what="the Deployment on the demand-driven recommendation",
    )


async def test_without_tolerance_zero_the_hpa_drops_a_ten_percent_step(workload: Callable[[], Workload]) -> None:
    """The control for the test above: the same 10 -> 11 step with the HPA's default tolerance is ignored."""
    web = workload()
    web.deploy(replicas=10)
    web.scaler(mode="Enforce", min_replicas=10)
    web.apply_scaled_object(web.scaled_object("--no-hpa-tolerance"))
    await web.settles_at(10)

    web.scaler(mode="Enforce", min_replicas=11)
    await eventually(web.recommended, lambda n: n == 11, timeout=60, what="presage to recommend 11")
    # The HPA reads 11 and still keeps 10: |11/10 - 1| is within its default tolerance of 10 %.
    await eventually(web.hpa_read, lambda v: v == [11], timeout=60, what="the HPA to read 11")
    await web.holds(web.replicas, lambda n: n == 10, 10, "10 replicas under the default tolerance")

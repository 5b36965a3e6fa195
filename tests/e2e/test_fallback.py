"""presage failing or gone: what KEDA v2.21.0 and the HPA do with the ScaledObject `presage scaledobject` prints.

Two different failures, two different paths in KEDA:

- presage *answers with an error* (here: its recommendation went stale because Prometheus is down,
  so every call is UNAVAILABLE). KEDA counts each failed metrics request in the ScaledObject's
  ``status.health`` and falls back once the count is *greater than* ``failureThreshold`` (3, so from
  the 4th consecutive failure), serving ``max(current replicas, fallback.replicas)``
  (``currentReplicasIfHigher``): the count holds, never drops, and rises to the floor if the floor
  is higher.
- presage is *unreachable* (stopped). KEDA asks an external scaler for its metric spec before every
  metrics request; that fails too, so KEDA never gets to its fallback: the HPA's one metric is
  invalid and the HPA keeps the count as it is. It holds, but a floor above it is not applied.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.workload import Workload, failures_and_fallback, watch_until_fallback
from tests.harness.autoscaling import Autoscaling
from tests.harness.presage_cluster import eventually

pytestmark = pytest.mark.e2e

THRESHOLD = 3  # what `presage scaledobject` prints by default
RUNNING = 5
FLOOR = 8


async def running_at(workload: Callable[[], Workload], replicas: int) -> Workload:
    """A workload in Enforce whose Deployment runs ``replicas``, under the printed ScaledObject."""
    web = workload()
    web.deploy(replicas=1)
    web.scaler(mode="Enforce", min_replicas=1)
    web.apply_scaled_object(web.scaled_object())  # fallback: threshold 3, floor max(minReplicas, 1) = 1
    web.scaler(mode="Enforce", min_replicas=replicas)
    await web.settles_at(replicas)
    return web


async def test_presage_answering_errors_falls_back_to_holding(workload: Callable[[], Workload]) -> None:
    web = await running_at(workload, RUNNING)

    web.prometheus.stop()  # evaluations fail; the last recommendation goes stale, then UNAVAILABLE
    try:
        seen = await watch_until_fallback(web, timeout=120)
        # Falling back only once the failures exceed the threshold, and never below the running count.
        assert all(not fallback for failures, fallback, _ in seen if failures <= THRESHOLD), seen
        assert (THRESHOLD, False) in {(f, fb) for f, fb, _ in seen}, f"never saw exactly {THRESHOLD} failures: {seen}"
        assert {replicas for *_, replicas in seen} == {RUNNING}, seen
        # Holding: the floor (1) is below the running count, so the count stays, sync after sync.
        await web.holds(web.replicas, lambda n: n == RUNNING, 10, "the running count while presage fails")

        # A floor above the running count: the fallback raises the count to it.
        web.apply_scaled_object(web.scaled_object(f"--fallback-replicas={FLOOR}"))
        await eventually(web.replicas, lambda n: n == FLOOR, timeout=60, what=f"the fallback floor of {FLOOR}")
    finally:
        web.prometheus.start()

    # presage fresh again: the fallback ends, and presage's own window brings the count back down.
    await eventually(
        lambda: failures_and_fallback(web.scaled_object_status()),
        lambda pair: pair == (0, False),
        timeout=60,
        what="KEDA to see presage healthy again",
    )
    await web.settles_at(RUNNING)


async def test_presage_unreachable_leaves_the_count_as_it_is(
    autoscaling: Autoscaling, workload: Callable[[], Workload]
) -> None:
    web = await running_at(workload, RUNNING)
    web.apply_scaled_object(web.scaled_object(f"--fallback-replicas={FLOOR}"))  # a floor above the count
    await web.holds(web.replicas, lambda n: n == RUNNING, 4, "the count while presage answers")

    autoscaling.presage.stop()
    try:
        await eventually(
            lambda: web.hpa_condition("ScalingActive"),
            lambda c: c is not None and (c["status"], c["reason"]) == ("False", "FailedGetExternalMetric"),
            timeout=60,
            what="the HPA to fail to read presage's metric",
        )
        # No fallback (KEDA never counts a failure it cannot get a metric spec for) and no change.
        await web.holds(
            lambda: (web.replicas(), failures_and_fallback(web.scaled_object_status())),
            lambda state: state == (RUNNING, (0, False)),
            10,
            "the count, with KEDA's fallback not engaged",
        )
    finally:
        autoscaling.presage.start()
    await eventually(
        lambda: web.hpa_condition("ScalingActive"),
        lambda c: c is not None and c["status"] == "True",
        timeout=60,
        what="the HPA to read presage again",
    )
    assert web.replicas() == RUNNING

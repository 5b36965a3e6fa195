"""Shadow: presage recommends, the replica count never moves because of it, alone or beside a trigger."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.workload import Workload, watch_until_fallback
from tests.harness.presage_cluster import eventually

pytestmark = pytest.mark.e2e

RUNNING = 4
RECOMMENDED = 9


async def test_shadow_never_moves_the_replicas(workload: Callable[[], Workload]) -> None:
    web = workload()
    web.deploy(replicas=RUNNING)
    web.scaler(mode="Shadow", min_replicas=1)
    scaled_object = web.scaled_object()  # printed while minReplicas is 1, so the HPA's minimum is 1
    web.apply_scaled_object(scaled_object)
    web.scaler(mode="Shadow", min_replicas=RECOMMENDED)
    await eventually(web.recommended, lambda n: n == RECOMMENDED, timeout=60, what="presage to recommend 9")

    # Alone: the HPA reads presage's answer, the current count, and keeps it.
    await eventually(web.hpa_read, lambda v: v == [RUNNING], timeout=60, what="the HPA to read the current count")
    await web.holds(web.replicas, lambda n: n == RUNNING, 10, "the running count in Shadow")
    assert web.recommended() == RECOMMENDED

    # Beside a second trigger (KEDA's metrics-api, reading the test's JSON), that trigger alone decides.
    other = {
        "type": "metrics-api",
        "metricType": "AverageValue",
        "metadata": {"url": f"http://{web.demand.address}/json", "valueLocation": "other", "targetValue": "1"},
    }
    for wanted in (6, 2):
        web.demand.set(other=float(wanted))
        scaled_object["spec"]["triggers"][1:] = [other]
        web.apply_scaled_object(scaled_object)
        # presage answers 0, so the HPA's maximum over the two is the other trigger's.
        await eventually(
            lambda: (web.replicas(), web.hpa_read()),
            lambda state, wanted=wanted: state == (wanted, [0, wanted]),
            timeout=60,
            what=f"{wanted} replicas, the HPA reading 0 from presage and {wanted} from the other trigger",
        )
        await web.holds(web.replicas, lambda n, wanted=wanted: n == wanted, 6, f"{wanted} replicas")
    assert web.recommended() == RECOMMENDED


async def test_a_presage_outage_holds_scale_down_beside_another_trigger(workload: Callable[[], Workload]) -> None:
    """What docs/keda.md warns of: while presage answers errors, a Shadow trigger beside another is not
    absent. KEDA's fallback reports the current count for it, so the other trigger still scales up but
    nothing scales down until presage answers again."""
    web = workload()
    web.deploy(replicas=RUNNING)
    web.scaler(mode="Shadow", min_replicas=1)
    scaled_object = web.scaled_object()
    other = {
        "type": "metrics-api",
        "metricType": "AverageValue",
        "metadata": {"url": f"http://{web.demand.address}/json", "valueLocation": "other", "targetValue": "1"},
    }
    web.demand.set(other=6.0)
    scaled_object["spec"]["triggers"].append(other)
    web.apply_scaled_object(scaled_object)
    await eventually(web.replicas, lambda n: n == 6, timeout=60, what="the other trigger's 6 replicas")

    web.prometheus.stop()  # presage's recommendation goes stale: every call is UNAVAILABLE
    try:
        await watch_until_fallback(web, timeout=120)
        web.demand.set(other=2.0)
        await web.holds(web.replicas, lambda n: n == 6, 15, "the count while presage fails (no scale-down)")
        web.demand.set(other=8.0)
        await eventually(web.replicas, lambda n: n == 8, timeout=60, what="the other trigger scaling up to 8")
        web.demand.set(other=2.0)
        await web.holds(web.replicas, lambda n: n == 8, 10, "the raised count while presage fails")
    finally:
        web.prometheus.start()
    # presage fresh again: it answers 0 beside the other trigger, which alone decides once more.
    await eventually(web.replicas, lambda n: n == 2, timeout=90, what="the other trigger's 2 replicas")

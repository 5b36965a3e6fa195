"""A ScaledObject reaches only the PredictiveScalers of its own namespace, through KEDA as deployed."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from tests.e2e.workload import NAME, Workload, failures_and_fallback
from tests.harness.presage_cluster import eventually

pytestmark = pytest.mark.e2e

THEIRS = 8
OURS = 2


async def test_a_predictive_scaler_in_another_namespace_is_out_of_reach(
    workload: Callable[[], Workload], new_namespace: Callable[[], str]
) -> None:
    theirs = workload()
    theirs.deploy(replicas=1)
    theirs.scaler(mode="Enforce", min_replicas=1)
    scaled_object = theirs.scaled_object()
    theirs.apply_scaled_object(scaled_object)
    theirs.scaler(mode="Enforce", min_replicas=THEIRS)
    await theirs.settles_at(THEIRS)  # it is live, and reachable from its own namespace

    # The same ScaledObject (predictiveScaler: web) in a namespace that has a Deployment web but no
    # PredictiveScaler web.
    ours = Workload(theirs.stack, new_namespace(), theirs.backend, theirs.demand, theirs.prometheus)
    ours.deploy(replicas=OURS)
    mine = copy.deepcopy(scaled_object)
    mine["metadata"]["namespace"] = ours.namespace
    ours.apply_scaled_object(mine)

    # KEDA's adapter tells the HPA only that the metric failed; the operator logs presage's refusal.
    refusal = f"no PredictiveScaler '{NAME}' with a recommendation in namespace '{ours.namespace}'"
    # Every request fails, so KEDA falls back (to holding the count: the floor is 1).
    await eventually(
        lambda: failures_and_fallback(ours.scaled_object_status()),
        lambda state: state[1],
        timeout=60,
        what="KEDA to count our requests as failures and fall back",
    )
    await eventually(theirs.stack.keda.operator_log, lambda log: refusal in log, timeout=30, what="presage's refusal")
    await ours.holds(ours.replicas, lambda n: n == OURS, 10, "our Deployment's own count")
    assert theirs.replicas() == THEIRS

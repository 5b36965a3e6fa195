"""The lateness a Lease's owner publishes: how long ago, as a share of each scaler's bound, the
least recently confirmed of its scalers was confirmed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.serving.freshness import FreshnessRecord
from presage_scaler.serving.store import RecommendationStore

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def scaler(name: str, *, written_ago: float, interval: str = "1m", degraded: bool = False, spec: dict | None = None):
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": name, "namespace": "shop", "uid": name, "resourceVersion": "1", "generation": 1},
        "spec": spec
        or {
            "interval": interval,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "sum(rate(x[1m]))"}},
            "capacity": {"perReplica": 10},
            "policy": {"maxReplicas": 10},
        },
        "status": {
            "observedGeneration": 1,
            "recommendedReplicas": 3,
            "lastForecast": {
                "generatedAt": (NOW - timedelta(seconds=written_ago)).isoformat(),
                "backend": "default",
                "leadTimeSeconds": 120,
                "point": "40",
            },
            "conditions": [
                {
                    "type": "Degraded",
                    "status": "True" if degraded else "False",
                    "reason": "QueryFailed" if degraded else "EvaluationSucceeded",
                    "message": "",
                    "lastTransitionTime": NOW.isoformat(),
                }
            ],
        },
    }


def controller(*objects: dict) -> ScalerController:
    scalers = ScalerController(None, RecommendationStore(), None, None, None, None)  # type: ignore[arg-type]

    async def feed() -> None:
        for obj in objects:
            await scalers.on_event("add", obj)

    asyncio.run(feed())
    return scalers


def every(key: tuple[str, str]) -> bool:
    return True


def test_the_least_recently_confirmed_scaler_sets_the_lateness():
    scalers = controller(scaler("a", written_ago=30), scaler("b", written_ago=90))
    assert scalers.lateness(every, None, NOW) == pytest.approx(90 / 180)
    assert scalers.lateness(lambda key: key[1] == "a", None, NOW) == pytest.approx(30 / 180)


def test_a_share_of_each_scalers_own_bound():
    """A 10 s scaler 30 s late is a quarter of its 2-minute bound, a 5 m one 90 s late a tenth."""
    scalers = controller(scaler("fast", written_ago=30, interval="10s"), scaler("slow", written_ago=90, interval="5m"))
    assert scalers.lateness(every, None, NOW) == pytest.approx(30 / 120)


def test_degraded_or_invalid_scalers_are_not_vouched_for_so_they_do_not_count():
    broken = scaler("broken", written_ago=900, spec={"interval": "not a duration"})
    scalers = controller(scaler("a", written_ago=30), scaler("down", written_ago=900, degraded=True), broken)
    assert scalers.lateness(every, None, NOW) == pytest.approx(30 / 180)
    assert controller().lateness(every, None, NOW) == 0.0


def test_what_the_leases_record_vouched_for_counts_as_confirmed_then():
    """A new owner inherits the record: a status written 8 minutes ago (held since by the previous
    owner) was confirmed when the record says, not 8 minutes ago."""
    scalers = controller(scaler("a", written_ago=480))
    record = FreshnessRecord(NOW - timedelta(seconds=10), 0.3, 1)  # confirmed 54 s before it
    assert scalers.lateness(every, record, NOW) == pytest.approx(64 / 180)
    assert scalers.lateness(every, None, NOW) == pytest.approx(480 / 180)

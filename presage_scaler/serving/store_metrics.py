"""The scrape-time families of the recommendation store: computed when Prometheus scrapes, on every
replica, so nothing is kept fresh and nothing goes stale. Each replica answers KEDA and Agones from
its own store, so its own recommendation age is the one that matters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from presage_scaler.observability.metrics import SCALER, ScalerMetrics
from presage_scaler.serving.store import RecommendationStore


def _utcnow() -> datetime:
    return datetime.now(UTC)


class StoreCollector(Collector):
    """Scrape-time families from the recommendation store: nothing to keep fresh, nothing to go stale."""

    def __init__(self, store: RecommendationStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        return self._families(self.clock())

    def _families(self, now: datetime | None = None) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "presage_recommendation_age_seconds",
            "Age of the recommendation this replica serves to KEDA and Agones: since it was last confirmed.",
            labels=SCALER,
        )
        info = InfoMetricFamily("presage_scaler", "The PredictiveScaler's mode and target.", labels=SCALER)
        if now is not None:
            for rec in self.store.items():
                age.add_metric([rec.namespace, rec.name], self.store.age(rec, now).total_seconds())
                info.add_metric(
                    [rec.namespace, rec.name],
                    {"mode": rec.mode, "target_kind": rec.target.kind, "target_name": rec.target.name},
                )
        yield age
        yield info


def served_metrics(
    metrics: ScalerMetrics, store: RecommendationStore, clock: Callable[[], datetime] = _utcnow
) -> ScalerMetrics:
    """``metrics`` with the store's families registered: ``presage_recommendation_age_seconds`` and
    ``presage_scaler_info``."""
    metrics.registry.register(StoreCollector(store, clock))
    return metrics

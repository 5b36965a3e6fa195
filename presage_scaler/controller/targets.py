"""Current replicas of a scale target: the scale subresource, or an Agones Fleet's status.

The scale subresource is what the HPA itself reads (``spec.replicas`` is the count the HPA compares
against), so any kind that has one works without target-specific code. For apps/v1 kinds the count
is read from a watch where one knows it (:mod:`presage_scaler.controller.replica_counts`). An
agones.dev Fleet is never scaled through it by presage: Agones stays the single writer, and its
``status.replicas`` is the count the FleetAutoscaler reports.
"""

from __future__ import annotations

from presage_scaler.api.predictive_scaler import ScaleTargetRef
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import ApiError, ApiUnavailable, Forbidden, KubeClient, NotFound
from presage_scaler.controller.replica_counts import WatchedReplicas
from presage_scaler.engine.evaluator import EvaluationError


def _int_at(obj: dict[str, object], *path: str) -> int | None:
    value: object = obj
    for step in path:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value if isinstance(value, int) else None


class TargetReader:
    """Reads current replicas; every failure is an :class:`EvaluationError` with a condition reason."""

    def __init__(self, client: KubeClient, watched: WatchedReplicas | None = None) -> None:
        """``watched``: counts known from watches, read before any GET (None: always GET)."""
        self._client = client
        self._watched = watched

    async def current_replicas(self, namespace: str, target: ScaleTargetRef) -> int:
        known = self._watched.replicas(namespace, target) if self._watched is not None else None
        if known is not None:
            return known
        where = f"{target.kind} {namespace}/{target.name} ({target.api_version})"
        try:
            resource = await self._client.resource_for(target.api_version, target.kind)
            if target.is_agones_fleet:
                fleet = await self._client.get(resource, namespace, target.name)
                replicas = _int_at(fleet, "status", "replicas")
                if replicas is None:
                    replicas = _int_at(fleet, "spec", "replicas")
            else:
                scale = await self._client.get(resource, namespace, target.name, "scale")
                replicas = _int_at(scale, "spec", "replicas")
        except NotFound as exc:
            raise EvaluationError(Reason.TARGET_NOT_FOUND, f"scale target {where} not found: {exc.message}") from exc
        except Forbidden as exc:
            raise EvaluationError(
                Reason.TARGET_FORBIDDEN,
                f"presage may not read {where} (grant get on its scale subresource): {exc.message}",
            ) from exc
        except ApiUnavailable as exc:
            raise EvaluationError(Reason.KUBERNETES_UNAVAILABLE, f"reading {where}: {exc.message}") from exc
        except ApiError as exc:
            raise EvaluationError(Reason.TARGET_UNREADABLE, f"reading {where}: {exc}") from exc
        if replicas is None:
            raise EvaluationError(Reason.TARGET_UNREADABLE, f"{where} reports no replica count")
        return replicas

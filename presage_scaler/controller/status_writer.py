"""Writing one PredictiveScaler's status: a merge patch conditional on the resourceVersion it was
computed from; on a conflict the object is read again and the patch rebuilt on the fresh status.

Leadership (or, sharded, ownership of the scaler's shard) is checked before every attempt, retries
included: a replica that lost its Lease between a conflict and its retry would otherwise overwrite
what the new leader wrote. The same check is the request's fence
(:data:`~presage_scaler.clients.kube.client.Fence`), asked again as the patch is about to leave, after
any wait for a connection: a replica starved of CPU between the two must not send it either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.clients.kube.client import JSON, ApiError, Conflict, Fenced, KubeClient, NotFound
from presage_scaler.clients.kube.presage_resources import PREDICTIVE_SCALERS
from presage_scaler.controller.predictive_scaler_objects import Key, status_of

log = logging.getLogger(__name__)

STATUS_WRITE_ATTEMPTS = 4

StatusPatch = Callable[[PredictiveScalerStatus], JSON]
"""The status fields to write, computed from the status they replace."""


class StatusWriter:
    """Patches status subresources with conflict retry, only while ``may_write(namespace, name)``
    (this replica leads, or owns the scaler's shard); ``fenced`` is called for each patch that the
    fence stopped as it was about to leave."""

    def __init__(
        self, client: KubeClient, may_write: Callable[[Key], bool], fenced: Callable[[], None] = lambda: None
    ) -> None:
        self._client = client
        self._may_write = may_write
        self._fenced = fenced

    def may_write(self, key: Key) -> bool:
        """Whether this replica writes the scaler ``key`` now: the fence of any write about it."""
        return self._may_write(key)

    async def write(self, obj: JSON, status: PredictiveScalerStatus, patch_of: StatusPatch) -> JSON | None:
        """Write ``patch_of(status)`` over ``obj`` (whose status ``status`` is); the object as written,
        or None when nothing was (deposed, deleted, refused, or conflicts every time)."""
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        key = (namespace, name)
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            if not self._may_write(key):
                log.info(
                    "status not written scaler=%s/%s: no longer the leader (or its shard's owner)", namespace, name
                )
                return None
            patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": patch_of(status)}
            try:
                return await self._client.merge_patch(
                    PREDICTIVE_SCALERS, namespace, name, patch, "status", fence=lambda: self._may_write(key)
                )
            except Fenced:
                self._fenced()
                log.warning(
                    "status not sent scaler=%s/%s: leadership lapsed before the patch could leave", namespace, name
                )
                return None
            except Conflict:
                try:
                    obj = await self._client.get(PREDICTIVE_SCALERS, namespace, name)
                except NotFound:
                    return None
                status = status_of(obj)
                log.info(
                    "status conflict scaler=%s/%s attempt=%d; retrying on the fresh object",
                    namespace,
                    name,
                    attempt + 1,
                )
            except NotFound:
                return None
            except ApiError as exc:
                log.warning("status not written scaler=%s/%s error=%s", namespace, name, exc)
                return None
        log.warning("status not written scaler=%s/%s: %d conflicts in a row", namespace, name, STATUS_WRITE_ATTEMPTS)
        return None

"""ScaledObject trigger counts from the cluster, for the gRPC server's Shadow-mode answer.

Shadow mode must never change the replica count: alone in a ScaledObject presage reports the
current count, beside other triggers it reports 0. Which case applies is read from a watched cache
of KEDA ScaledObjects (``keda.sh/v1alpha1``), so answering KEDA costs no API call.
"""

from __future__ import annotations

from collections.abc import Sequence

from presage_scaler.kube.client import JSON, KubeClient, Resource
from presage_scaler.kube.informer import Informer

SCALED_OBJECTS = Resource("keda.sh", "v1alpha1", "scaledobjects", True, "ScaledObject")


async def _ignore(kind: str, obj: JSON) -> None:
    """The cache is all the server needs; no reaction to changes."""


class KubeScaledObjectTriggers:
    """A :class:`~presage_scaler.keda.ScaledObjectTriggers` backed by a ScaledObject informer."""

    def __init__(self, client: KubeClient, namespaces: Sequence[str] | None = None) -> None:
        self.informer = Informer(client, SCALED_OBJECTS, _ignore, namespaces)

    async def run(self) -> None:
        await self.informer.run()

    async def trigger_count(self, namespace: str, scaled_object_name: str) -> int:
        if not self.informer.synced:
            raise LookupError(
                "ScaledObjects are not cached yet "
                "(is KEDA installed, and may presage list/watch scaledobjects.keda.sh?)"
            )
        obj = self.informer.get(namespace, scaled_object_name)
        if obj is None:
            raise LookupError(f"ScaledObject {namespace}/{scaled_object_name} does not exist")
        triggers = (obj.get("spec") or {}).get("triggers") or []
        return len(triggers)

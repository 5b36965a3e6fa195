"""Current replicas of apps/v1 scale targets from a watch, instead of a scale GET per evaluation.

A Deployment's, StatefulSet's or ReplicaSet's scale subresource reports its ``spec.replicas``, so
for these kinds a watch of the objects themselves knows the count the HPA compares against. A GET
costs the controller, the API server and etcd CPU at every evaluation (docs/controller.md,
Throughput, measured by ``benchmarks/bench_controller.py``); a watch costs one decoded event per
change of the object.

A kind is watched from the first evaluation that targets it, in the namespaces presage watches,
and keeps being watched while the process runs. Until its watch has listed, and for an object it
does not know or any other kind, the caller reads the scale subresource as before: the count is
never guessed, and a missing or forbidden target gets the GET's own error. A kind presage may not
list (RBAC from before the watch, or withheld on purpose) is said once in the log and read through
the scale subresource until the process restarts. Only the name, version and ``spec.replicas`` of
each object are kept: ~0.6 KiB per object of the kind in the watched namespaces, targeted or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from presage_scaler.api.predictive_scaler import ScaleTargetRef
from presage_scaler.clients.kube.client import JSON, ApiError, Forbidden, KubeClient, Resource
from presage_scaler.clients.kube.informer import Informer

log = logging.getLogger(__name__)

WATCHED_KINDS: dict[tuple[str, str], Resource] = {
    ("apps/v1", kind): Resource("apps", "v1", plural, True, kind)
    for kind, plural in (("Deployment", "deployments"), ("StatefulSet", "statefulsets"), ("ReplicaSet", "replicasets"))
}
"""(apiVersion, kind) of the targets whose scale subresource is their ``spec.replicas``."""
PAGE_SIZE = 100
"""Objects per page of a kind's list. Whole objects are decoded and only their counts kept, so the
page size bounds the memory a listing borrows: small pages keep it to a fraction of a MiB."""


def replica_count(obj: JSON) -> JSON:
    """What the cache keeps of a watched object: what names and versions it, and ``spec.replicas``."""
    meta = obj.get("metadata", {})
    spec = obj.get("spec")
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "replicas": spec.get("replicas") if isinstance(spec, dict) else None,
    }


async def _no_handler(kind: str, obj: JSON) -> None:
    """The cache itself is what is read; a change needs no action."""


class WatchedReplicas:
    """Replica counts of apps/v1 targets, each kind watched from the first time it is asked for."""

    def __init__(self, client: KubeClient, namespaces: Sequence[str] | None = None) -> None:
        self._client = client
        self._namespaces = namespaces
        self._informers: dict[str, Informer] = {}
        self._to_start: asyncio.Queue[Informer] = asyncio.Queue()

    def replicas(self, namespace: str, target: ScaleTargetRef) -> int | None:
        """The target's ``spec.replicas`` as last watched; None when the watch does not know it (another
        kind, not listed yet, no such object, no count), and the caller reads the scale subresource."""
        resource = WATCHED_KINDS.get((target.api_version, target.kind))
        if resource is None:
            return None
        informer = self._informers.get(resource.plural)
        if informer is None:
            informer = Informer(
                self._client, resource, _no_handler, self._namespaces, cache_as=replica_count, page_size=PAGE_SIZE
            )
            self._informers[resource.plural] = informer
            self._to_start.put_nowait(informer)
            return None
        cached = informer.get(namespace, target.name) if informer.synced else None
        replicas = cached.get("replicas") if cached is not None else None
        return replicas if isinstance(replicas, int) else None

    def watching(self) -> list[str]:
        """The kinds whose watch has listed, by plural (for tests and logs)."""
        return sorted(plural for plural, informer in self._informers.items() if informer.synced)

    async def run(self) -> None:
        """Run each kind's watch as it is first asked for, until cancelled."""
        async with asyncio.TaskGroup() as group:
            while True:
                informer = await self._to_start.get()
                if not await self._may_list(informer.resource):
                    continue  # never synced: every evaluation of the kind GETs its scale subresource
                log.info("watching %s for scale targets' replica counts", informer.resource.plural)
                group.create_task(informer.run(), name=f"replicas-{informer.resource.plural}")

    async def _may_list(self, resource: Resource) -> bool:
        """False, said once, when presage is forbidden to list ``resource``; any other failure is
        the informer's to retry."""
        scopes: Sequence[str | None] = self._namespaces or [None]  # None: every namespace
        for namespace in scopes:
            try:
                async for _ in self._client.pages(resource, namespace, page_size=1):
                    break  # one object is enough to know the list is allowed
            except Forbidden as exc:
                log.warning(
                    "presage may not list %s (%s): their replica counts are read through the scale subresource "
                    "at every evaluation; grant list and watch on %s.%s, or run with --no-watch-targets",
                    resource.plural,
                    exc.message,
                    resource.plural,
                    resource.group,
                )
                return False
            except ApiError:
                return True
        return True

"""List-then-watch caches of one resource kind, resilient to watch expiry and API server restarts.

The pattern every Kubernetes controller uses: list to get a consistent snapshot and its
resourceVersion, then watch from there. A watch that ends normally resumes from the last version
seen (bookmarks keep it current); ``410 Gone`` means that version was compacted away, so the cache
relists and reports the difference (including objects deleted while we were not watching); any
other failure (API server down, restarting) backs off and retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from presage_scaler.clients.kube.client import JSON, LIST_PAGE_SIZE, ApiError, Gone, KubeClient, NotFound, Resource

log = logging.getLogger(__name__)

Key = tuple[str, str]
Handler = Callable[[str, JSON], Awaitable[None]]
"""Called with ("upsert" | "delete", object) for every change, in order, per informer."""


def key_of(obj: JSON) -> Key:
    meta = obj.get("metadata", {})
    return (meta.get("namespace") or "", meta["name"])


def whole(obj: JSON) -> JSON:
    """Cache the object as it came."""
    return obj


def identity_only(obj: JSON) -> JSON:
    """Cache only what the informer itself needs (to diff relists and report deletions): kind,
    apiVersion and the metadata that names the object and its version. For a handler that keeps
    its own copy: the cache then costs ~0.3 KiB per object instead of the whole object again."""
    meta = obj.get("metadata", {})
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta},
    }


class Informer:
    """A cache of ``resource`` in ``namespaces`` (``None``: all namespaces), kept current by watching."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        handler: Handler,
        namespaces: Sequence[str] | None = None,
        *,
        watch_timeout: int = 300,
        max_backoff: float = 30.0,
        cache_as: Callable[[JSON], JSON] = whole,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        """``cache_as``: what of each object :attr:`cache` keeps (:func:`identity_only` when the
        handler keeps its own copy); a deletion the informer infers reaches the handler as that.
        ``page_size``: objects per page of a list; where little of each object is kept, smaller
        pages keep the process's memory from growing by a page of whole objects at a time."""
        self._client = client
        self.resource = resource
        self._handler = handler
        self._namespaces: Sequence[str | None] = list(namespaces) if namespaces else [None]
        self._watch_timeout = watch_timeout
        self._max_backoff = max_backoff
        self._cache_as = cache_as
        self._page_size = page_size
        self.cache: dict[Key, JSON] = {}
        self._synced = [asyncio.Event() for _ in self._namespaces]
        self.relists = 0  # how many times a list had to be (re)done; visible for tests and logs
        self.handler_failures = 0  # objects whose handler raised; contained, counted for tests and logs

    @property
    def synced(self) -> bool:
        return all(event.is_set() for event in self._synced)

    async def wait_synced(self) -> None:
        for event in self._synced:
            await event.wait()

    def get(self, namespace: str, name: str) -> JSON | None:
        return self.cache.get((namespace, name))

    async def run(self) -> None:
        """Run until cancelled: one list+watch loop per configured namespace."""
        async with asyncio.TaskGroup() as group:
            for index, namespace in enumerate(self._namespaces):
                group.create_task(self._run_namespace(index, namespace))

    async def _run_namespace(self, index: int, namespace: str | None) -> None:
        backoff = 0.5
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._relist(namespace)
                    self._synced[index].set()
                started = time.monotonic()
                async for event in self._client.watch(
                    self.resource, namespace, version, timeout_seconds=self._watch_timeout
                ):
                    version = event.object.get("metadata", {}).get("resourceVersion", version)
                    if event.type != "BOOKMARK":
                        await self._apply(event.type, event.object)
                if time.monotonic() - started < 1.0:
                    # A watch that ends at once (a proxy cutting streams) must not become a hot loop.
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff)
                else:
                    backoff = 0.5
            except NotFound:
                # The resource itself is gone (CRD deleted or never installed): what we cached no
                # longer exists, and we are not in sync with anything until it is served again.
                await self._forget_scope(namespace)
                self._synced[index].clear()
                version = None
                log.warning(
                    "resource %s is not served (is its CRD installed?); retrying in %.1fs",
                    self.resource.plural,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
            except Gone:
                log.info("watch expired resource=%s namespace=%s; relisting", self.resource.plural, namespace)
                version = None
            except ApiError as exc:
                log.warning(
                    "watch failed resource=%s namespace=%s error=%s; retrying in %.1fs",
                    self.resource.plural,
                    namespace,
                    exc,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)

    async def _forget_scope(self, namespace: str | None) -> None:
        for key in [k for k in self.cache if namespace is None or k[0] == namespace]:
            await self._apply("DELETED", self.cache[key])

    async def _relist(self, namespace: str | None) -> str:
        """List a page at a time, reporting each object as it comes (so that no more than a page of
        whole objects is held), then what the snapshot lacks as deleted; returns its version."""
        listed: set[Key] = set()
        version = ""
        async for page in self._client.pages(self.resource, namespace, page_size=self._page_size):
            kind = self.resource.kind or page.get("kind", "").removesuffix("List")
            api_version = page.get("apiVersion", self.resource.api_version)
            for item in page.get("items") or []:
                # List items carry no kind/apiVersion; handlers expect whole objects.
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", api_version)
                listed.add(key_of(item))
                await self._apply("MODIFIED", item)
            version = str(page.get("metadata", {}).get("resourceVersion", ""))
        self.relists += 1
        for key in [k for k in self.cache if (namespace is None or k[0] == namespace) and k not in listed]:
            await self._apply("DELETED", self.cache[key])
        return version

    async def _apply(self, event_type: str, obj: JSON) -> None:
        key = key_of(obj)
        if event_type == "DELETED":
            self.cache.pop(key, None)
            await self._handle("delete", key, obj)
            return
        previous = self.cache.get(key)
        if previous is not None and previous["metadata"].get("resourceVersion") == obj["metadata"].get(
            "resourceVersion"
        ):
            return  # a relist re-reporting what we already have
        self.cache[key] = self._cache_as(obj)
        await self._handle("upsert", key, obj)

    async def _handle(self, kind: str, key: Key, obj: JSON) -> None:
        """Run the handler for one object; whatever one object's content makes it raise stays with
        that object, so a tenant's CR can never stop the watch that serves every namespace."""
        try:
            await self._handler(kind, obj)
        except Exception:
            self.handler_failures += 1
            log.exception(
                "handler failed resource=%s object=%s event=%s; the watch goes on", self.resource.plural, key, kind
            )

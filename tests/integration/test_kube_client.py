"""The Kubernetes client against the real API server: typed errors, discovery, conditional writes."""

from __future__ import annotations

import asyncio

import pytest

from presage_scaler.clients.httppool import MAX_CONNECTIONS
from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import ApiError, Conflict, Fenced, Gone, KubeClient, NotFound, Resource
from presage_scaler.clients.kube.informer import Informer
from presage_scaler.clients.kube.presage_resources import PREDICTIVE_SCALERS
from tests.harness.presage_cluster import apply, deployment

pytestmark = pytest.mark.integration

CONFIG_MAPS = Resource("", "v1", "configmaps", True, "ConfigMap")


async def test_watch_from_a_compacted_version_is_gone(cluster):
    async with KubeClient(kube_config.from_kubeconfig(cluster.kubeconfig)) as client:
        for _ in range(40):
            try:
                async for _ in client.watch(PREDICTIVE_SCALERS, None, "1"):
                    pass
            except ApiError as exc:
                if exc.status == 429:  # the watch cache of freshly installed CRDs is still initialising
                    await asyncio.sleep(0.25)
                    continue
                assert isinstance(exc, Gone), exc
                return
        pytest.fail("the watch cache never became ready")


async def test_discovery_conditional_patch_and_not_found(cluster, kube_namespace):
    apply(cluster, deployment("web", 4), kube_namespace)
    async with KubeClient(kube_config.from_kubeconfig(cluster.kubeconfig)) as client:
        deployments = await client.resource_for("apps/v1", "Deployment")
        assert deployments == Resource("apps", "v1", "deployments", True, "Deployment")
        scale = await client.get(deployments, kube_namespace, "web", "scale")
        assert scale["spec"]["replicas"] == 4
        with pytest.raises(NotFound):
            await client.resource_for("apps/v1", "Fleet")
        with pytest.raises(NotFound):
            await client.get(deployments, kube_namespace, "missing")

        created = await client.create(CONFIG_MAPS, kube_namespace, {"metadata": {"name": "c"}, "data": {"k": "1"}})
        version = created["metadata"]["resourceVersion"]
        await client.merge_patch(CONFIG_MAPS, kube_namespace, "c", {"data": {"k": "2"}})
        with pytest.raises(Conflict):  # the patch is conditional on a version that has moved on
            await client.merge_patch(
                CONFIG_MAPS, kube_namespace, "c", {"metadata": {"resourceVersion": version}, "data": {"k": "3"}}
            )
        assert (await client.get(CONFIG_MAPS, kube_namespace, "c"))["data"] == {"k": "2"}


async def test_a_list_comes_a_page_at_a_time_from_one_snapshot_and_an_informer_lists_that_way(cluster, kube_namespace):
    async with KubeClient(kube_config.from_kubeconfig(cluster.kubeconfig)) as client:
        for i in range(7):
            await client.create(CONFIG_MAPS, kube_namespace, {"metadata": {"name": f"c{i}"}})
        pages = [page async for page in client.pages(CONFIG_MAPS, kube_namespace, page_size=3)]
        assert [len(p["items"]) for p in pages] == [3, 3, 1]
        assert len({p["metadata"]["resourceVersion"] for p in pages}) == 1  # one snapshot
        listing = await client.list(CONFIG_MAPS, kube_namespace, page_size=3)
        names = sorted(item["metadata"]["name"] for item in listing["items"])
        assert names == [f"c{i}" for i in range(7)]

        seen: list[str] = []

        async def handler(kind: str, obj: dict) -> None:
            seen.append(f"{kind} {obj['kind']} {obj['metadata']['name']}")

        informer = Informer(client, CONFIG_MAPS, handler, [kube_namespace], page_size=3)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.wait_synced(), 30)
        finally:
            task.cancel()
        assert sorted(seen) == [f"upsert ConfigMap c{i}" for i in range(7)]  # every page, kind filled in
        assert informer.relists == 1


async def test_a_fenced_write_is_not_sent_when_its_fence_closes_while_it_waits_for_a_connection(
    cluster, kube_namespace
):
    async with KubeClient(kube_config.from_kubeconfig(cluster.kubeconfig)) as client:
        await client.create(CONFIG_MAPS, kube_namespace, {"metadata": {"name": "f"}, "data": {"k": "1"}})
        with pytest.raises(Fenced):  # closed before it starts
            await client.merge_patch(CONFIG_MAPS, kube_namespace, "f", {"data": {"k": "2"}}, fence=lambda: False)

        # Every pooled connection held by a watch: the next request queues for one.
        started = asyncio.Event()
        holding = 0

        async def hold() -> None:
            nonlocal holding
            async for _ in client.watch(CONFIG_MAPS, kube_namespace, "0", timeout_seconds=60):
                holding += 1
                if holding == MAX_CONNECTIONS:
                    started.set()
                await asyncio.sleep(3600)

        watches = [asyncio.create_task(hold()) for _ in range(MAX_CONNECTIONS)]
        try:
            async with asyncio.timeout(30):
                await started.wait()
            open_fence = True
            write = asyncio.create_task(
                client.merge_patch(CONFIG_MAPS, kube_namespace, "f", {"data": {"k": "3"}}, fence=lambda: open_fence)
            )
            await asyncio.sleep(0.5)
            assert not write.done(), "the write did not wait for a connection"
            open_fence = False  # leadership lapses while the write waits
            watches.pop().cancel()  # a connection comes free
            with pytest.raises(Fenced):
                async with asyncio.timeout(30):
                    await write
        finally:
            for watch in watches:
                watch.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
        assert (await client.get(CONFIG_MAPS, kube_namespace, "f"))["data"] == {"k": "1"}
        # The slot the stopped write took is free again: an open fence lets the next one through.
        await client.merge_patch(CONFIG_MAPS, kube_namespace, "f", {"data": {"k": "4"}}, fence=lambda: True)
        assert (await client.get(CONFIG_MAPS, kube_namespace, "f"))["data"] == {"k": "4"}

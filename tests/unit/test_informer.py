"""Informer logic against a scripted HTTP server on a loopback socket (tests/harness/local_http.py):
410 relists and reports what was deleted meanwhile."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from presage_scaler.clients.kube.client import KubeClient, Resource
from presage_scaler.clients.kube.credentials import KubeConfig
from presage_scaler.clients.kube.informer import Informer, identity_only
from tests.harness.local_http import serving

THINGS = Resource("example.com", "v1", "things", True, "Thing")


def thing(name: str, version: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": version,
            "uid": f"uid-{name}",
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"size": name * 100},
    }


class ScriptedServer:
    """Answers lists and watches from a script, as the API server would in that situation."""

    def __init__(self) -> None:
        self.lists = [
            {"metadata": {"resourceVersion": "10"}, "items": [thing("a", "5"), thing("b", "6")]},
            {"metadata": {"resourceVersion": "30"}, "items": [thing("a", "25")]},
        ]
        gone = {"code": 410, "reason": "Expired", "message": "too old resource version"}
        self.watches = [[{"type": "ADDED", "object": thing("c", "11")}, {"type": "ERROR", "object": gone}]]
        self.watch_versions: list[str] = []
        self.done = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        if request.query.get("watch") == "1":
            self.watch_versions.append(request.query["resourceVersion"])
            if not self.watches:
                self.done.set()
                return web.Response(body=b"")
            return web.Response(body=("\n".join(json.dumps(e) for e in self.watches.pop(0)) + "\n").encode())
        return web.json_response(self.lists.pop(0))


async def _play(handler, **options) -> tuple[ScriptedServer, Informer]:
    """Run an informer with ``handler`` against the scripted server until the script is played out."""
    server = ScriptedServer()
    async with serving(server.handle) as url:
        client = KubeClient(KubeConfig(server=url))
        informer = Informer(client, THINGS, handler, ["ns"], max_backoff=0.01, **options)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(server.done.wait(), 10)
            assert not task.done(), "the informer stopped"
        finally:
            task.cancel()
            await client.close()
    return server, informer


async def test_gone_relists_and_reports_deletions():
    seen: list[tuple[str, str, str]] = []

    async def handler(kind: str, obj: dict) -> None:
        seen.append((kind, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))

    server, informer = await _play(handler)

    assert server.watch_versions[:2] == ["10", "30"]  # resumed from the relist's version
    assert seen == [
        ("upsert", "a", "5"),
        ("upsert", "b", "6"),
        ("upsert", "c", "11"),
        ("upsert", "a", "25"),  # the relist reports each page as it comes,
        ("delete", "b", "6"),  # then what its snapshot lacks: gone while we were not watching
        ("delete", "c", "11"),
    ]
    assert informer.relists == 2
    assert set(informer.cache) == {("ns", "a")}


async def test_a_handler_that_raises_on_one_object_does_not_stop_the_watch():
    # What a tenant's CR can make a handler raise (an overflow, a recursion, a bug) stays with that object.
    seen: list[str] = []
    failures = {"a": OverflowError("date value out of range"), "c": RecursionError("too deep")}

    async def handler(kind: str, obj: dict) -> None:
        name = obj["metadata"]["name"]
        if kind == "upsert" and name in failures:
            raise failures[name]
        seen.append(f"{kind} {name}")

    server, informer = await _play(handler)

    # Every other event was delivered, the watch resumed after the relist, and each failure was counted.
    assert seen == ["upsert b", "delete b", "delete c"]
    assert informer.handler_failures == 3  # a (list), c (watch), a again (relist)
    assert server.watch_versions[:2] == ["10", "30"]
    assert set(informer.cache) == {("ns", "a")}


async def test_an_identity_only_cache_keeps_names_and_versions_and_hands_over_whole_objects():
    seen: list[tuple[str, dict]] = []

    async def handler(kind: str, obj: dict) -> None:
        seen.append((kind, obj))

    _, informer = await _play(handler, cache_as=identity_only)

    assert informer.cache == {
        ("ns", "a"): {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "uid": "uid-a", "resourceVersion": "25"},
        }
    }
    upserts = [obj for kind, obj in seen if kind == "upsert"]
    assert [o["spec"] for o in upserts] == [
        {"size": "a" * 100},
        {"size": "b" * 100},
        {"size": "c" * 100},
        {"size": "a" * 100},
    ]
    # A deletion the informer inferred (b and c vanished behind the expired watch) names the object.
    deleted = [obj["metadata"] for kind, obj in seen if kind == "delete"]
    assert [(m["name"], m["uid"], m["resourceVersion"]) for m in deleted] == [("b", "uid-b", "6"), ("c", "uid-c", "11")]

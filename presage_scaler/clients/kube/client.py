"""Async Kubernetes REST calls over aiohttp: get, list, watch, create, merge-patch, discovery.

Only what presage needs. Errors are a small hierarchy keyed by HTTP status so callers can react
to exactly the cases that matter (404 missing, 409 conflict, 410 watch expired, 403 forbidden)
and report the API server's own message otherwise.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp

from presage_scaler.clients.httppool import MAX_CONNECTIONS
from presage_scaler.clients.kube.credentials import KubeConfig

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
LIST_PAGE_SIZE = 500
"""Objects per page of a list: what kubectl and client-go's informers ask for."""


class ApiError(Exception):
    """The API server refused a request; ``status`` is the HTTP code, ``reason`` its Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class Gone(ApiError):
    """A watch or list continuation asked for a resourceVersion the server no longer keeps."""


class Forbidden(ApiError):
    pass


class ApiUnavailable(ApiError):
    """The API server could not be reached (connection refused, timeout, TLS failure)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unavailable", message)


class Fenced(ApiError):
    """A write was not sent: its :data:`Fence` said, as the request was about to leave, that this
    replica may no longer make it (its leadership could no longer be vouched for)."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(0, "Fenced", f"{method} {path} not sent: this replica is no longer certainly the leader")


Fence = Callable[[], bool]
"""Asked immediately before a request leaves (before it waits for a pooled connection, and again
after any wait or new connection): False stops it with :class:`Fenced`, unsent."""


_BY_STATUS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone, 403: Forbidden}


def _decoded(payload: bytes) -> Mapping[str, Any] | str:
    try:
        decoded = json.loads(payload)
    except ValueError:
        return payload.decode(errors="replace")
    return decoded if isinstance(decoded, Mapping) else str(decoded)


def error_from_status(status: int, body: Mapping[str, Any] | str) -> ApiError:
    """The typed error for an HTTP status and a Kubernetes ``Status`` body (or raw text)."""
    if isinstance(body, Mapping):
        reason, message = str(body.get("reason") or ""), str(body.get("message") or body)
    else:
        reason, message = "", body[:500]
    return _BY_STATUS.get(status, ApiError)(status, reason or str(status), message)


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` is "" for the core API; ``plural`` is the URL segment."""

    group: str
    version: str
    plural: str
    namespaced: bool = True
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource is not None:
                base += f"/{subresource}"
        return base


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: JSON


class KubeClient:
    """One connection pool to one API server; use as an async context manager or call :meth:`close`.

    aiohttp rather than httpx here: the controller makes two API calls per evaluation, and client CPU
    per request is what bounds evaluations per second (docs/controller.md); aiohttp spends several
    times less of it (``benchmarks/bench_http_clients.py`` measures the ratio).
    """

    def __init__(self, config: KubeConfig, *, timeout: float = 30.0, user_agent: str = "presage-scaler") -> None:
        self.config = config
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        self._session: aiohttp.ClientSession | None = None
        self._discovered: dict[tuple[str, str], Resource] = {}

    def _http(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop, as aiohttp requires.
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.config.ssl_context(), limit=MAX_CONNECTIONS),
                headers=self._headers,
                timeout=self._timeout,
                # Watch events are one JSON object per line; objects can be large (etcd allows 1.5 MiB).
                read_bufsize=2**20,
                trace_configs=[_fencing()],
            )
        return self._session

    def _url(self, path: str) -> str:
        # Not aiohttp's base_url: API servers behind a proxy often carry a path prefix.
        return self.config.server + path

    def _auth(self) -> dict[str, str]:
        """Per request, so a rotated service-account token or an expired exec token is renewed."""
        authorization = self.config.authorization()
        return {"Authorization": authorization} if authorization else {}

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: JSON | None = None,
        content_type: str = "application/json",
        fence: Fence | None = None,
    ) -> JSON:
        """One request; returns the decoded JSON body or raises a typed :class:`ApiError`
        (:class:`Fenced`, unsent, when ``fence`` says no as it is about to leave)."""
        headers = self._auth()
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        try:
            async with self._http().request(
                method,
                self._url(path),
                params=params,
                data=data,
                headers=headers,
                server_hostname=self.config.tls_server_name,
                trace_request_ctx=_FencedRequest(fence, method, path) if fence else None,
            ) as response:
                payload = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiUnavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if status >= 400:
            raise error_from_status(status, _decoded(payload))
        return json.loads(payload) if payload else {}

    async def get(self, resource: Resource, namespace: str | None, name: str, subresource: str | None = None) -> JSON:
        return await self.request("GET", resource.path(namespace, name, subresource))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        params: Mapping[str, str] | None = None,
        page_size: int = LIST_PAGE_SIZE,
    ) -> JSON:
        """Every object as one list whose ``metadata.resourceVersion`` is the snapshot all pages
        were served from (see :meth:`pages`)."""
        items: list[JSON] = []
        listing: JSON = {}
        async for listing in self.pages(resource, namespace, params=params, page_size=page_size):
            items.extend(listing.get("items") or [])
        listing["items"] = items
        return listing

    async def pages(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        params: Mapping[str, str] | None = None,
        page_size: int = LIST_PAGE_SIZE,
    ) -> AsyncIterator[JSON]:
        """A list ``page_size`` objects at a time (``limit``/``continue``), each page as the server sent
        it, so that no response holds 10,000 objects and a caller that keeps less than whole objects
        never holds more than a page of them; every page is of the same snapshot."""
        query = {**(params or {}), "limit": str(page_size)}
        listing = await self.request("GET", resource.path(namespace), params=query)
        yield listing
        while token := (listing.get("metadata") or {}).get("continue"):
            listing = await self.request("GET", resource.path(namespace), params={**query, "continue": token})
            yield listing

    async def create(self, resource: Resource, namespace: str | None, body: JSON) -> JSON:
        return await self.request("POST", resource.path(namespace), body=body)

    async def replace(self, resource: Resource, namespace: str | None, name: str, body: JSON) -> JSON:
        return await self.request("PUT", resource.path(namespace, name), body=body)

    async def delete(self, resource: Resource, namespace: str | None, name: str) -> JSON:
        return await self.request("DELETE", resource.path(namespace, name))

    async def merge_patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: JSON,
        subresource: str | None = None,
        *,
        field_manager: str | None = None,
        fence: Fence | None = None,
    ) -> JSON:
        """JSON merge patch; include ``metadata.resourceVersion`` in it to make it conditional (409 on change).
        ``field_manager`` names the writer in the object's managedFields (default: the user agent's);
        ``fence`` as for :meth:`request`."""
        params = {"fieldManager": field_manager} if field_manager else None
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=MERGE_PATCH,
            params=params,
            fence=fence,
        )

    async def watch(
        self, resource: Resource, namespace: str | None, resource_version: str, *, timeout_seconds: int = 300
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version`` until the server ends the watch.

        Raises :class:`Gone` when that version has been compacted away: the caller must list again.
        """
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout_seconds + 30.0)
        path = resource.path(namespace)
        try:
            async with self._http().get(
                self._url(path), params=params, timeout=timeout, headers=self._auth()
            ) as response:
                if response.status >= 400:
                    raise error_from_status(response.status, _decoded(await response.read()))
                while line := await response.content.readline():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise error_from_status(int(status.get("code") or 500), status)
                    yield WatchEvent(type=event["type"], object=event["object"])
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ApiUnavailable(f"watch {path}: {type(exc).__name__}: {exc}") from exc

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        """The REST resource serving ``kind`` in ``api_version``, from discovery (cached)."""
        key = (api_version, kind)
        if key not in self._discovered:
            group, _, version = api_version.rpartition("/")
            path = f"/apis/{api_version}" if group else f"/api/{version}"
            listing = await self.request("GET", path)
            resources = listing.get("resources", [])
            for entry in resources:
                if entry.get("kind") == kind and "/" not in entry.get("name", ""):
                    self._discovered[key] = Resource(group, version, entry["name"], bool(entry.get("namespaced")), kind)
                    break
            else:
                raise NotFound(404, "NotFound", f"the API server serves no kind {kind} in {api_version}")
        return self._discovered[key]


@dataclass(frozen=True)
class _FencedRequest:
    """A fenced request, as its trace hooks see it."""

    fence: Fence
    method: str
    path: str


def _fencing() -> aiohttp.TraceConfig:
    """Checks a request's :data:`Fence` when it starts and again right after each step that can wait
    (a queue for a pooled connection, a new connection's handshake), so that no wait separates the
    last check from the request leaving; aiohttp releases the connection slot when a check raises."""

    async def check(_session: aiohttp.ClientSession, context: SimpleNamespace, _params: object) -> None:
        request = context.trace_request_ctx
        if isinstance(request, _FencedRequest) and not request.fence():
            raise Fenced(request.method, request.path)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(check)
    trace.on_connection_queued_end.append(check)
    trace.on_connection_create_end.append(check)
    return trace

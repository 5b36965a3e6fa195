"""The ForecastBackend controller: one live backend per object, probed on a period, status written.

Backends are built by :mod:`presage_scaler.backends.registry` and probe themselves: SeasonalNaive
runs in-process and is always ready; a TimesFM backend is probed over HTTP (``GET /v1/model`` on
the forecaster). The model a probe reports lands in ``status.model``. Scalers look their backend
up here: a missing backend, or one whose last probe failed, makes the scaler Degraded with that
reason instead of spending its evaluation on a call that will time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp

from presage_scaler.api.forecast_backend import ForecastBackendSpec, ForecastBackendStatus
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import Backend, BackendError, ProbedBackend
from presage_scaler.backends.registry import build_backend
from presage_scaler.clients.kube.client import JSON, ApiError, Fenced, KubeClient, NotFound
from presage_scaler.clients.kube.presage_resources import FORECAST_BACKENDS
from presage_scaler.controller.condition_updates import DEGRADED, READY, ConditionUpdate, merge_conditions

log = logging.getLogger(__name__)


@dataclass
class BackendEntry:
    """One ForecastBackend as the controller knows it."""

    obj: JSON
    generation: int
    backend: ProbedBackend | None
    problem: tuple[Reason, str] | None = None  # (reason, message) while not usable
    model: str | None = None
    probed_generation: int | None = None


class BackendUnusable(Exception):
    """Why a scaler cannot use its backend right now: a condition reason and message."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = Reason(reason)
        self.message = message


class BackendController:
    """Keeps :class:`BackendEntry` per ForecastBackend, probes them, writes their status when leading."""

    def __init__(
        self,
        client: KubeClient,
        http: aiohttp.ClientSession,
        *,
        probe_period: float = 30.0,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        fenced: Callable[[], None] = lambda: None,
    ) -> None:
        """``leading``: whether this replica writes status, asked again as each write leaves;
        ``fenced``: called for each write that was stopped then."""
        self._client = client
        self._http = http
        self._probe_period = probe_period
        self._leading = leading
        self._fenced = fenced
        self._clock = clock
        self.entries: dict[str, BackendEntry] = {}
        self._wake = asyncio.Event()
        self.probed_once = asyncio.Event()  # set after the first probe round; scalers wait for it

    def backend_for(self, name: str) -> Backend:
        """The usable backend called ``name``, or :class:`BackendUnusable` saying why not."""
        entry = self.entries.get(name)
        if entry is None:
            raise BackendUnusable(Reason.BACKEND_NOT_FOUND, f"ForecastBackend {name!r} does not exist")
        if entry.backend is None or entry.problem is not None:
            reason, message = entry.problem or (Reason.BACKEND_NOT_READY, "not probed yet")
            raise BackendUnusable(reason, f"ForecastBackend {name!r}: {message}")
        if entry.probed_generation is None:
            raise BackendUnusable(Reason.BACKEND_NOT_READY, f"ForecastBackend {name!r} has not been probed yet")
        return entry.backend

    async def on_event(self, kind: str, obj: JSON) -> None:
        """Informer handler."""
        name = obj["metadata"]["name"]
        if kind == "delete":
            self.entries.pop(name, None)
            return
        generation = int(obj["metadata"].get("generation") or 0)
        entry = self.entries.get(name)
        if entry is not None and entry.generation == generation:
            entry.obj = obj
            return
        try:
            spec = parse(ForecastBackendSpec, obj.get("spec") or {})
        except SpecError as exc:
            self.entries[name] = BackendEntry(obj, generation, None, (Reason.INVALID_SPEC, str(exc)))
        else:
            self.entries[name] = BackendEntry(obj, generation, build_backend(name, spec, self._http))
        self._wake.set()

    async def run(self) -> None:
        """Probe every backend each period, and at once after a spec change."""
        while True:
            await asyncio.gather(*(self._probe(entry) for entry in list(self.entries.values())))
            self.probed_once.set()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._probe_period):
                    await self._wake.wait()

    async def _probe(self, entry: BackendEntry) -> None:
        if entry.backend is not None:
            try:
                entry.model = await entry.backend.probe()
                entry.problem = None
            except BackendError as exc:
                entry.problem = (exc.reason, str(exc))
            entry.probed_generation = entry.generation
        if self._leading():
            await self._write_status(entry)

    async def _write_status(self, entry: BackendEntry) -> None:
        now = self._clock()
        name = entry.obj["metadata"]["name"]
        current = ForecastBackendStatus.model_validate(entry.obj.get("status") or {})
        if entry.problem is None:
            updates = [
                ConditionUpdate(READY, "True", Reason.PROBE_SUCCEEDED, f"backend answered; model {entry.model}"),
                ConditionUpdate(DEGRADED, "False", Reason.PROBE_SUCCEEDED, ""),
            ]
        else:
            reason, message = entry.problem
            updates = [
                ConditionUpdate(READY, "False", reason, message),
                ConditionUpdate(DEGRADED, "True", reason, message),
            ]
        status = ForecastBackendStatus(
            conditions=merge_conditions(current.conditions, updates, entry.generation, now),
            last_probe_time=now,
            model=entry.model if entry.problem is None else current.model,
            observed_generation=entry.generation,
        )
        patch = {"status": status.model_dump(by_alias=True, exclude_none=True, mode="json")}
        try:
            updated = await self._client.merge_patch(
                FORECAST_BACKENDS, None, name, patch, "status", fence=self._leading
            )
        except NotFound:
            return
        except Fenced:
            self._fenced()
            log.warning("backend status not sent backend=%s: leadership lapsed before the patch could leave", name)
            return
        except ApiError as exc:
            log.warning("backend status not written backend=%s error=%s", name, exc)
            return
        entry.obj = updated

"""``presage advise``: tune every PredictiveScaler that asks for advice (``spec.advice``) on its own
history, as ``presage tune --scaler`` does, and write what to do into its ``status.advice``.

One run lists the scalers, keeps those of its shard (a key hash, so that the pods of an indexed Job
split them with none advised twice or missed) that opted in and are due, and advises them one at a
time. A scaler is due when it was never advised, when its spec changed since (``metadata.generation``),
when its last attempt failed, or when ``spec.advice.every`` has passed. Each write is a merge patch of
``status.advice`` alone, under its own field manager, so it never touches what the controller writes;
``spec`` is never changed. A scaler that cannot be advised gets the error in ``status.advice.error``
(the advice made before it is kept) and a Warning Event; it never stops the run.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import AdviceSpec
from presage_scaler.api.types import API_VERSION, PREDICTIVE_SCALER
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides, backend_spec
from presage_scaler.clients.kube.client import ApiError, KubeClient, NotFound
from presage_scaler.clients.kube.config import KubeConfig
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.controller.predictive_scaler_objects import PREDICTIVE_SCALERS
from presage_scaler.controller.shards import shard_of
from presage_scaler.tune.advice import Advice, Verdict, advise
from presage_scaler.tune.advice_status import advice_status, failed_status
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.from_cluster import live_scaler
from presage_scaler.tune.from_flags import ERRORS
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import TuneSetup, tune

log = logging.getLogger(__name__)

FIELD_MANAGER = "presage-advise"
ADVICE_READY = "AdviceReady"
ADVICE_FAILED = "AdviceFailed"
UNWRITTEN = "writing status.advice"
MESSAGE_LENGTH = 1024
"""The most characters of an error or Event message written (an Event's message is cut there by the
API server too)."""


@dataclass(frozen=True)
class AdviseOptions:
    """What one ``presage advise`` run covers and how it tunes."""

    shard: int = 0
    shards: int = 1
    namespace: str | None = None
    """Only this namespace; None: every namespace."""
    warmup: timedelta = DEFAULT_WARMUP
    holdout: timedelta | None = None
    jobs: int = 1
    prometheus: str | None = None
    """Replaces every query's address (for a run outside the cluster)."""


@dataclass
class RunSummary:
    """What one run did, by ``namespace/name``."""

    advised: dict[str, str] = field(default_factory=dict)
    """Each scaler advised and its verdict."""
    failed: dict[str, str] = field(default_factory=dict)
    """Each scaler that could not be advised and why."""
    not_due: list[str] = field(default_factory=list)


def key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What advising a scaler reads of it: its identity, its spec and its ``status.advice`` (not the
    controller's status, whose shadow and calibration records are most of an object's size)."""
    metadata = obj.get("metadata") or {}
    kept = ("name", "namespace", "uid", "generation", "resourceVersion")
    return {
        "apiVersion": obj.get("apiVersion") or API_VERSION,
        "kind": obj.get("kind") or PREDICTIVE_SCALER.name,
        "metadata": {name: metadata[name] for name in kept if name in metadata},
        "spec": obj.get("spec"),
        "status": {"advice": (obj.get("status") or {}).get("advice")},
    }


def advice_spec(obj: dict[str, Any]) -> AdviceSpec | None:
    """The scaler's ``spec.advice``, parsed; None when it did not opt in."""
    raw = (obj.get("spec") or {}).get("advice")
    return None if raw is None else parse(AdviceSpec, raw, path="spec.advice")


def in_shard(obj: dict[str, Any], shard: int, shards: int) -> bool:
    metadata = obj.get("metadata") or {}
    return shard_of(str(metadata.get("namespace")), str(metadata.get("name")), shards) == shard


def due(obj: dict[str, Any], every: timedelta, now: datetime) -> bool:
    """Whether the scaler is to be advised now (module docstring)."""
    status = (obj.get("status") or {}).get("advice") or {}
    if status.get("error") or status.get("observedGeneration") != (obj.get("metadata") or {}).get("generation"):
        return True
    try:
        made = datetime.fromisoformat(status["time"])
    except (KeyError, TypeError, ValueError):
        return True
    return made + every <= now


def summary_line(advice: Advice, body: dict[str, Any]) -> str:
    """The AdviceReady Event's message: the saving and the changes when advised, then the verdict's line."""
    if advice.verdict != Verdict.ADVISED:
        return advice.message[:MESSAGE_LENGTH]
    changed = body.get("changes") or []
    saving = float(body.get("saving") or 0.0)
    head = (
        f"{len(changed)} change{'s' if len(changed) != 1 else ''} ({', '.join(c['field'] for c in changed)}) "
        f"would have used {saving:.1f} % fewer replica-hours held out; status.advice.patch applies them."
    )
    return f"{head} {advice.message}"[:MESSAGE_LENGTH]


class Advisor:
    """One run of ``presage advise`` over a cluster (module docstring)."""

    def __init__(self, client: KubeClient, options: AdviseOptions, *, clock: Callable[[], datetime]) -> None:
        self._client = client
        self._options = options
        self._clock = clock
        self._events = EventRecorder(client, host="presage-advise", min_spacing=timedelta(0))

    async def mine(self) -> list[tuple[dict[str, Any], AdviceSpec | None]]:
        """This shard's scalers that opted in, each kept as :func:`slim` keeps it, with its parsed
        ``spec.advice`` (None when it does not parse: advising it fails with the reason). Read a page at
        a time, so a run over thousands of scalers never holds more than a page of whole objects."""
        found = []
        async for page in self._client.pages(PREDICTIVE_SCALERS, self._options.namespace):
            for obj in page.get("items") or []:
                if (obj.get("spec") or {}).get("advice") is None:
                    continue
                if not in_shard(obj, self._options.shard, self._options.shards):
                    continue
                try:
                    found.append((slim(obj), advice_spec(obj)))
                except SpecError:
                    found.append((slim(obj), None))
        return found

    async def run(self) -> RunSummary:
        """Advise every scaler of this shard that is due."""
        summary = RunSummary()
        for obj, spec in await self.mine():
            name = key(obj)
            if spec is not None and not due(obj, spec.every, self._clock()):
                summary.not_due.append(name)
                continue
            try:
                verdict, error = await self.advise(obj)
            except NotFound:  # deleted since it was listed: nothing to advise
                log.info("advice not written scaler=%s: deleted", name)
                continue
            except ApiError as exc:  # the status could not be written: nothing else to tell it with
                summary.failed[name] = f"{UNWRITTEN}: {exc}"
                log.warning("advice not written scaler=%s error=%s", name, exc)
                continue
            if error is not None:
                summary.failed[name] = error
            else:
                summary.advised[name] = verdict
        return summary

    async def advise(self, obj: dict[str, Any]) -> tuple[str, str | None]:
        """Advise one scaler and write the outcome: its verdict, and None; or, when it failed, an empty
        verdict and the reason (written to ``status.advice.error``)."""
        now = self._clock()
        try:
            body, message = await self._advice(obj, now)
        except Exception as exc:  # one scaler's failure is written to it and never stops the run
            reason = _reason(exc)
            log.warning("advice failed scaler=%s error=%s", key(obj), reason, exc_info=not _expected(exc))
            await self._write(obj, failed_status(reason, now))
            await self._events.record(obj, "Warning", ADVICE_FAILED, f"presage advise: {reason}")
            return "", reason
        await self._write(obj, body)
        await self._events.record(obj, "Normal", ADVICE_READY, message)
        log.info("advised scaler=%s verdict=%s", key(obj), body["verdict"])
        return str(body["verdict"]), None

    async def _advice(self, obj: dict[str, Any], now: datetime) -> tuple[dict[str, Any], str]:
        wanted = advice_spec(obj)
        assert wanted is not None  # only opted-in scalers get here
        live = await live_scaler(self._client, obj, wanted.lookback, now, prometheus=self._options.prometheus)
        setup = TuneSetup(
            spec=live.spec,
            overrides=Overrides(),
            backend=backend_spec(live.backend),
            slo=Slo(float(wanted.service_level.removesuffix("%"))),
            warmup=self._options.warmup,
            holdout=self._options.holdout,
            jobs=max(1, self._options.jobs),
        )
        result = await asyncio.to_thread(tune, live.trace, setup)
        advice = advise(result)
        generation = int(obj["metadata"].get("generation") or 0)
        body = advice_status(result, advice, obj["spec"], wanted.service_level, generation, now)
        return body, summary_line(advice, body)

    async def _write(self, obj: dict[str, Any], advice: dict[str, Any]) -> dict[str, Any]:
        metadata = obj["metadata"]
        return await self._client.merge_patch(
            PREDICTIVE_SCALERS,
            metadata["namespace"],
            metadata["name"],
            {"status": {"advice": advice}},
            "status",
            field_manager=FIELD_MANAGER,
        )


def _expected(exc: Exception) -> bool:
    """Whether ``exc`` is a failure with a reason a user can act on (no traceback is logged)."""
    return isinstance(exc, (*ERRORS, TuneError, ApiError))


def _reason(exc: Exception) -> str:
    text = str(exc) if _expected(exc) else f"{type(exc).__name__}: {exc}"
    return text[:MESSAGE_LENGTH]


async def advise_cluster(
    config: KubeConfig, options: AdviseOptions, *, listing_only: bool, clock: Callable[[], datetime]
) -> int:
    """``presage advise``: one run, a line per scaler on stdout; the exit status of
    :mod:`presage_scaler.tune.advise_command`."""
    async with KubeClient(config, user_agent=FIELD_MANAGER) as client:
        advisor = Advisor(client, options, clock=clock)
        try:
            if listing_only:
                for obj, spec in await advisor.mine():
                    when = "due" if spec is None or due(obj, spec.every, clock()) else "not due"
                    print(f"{key(obj)} {when}")
                return 0
            summary = await advisor.run()
        except ApiError as exc:
            print(f"presage advise: listing PredictiveScalers: {exc}", file=sys.stderr)
            return 1
    for name, verdict in summary.advised.items():
        print(f"{name} {verdict}")
    for name, reason in summary.failed.items():
        print(f"{name} failed: {reason}")
    print(
        f"shard {options.shard} of {options.shards}: {len(summary.advised)} advised, {len(summary.failed)} failed, "
        f"{len(summary.not_due)} not due"
    )
    unwritten = [name for name, reason in summary.failed.items() if reason.startswith(UNWRITTEN)]
    return 1 if unwritten else 0

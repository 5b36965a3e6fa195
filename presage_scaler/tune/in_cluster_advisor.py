"""``presage advise``: tune every PredictiveScaler that is advised on its own history, as ``presage
tune --scaler`` does, and write what to do into its ``status.advice``. Which scalers are advised, and
with which settings, is :mod:`presage_scaler.api.advice_scope`: every scaler in Shadow unless it sets
``spec.advice.enabled: false`` (with ``spec.advice``'s defaults when it sets none), and a scaler in
Enforce that sets ``spec.advice``. A Shadow scaler that cannot be advised by default (the multi-signal
form) is skipped with the reason, which is not a failure; nothing of a scaler that is not advised or
skipped is read, and a scaler whose ForecastBackend cannot be tuned fails before its signal is read.

One run lists the scalers, keeps those of its shard (a key hash, so that the pods of an indexed Job
split them with none advised twice or missed) that are advised and due, and advises them one at a
time. A scaler is due when it was never advised, when its spec changed since (``metadata.generation``),
when its last attempt failed, or when ``spec.advice.every`` has passed since ``status.advice.time``; a
time that cannot be trusted (missing, unparsable, without an offset, or later than now: a year-9999
time included) makes it due, and advising it writes a true one. Each write is a merge patch of
``status.advice`` alone, under its own field manager, so it never touches what the controller writes;
``spec`` is never changed.

Nothing about one scaler stops the run or the others' advice. Each is attempted; one that cannot be
advised (its spec, its ForecastBackend, its Prometheus, its tuning, its status write) gets the reason
in ``status.advice.error`` where that write is possible (the advice made before it is kept) and a
Warning Event, and the run goes on. One advice has a total deadline (:class:`Deadline`): every request
it makes is cancelled when it passes, and tuning stops at its next progress report. Scalers whose last
attempt failed are attempted after the others, so one that fails slowly every run delays no one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from presage_scaler.api.advice_scope import Skipped, advice_settings
from presage_scaler.api.kinds import API_VERSION, PREDICTIVE_SCALER
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import AdviceSpec, PredictiveScalerSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.sharding import shard_of
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides, backend_spec
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET
from presage_scaler.backtest.runner import Progress
from presage_scaler.backtest.trace import Trace
from presage_scaler.clients.kube.client import ApiError, KubeClient, NotFound
from presage_scaler.clients.kube.credentials import KubeConfig
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.kube.presage_resources import PREDICTIVE_SCALERS
from presage_scaler.tune.advice_body import advice_status, failed_status
from presage_scaler.tune.errors import ERRORS, HistoryTooShort, TuneError
from presage_scaler.tune.forecast_cache import ForecastCache, cache_name, reusing
from presage_scaler.tune.from_cluster import live_scaler
from presage_scaler.tune.previous_advice import advise_after, previous_advice
from presage_scaler.tune.read_window import read_span, warmup_for
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import TuneSetup, tune
from presage_scaler.tune.verdict import Advice, Verdict

log = logging.getLogger(__name__)

FIELD_MANAGER = "presage-advise"
ADVICE_READY = "AdviceReady"
ADVICE_FAILED = "AdviceFailed"
UNWRITTEN = "writing status.advice"
MESSAGE_LENGTH = 1024
"""The most characters of an error or Event message written (an Event's message is cut there by the
API server too)."""
FEWER_POINTS = "a shorter spec.advice.lookback or a coarser spec.signal.resolution"
READING = (
    "reading its ForecastBackend and its signal's history",
    f"{FEWER_POINTS} needs fewer requests, and a query that Prometheus answers sooner (a recording rule) reads faster",
)
"""A step of one advice that its deadline can end: what it was doing, and what makes it take less."""
TUNING = ("tuning", f"{FEWER_POINTS} tunes fewer points")


@dataclass(frozen=True)
class AdviseOptions:
    """What one ``presage advise`` run covers and how it tunes."""

    deadline: timedelta
    """Each scaler's advice, reads and tuning together (:class:`Deadline`; ``--deadline``)."""
    shard: int = 0
    shards: int = 1
    namespace: str | None = None
    """Only this namespace; None: every namespace."""
    warmup: timedelta = DEFAULT_WARMUP
    holdout: timedelta | None = None
    jobs: int = 1
    prometheus: str | None = None
    """Replaces every query's address (for a run outside the cluster)."""
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    """Bytes one advice may take at its peak: a lookback estimated to take more is refused before it is
    read (:mod:`presage_scaler.backtest.memory`; ``--memory-budget``)."""
    cache: ForecastCache | None = None
    """Where each scaler's forecasts are kept for its next advice (``--cache-dir``); None: nowhere."""


class DeadlineExceeded(Exception):
    """One advice ran past its deadline; the message names the deadline, the step and what to change."""


@dataclass(frozen=True)
class Deadline:
    """When one advice must be done, on a monotonic clock. The reads are awaited under it (every
    request still going when it passes is cancelled); the tuning, which runs in a thread and cannot
    be interrupted, calls :meth:`progress` between chunks of its forecasting and replaying, which
    stops it there. What runs between two reports (planning, measuring, and with ``--jobs`` above 1
    the forecasts in worker processes) finishes before the deadline is noticed."""

    limit: timedelta
    expires: float
    """The monotonic clock's reading when ``limit`` has passed."""
    monotonic: Callable[[], float]

    @classmethod
    def starting(cls, limit: timedelta, monotonic: Callable[[], float]) -> Deadline:
        return cls(limit, monotonic() + limit.total_seconds(), monotonic)

    def remaining(self) -> float:
        """Seconds left; zero or less once passed."""
        return self.expires - self.monotonic()

    def exceeded(self, step: tuple[str, str]) -> DeadlineExceeded:
        """The error for passing the deadline during ``step`` (:data:`READING`, :data:`TUNING`)."""
        doing, remedy = step
        return DeadlineExceeded(
            f"{doing} took longer than the advice deadline of {format_duration(self.limit)} (presage advise "
            f"--deadline; the chart's advise.deadline): {remedy}"
        )

    def progress(self, _step: str, _done: int, _total: int) -> None:
        """A tuning progress report (:data:`presage_scaler.backtest.runner.Progress`) that stops the
        tuning once the deadline has passed."""
        if self.remaining() <= 0:
            raise self.exceeded(TUNING)


@dataclass
class RunSummary:
    """What one run did, by ``namespace/name``."""

    advised: dict[str, str] = field(default_factory=dict)
    """Each scaler advised and its verdict."""
    failed: dict[str, str] = field(default_factory=dict)
    """Each scaler that could not be advised and why."""
    not_due: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    """Each scaler whose history is still too short to advise on, and how much it has (not a failure:
    it is attempted again at every run, and advised once it has recorded enough)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Each Shadow scaler that cannot be advised by default, and why (not a failure: nothing of it is
    read; :mod:`presage_scaler.api.advice_scope`)."""
    listing_error: ApiError | None = None
    """Why listing the scalers stopped before its end (those listed before it are still advised)."""

    def line(self, shard: int, shards: int) -> str:
        """The run's last line on stdout, printed whatever happened."""
        return (
            f"shard {shard} of {shards}: {len(self.advised)} advised, {len(self.failed)} failed, "
            f"{len(self.not_due)} not due, {len(self.waiting)} waiting for history, {len(self.skipped)} skipped"
            + ("; listing failed" if self.listing_error is not None else "")
        )

    def exit_status(self) -> int:
        """0 when every due scaler was advised (or waits for history) and every scaler was listed; 1
        otherwise."""
        return 1 if self.failed or self.listing_error is not None else 0


@dataclass
class Listing:
    """This shard's scalers that are advised, as far as the listing went."""

    scalers: list[tuple[dict[str, Any], AdviceSpec | None]] = field(default_factory=list)
    """Each kept as :func:`slim` keeps it, with the settings it is advised with (None when its
    ``spec.advice`` does not parse)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Each Shadow scaler that cannot be advised by default, by ``namespace/name``, and why."""
    error: ApiError | None = None
    """Why the listing stopped before its last page; None when it read them all."""


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
    """The settings the scaler is advised with (:func:`~presage_scaler.api.advice_scope.advice_settings`);
    None when it is not advised or skipped. Raises :class:`SpecError` when its ``spec.advice`` does not
    parse."""
    settings = advice_settings(obj.get("spec"))
    return settings if isinstance(settings, AdviceSpec) else None


def read_span_of(obj: dict[str, Any], backend: dict[str, Any], warmup: timedelta) -> timedelta:
    """How far back an advice of the advised scaler ``obj`` (as stored) reads its signal, with its
    ForecastBackend's spec ``backend`` and a warm-up of ``warmup`` (:func:`read_span`)."""
    settings = advice_spec(obj)
    assert settings is not None  # only advised scalers are read
    spec = parse(PredictiveScalerSpec, obj["spec"], path="spec")
    return read_span(settings.lookback, warmup, spec, backend_spec(backend))


def in_shard(obj: dict[str, Any], shard: int, shards: int) -> bool:
    metadata = obj.get("metadata") or {}
    return shard_of(str(metadata.get("namespace")), str(metadata.get("name")), shards) == shard


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def failed_before(obj: dict[str, Any]) -> bool:
    """Whether the scaler's last attempt failed (its ``status.advice.error`` is set)."""
    return bool(_mapping(_mapping(obj.get("status")).get("advice")).get("error"))


def due(obj: dict[str, Any], every: timedelta, now: datetime) -> bool:
    """Whether the scaler is to be advised now (module docstring). Defined for any stored object: a
    ``status.advice`` of any shape or time answers, never raises."""
    status = _mapping(_mapping(obj.get("status")).get("advice"))
    if failed_before(obj) or status.get("observedGeneration") != _mapping(obj.get("metadata")).get("generation"):
        return True
    try:
        made = datetime.fromisoformat(status["time"])
    except (KeyError, TypeError, ValueError):
        return True
    # A difference of two datetimes never overflows, as the sum ``made + every`` does near the year 9999.
    return made.tzinfo is None or made > now or now - made >= every


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

    def __init__(
        self,
        client: KubeClient,
        options: AdviseOptions,
        *,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._options = options
        self._clock = clock
        self._monotonic = monotonic
        self._events = EventRecorder(client, host="presage-advise", min_spacing=timedelta(0))

    async def mine(self) -> Listing:
        """This shard's scalers that are advised, and those skipped (advising one whose ``spec.advice``
        does not parse fails with the reason). Read a page at a time, so a run over thousands of scalers
        never holds more than a page of whole objects; a page that cannot be read ends the listing with
        what it found."""
        listing = Listing()
        try:
            async for page in self._client.pages(PREDICTIVE_SCALERS, self._options.namespace):
                for obj in page.get("items") or []:
                    if not in_shard(obj, self._options.shard, self._options.shards):
                        continue
                    try:
                        settings = advice_settings(obj.get("spec"))
                    except SpecError:
                        listing.scalers.append((slim(obj), None))
                        continue
                    if isinstance(settings, Skipped):
                        listing.skipped[key(obj)] = settings.reason
                    elif settings is not None:
                        listing.scalers.append((slim(obj), settings))
        except ApiError as exc:
            listing.error = exc
        return listing

    async def run(self, summary: RunSummary) -> None:
        """Advise every scaler of this shard that is due, those whose last attempt failed last, and
        record each in ``summary`` as it goes (so that it holds what was done whatever stops the run)."""
        listing = await self.mine()
        summary.listing_error = listing.error
        summary.skipped = listing.skipped
        for obj, spec in sorted(listing.scalers, key=lambda scaler: failed_before(scaler[0])):
            name = key(obj)
            if spec is not None and not due(obj, spec.every, self._clock()):
                summary.not_due.append(name)
                continue
            try:
                verdict, error = await self.advise(obj)
            except NotFound:  # deleted since it was listed: nothing to advise
                log.info("advice not written scaler=%s: deleted", name)
                continue
            except Exception as exc:  # a fault in advising one scaler stops only it
                summary.failed[name] = _reason(exc)
                log.error("advice failed scaler=%s error=%s", name, summary.failed[name], exc_info=True)
                continue
            if error is None:
                summary.advised[name] = verdict
            elif verdict == Verdict.NOT_ENOUGH_HISTORY:
                summary.waiting[name] = error
            else:
                summary.failed[name] = error

    async def advise(self, obj: dict[str, Any]) -> tuple[str, str | None]:
        """Advise one scaler and write the outcome: its verdict, and None; or, when it failed, an empty
        verdict (``NotEnoughHistory`` when its history is too short yet) and the reason (written to
        ``status.advice.error`` where that write is possible). Raises :class:`NotFound` when the scaler
        was deleted."""
        now = self._clock()
        try:
            body, message = await self._advice(obj, now)
        except Exception as exc:  # one scaler's failure is written to it and never stops the run
            verdict = Verdict.NOT_ENOUGH_HISTORY if isinstance(exc, HistoryTooShort) else ""
            return verdict, await self._failed(obj, _reason(exc), now, traceback=not _expected(exc))
        try:
            await self._write(obj, body)
        except NotFound:
            raise
        except ApiError as exc:  # the advice is refused; its error may still be written
            return "", await self._failed(obj, f"{UNWRITTEN}: {exc}"[:MESSAGE_LENGTH], now, traceback=False)
        await self._events.record(obj, "Normal", ADVICE_READY, message)
        log.info("advised scaler=%s verdict=%s", key(obj), body["verdict"])
        return str(body["verdict"]), None

    async def _failed(self, obj: dict[str, Any], reason: str, now: datetime, *, traceback: bool) -> str:
        """Write ``reason`` to ``status.advice.error`` with a Warning Event; the reason as the run reports
        it (with the write's own error when that failed too)."""
        log.warning("advice failed scaler=%s error=%s", key(obj), reason, exc_info=traceback)
        try:
            await self._write(obj, failed_status(reason, now))
        except NotFound:
            raise
        except ApiError as exc:  # the status could not be written: nothing else to tell it with
            log.warning("advice error not written scaler=%s error=%s", key(obj), exc)
            return f"{reason}; {UNWRITTEN}.error: {exc}"
        await self._events.record(obj, "Warning", ADVICE_FAILED, f"presage advise: {reason}")
        return reason

    async def _advice(self, obj: dict[str, Any], now: datetime) -> tuple[dict[str, Any], str]:
        wanted = advice_spec(obj)
        assert wanted is not None  # only advised scalers get here
        deadline = Deadline.starting(self._options.deadline, self._monotonic)
        reading = asyncio.timeout(deadline.remaining())
        try:
            async with reading:
                live = await live_scaler(
                    self._client,
                    obj,
                    wanted.lookback,
                    now,
                    warmup=self._options.warmup,
                    prometheus=self._options.prometheus,
                    memory_budget=self._options.memory_budget,
                    jobs=max(1, self._options.jobs),
                )
        except TimeoutError:
            if not reading.expired():
                raise
            raise deadline.exceeded(READING) from None
        return await asyncio.to_thread(
            advice_from, live.trace, obj, live.backend, self._options, now, deadline.progress
        )

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


def advice_from(
    trace: Trace,
    obj: dict[str, Any],
    backend: dict[str, Any],
    options: AdviseOptions,
    now: datetime,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], str]:
    """What one advice writes into ``status.advice`` of the scaler ``obj`` (as stored, advised) from what it
    read at ``now``: its signal's history ``trace`` and its ForecastBackend's spec ``backend``; and the
    AdviceReady Event's message. The tuning, the verdict weighed against the previous advice, and the body:
    everything after the reads, which ``benchmarks/bench_lifecycle.py`` calls as a run in the cluster does.
    What ``trace`` holds before ``spec.advice.lookback`` is warm-up (:mod:`presage_scaler.tune.read_window`)."""
    wanted = advice_spec(obj)
    assert wanted is not None  # only advised scalers get here
    setup = TuneSetup(
        spec=obj["spec"],
        overrides=Overrides(),
        backend=backend_spec(backend),
        slo=Slo(float(wanted.service_level.removesuffix("%"))),
        warmup=warmup_for(len(trace) * trace.step, wanted.lookback, options.warmup),
        holdout=options.holdout,
        jobs=max(1, options.jobs),
        memory_budget=options.memory_budget,
        baselines=False,  # status.advice holds presage's figures alone
    )
    with reusing(options.cache, cache_name(obj["metadata"])) as store:
        result = tune(trace, setup, progress, store)
    before = _mapping(obj.get("status")).get("advice")
    result, advice = advise_after(result, previous_advice(before, obj["spec"], backend))
    generation = int(obj["metadata"].get("generation") or 0)
    body = advice_status(result, advice, obj["spec"], wanted.service_level, generation, now, before)
    return body, summary_line(advice, body)


def _expected(exc: Exception) -> bool:
    """Whether ``exc`` is a failure with a reason a user can act on (no traceback is logged)."""
    return isinstance(exc, (*ERRORS, TuneError, ApiError, DeadlineExceeded))


def _reason(exc: Exception) -> str:
    text = str(exc) if _expected(exc) else f"{type(exc).__name__}: {exc}"
    return text[:MESSAGE_LENGTH]


def _print_listing(listing: Listing, clock: Callable[[], datetime]) -> int:
    """``--list``: each scaler advised and whether it is due, then each skipped and why; 1 when the
    listing stopped before its end."""
    for obj, spec in listing.scalers:
        print(f"{key(obj)} {'due' if spec is None or due(obj, spec.every, clock()) else 'not due'}")
    for name, reason in listing.skipped.items():
        print(f"{name} skipped: {reason}")
    if listing.error is None:
        return 0
    print(f"presage advise: listing PredictiveScalers: {listing.error}", file=sys.stderr)
    return 1


def _print_summary(summary: RunSummary, options: AdviseOptions) -> None:
    for name, verdict in summary.advised.items():
        print(f"{name} {verdict}")
    for name, reason in summary.failed.items():
        print(f"{name} failed: {reason}")
    for name, reason in summary.waiting.items():
        print(f"{name} waiting for history: {reason}")
    for name, reason in summary.skipped.items():
        print(f"{name} skipped: {reason}")
    if summary.listing_error is not None:
        print(f"presage advise: listing PredictiveScalers: {summary.listing_error}", file=sys.stderr)
    print(summary.line(options.shard, options.shards))


async def advise_cluster(
    config: KubeConfig,
    options: AdviseOptions,
    *,
    listing_only: bool,
    clock: Callable[[], datetime],
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """``presage advise``: one run, a line per scaler advised or failed and the summary line on stdout,
    printed whatever stops the run; the exit status of :mod:`presage_scaler.cli.advise`."""
    async with KubeClient(config, user_agent=FIELD_MANAGER) as client:
        advisor = Advisor(client, options, clock=clock, monotonic=monotonic)
        if listing_only:
            return _print_listing(await advisor.mine(), clock)
        summary = RunSummary()
        try:
            await advisor.run(summary)
        finally:
            _print_summary(summary, options)
    return summary.exit_status()

"""An async client for the Prometheus HTTP query API (Prometheus, Thanos, VictoriaMetrics, Mimir).

Every query must evaluate to **exactly one series**. More than one raises :class:`TooManySeries`;
none raises :class:`NoData`. An empty answer is never read as zero: a scaler that silently sees
zero demand would scale a busy workload to its minimum.

Range results are placed on the regular grid ``start, start + step, ..., <= end`` and gap-filled
because forecasting backends need finite values on a regular step:

* a step is a *gap* when Prometheus returned no sample for it (the series was absent or stale,
  i.e. no raw sample within the lookback delta, 5m by default) or returned NaN or +-Inf;
* leading gaps are **dropped**, not filled: the series starts at its first valid step (still on
  the grid) and the dropped count is ``leading_gaps_dropped``. Padding them would invent history
  for a series that did not exist yet (a new workload would look like weeks of flat demand and
  hide a cold start from the backend);
* interior gaps are filled by linear interpolation between the nearest valid neighbours
  (:func:`fill_gaps`), trailing gaps take the last valid value;
* the number of filled steps is ``gap_steps`` (trailing ones also in ``trailing_gap_steps``:
  a non-zero value means :attr:`SampledSeries.latest` is stale);
* when no step is valid the query raises :class:`NoData`.

What an answer may cost is bounded, since the address is the user's to choose: a range longer than
:data:`MAX_POINTS_PER_QUERY` is refused before anything is asked or allocated, an answer is read
within :data:`MAX_ANSWER_BYTES` on the wire and once inflated (gzip and deflate are inflated by
:func:`~presage_scaler.backends.bounded_body.read_body`, never by aiohttp), a series may hold no more
samples than the steps it was asked for, and a second series ends the reading (:class:`TooManySeries`).
Over a bound, the query raises :class:`AnswerTooLarge`. Parsing cannot recurse without bound (the
JSON decoder stops at Python's recursion limit) and numbers out of range (``1e400`` or a 400-digit
timestamp) are a malformed answer, :class:`QueryFailed`, like any other.

Every failure is a :class:`PrometheusError` whose ``reason`` is the CamelCase Kubernetes
condition reason to report.

Each request carries a :class:`Connection`: headers (the Authorization header among them), resolved
from a PredictiveScaler's Secrets (:func:`presage_scaler.clients.prometheus_connection.resolve_connection`) or from
``presage backtest``'s flags, and TLS material (:class:`TLSSettings`), which decides the pooled session
a request goes over (:class:`PrometheusClientPool`).

Requests go over aiohttp rather than httpx for CPU: the controller sends one query per evaluation,
and aiohttp spends several times less client CPU per request (``benchmarks/bench_http_clients.py``
measures the ratio).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import ssl
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from types import TracebackType
from typing import Any, Self

import aiohttp
import numpy as np

from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import History
from presage_scaler.backends.bounded_body import ACCEPT_ENCODING, BodyTooLarge, UnreadableBody, excerpt, read_body
from presage_scaler.clients.httppool import MAX_CONNECTIONS
from presage_scaler.series.timegrid import align_down

#: Prometheus refuses range queries of more than 11,000 points per series; longer ranges are
#: split into several requests of at most this many points.
MAX_POINTS_PER_REQUEST = 11_000

MAX_POINTS_PER_QUERY = 1 << 22
"""The most points one range query may span: 4,194,304, 48.5 days at 1s, the finest resolution the
CRD allows. The longest legitimate query is an advice lookback of 28 days (its default) at 1s:
2,419,200 points, fetched in 220 requests of :data:`MAX_POINTS_PER_REQUEST`. Refused before the first
request, since the grid alone takes 8 bytes a point (32 MiB here) and the gap filling a few times that."""

MAX_ENDPOINTS = 256
"""Endpoints (an address with one TLS setting) a :class:`PrometheusClientPool` keeps before it closes idle ones."""

ENDPOINT_IDLE_SECONDS = 600.0
"""How long an endpoint must go unused before a full pool closes it: twice the longest evaluation deadline."""

MAX_ANSWER_BYTES = 4 << 20
"""The most bytes one answer may take, on the wire and once inflated: 4 MiB. A legitimate answer is one
series of at most :data:`MAX_POINTS_PER_REQUEST` points. A sample is written ``[1714521600.123,"v"],``:
18 bytes around a value of at most 26 characters (Prometheus writes values in full, not in exponent
form, and a value up to 1e25 takes 26), so 11,000 samples take at most 11,000 x 64 = 704,000 bytes,
and with 64 KiB of labels about 0.77 MB: the limit leaves more than five times that. Decoded, the
answer's Python objects take up to ~20 times its bytes, one decoding at a time (decoding does not yield
to the event loop); the controller's 32 evaluations in flight buffer at most 128 MiB of answers."""


# --- errors --------------------------------------------------------------------------------


class PrometheusError(Exception):
    """A query could not produce a usable value. ``reason`` is the condition reason to report."""

    reason = Reason.PROMETHEUS_ERROR


class PrometheusUnreachable(PrometheusError):
    """The server did not answer: connection refused, DNS failure, TLS failure or timeout."""

    reason = Reason.PROMETHEUS_UNREACHABLE


class QueryFailed(PrometheusError):
    """The server answered with an error (HTTP 4xx/5xx, ``status: error`` or an unusable body)."""

    reason = Reason.QUERY_FAILED

    def __init__(self, message: str, *, status_code: int | None = None, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_type = error_type


class AnswerTooLarge(QueryFailed):
    """A query is over one of presage's bounds on what it reads: the points a range spans, the bytes of
    an answer (declared, on the wire or inflated), or the samples a series holds. ``limit`` names the
    bound; the message says it, the query, and what to change."""

    def __init__(self, query: str, limit: str, advice: str) -> None:
        super().__init__(f"query {query!r}: {limit}; {advice}")
        self.query = query
        self.limit = limit


class InvalidTLSMaterial(PrometheusError):
    """A CA bundle, client certificate or key cannot be used: not PEM, an encrypted key, or a key that is
    not the certificate's. The message names where it came from (a Secret's key, or a flag)."""

    reason = Reason.SECRET_INVALID


class TooManySeries(PrometheusError):
    """The query returned more than one series."""

    reason = Reason.TOO_MANY_SERIES

    def __init__(self, query: str, count: int) -> None:
        super().__init__(
            f"query {query!r} returned {count} series, expected exactly 1; aggregate it "
            "(for example sum(...) or max(...)) or narrow its label matchers"
        )
        self.query = query
        self.count = count


class NoData(PrometheusError):
    """The query returned no series, or only NaN/Inf samples."""

    reason = Reason.NO_DATA

    def __init__(self, query: str, detail: str = "returned no data") -> None:
        super().__init__(
            f"query {query!r} {detail}; check the metric name and label matchers, and that the metric is being scraped"
        )
        self.query = query


class InvalidValue(PrometheusError):
    """An instant query returned NaN or +-Inf."""

    reason = Reason.INVALID_VALUE


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampledSeries:
    """One series on the regular grid ``start + i * step``, gap-filled (finite values only)."""

    values: np.ndarray
    step: timedelta
    start: datetime
    gap_steps: int
    labels: dict[str, str] = field(default_factory=dict)
    trailing_gap_steps: int = 0
    leading_gaps_dropped: int = 0
    gaps: np.ndarray | None = field(default=None, compare=False, repr=False)
    """Which of ``values`` were gap-filled (True), when the reader kept track."""

    @property
    def end(self) -> datetime:
        """The time of the last value."""
        return self.start + (len(self.values) - 1) * self.step

    @property
    def latest(self) -> float:
        """The last value (stale, i.e. carried forward, when ``trailing_gap_steps`` > 0)."""
        return float(self.values[-1])

    def history(self) -> History:
        """The values as a backend :class:`History`."""
        return History(values=self.values, step=self.step)


def fill_gaps(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Fill non-finite entries; return ``(filled, gap_count)``.

    Interior gaps are interpolated linearly between the nearest finite neighbours (by index;
    the grid is regular), trailing gaps take the last finite value and leading gaps, if any,
    the first (:meth:`PrometheusClient.query_range` drops leading gaps before calling this).
    All-gap input is returned unchanged (all NaN); callers treat it as no data.
    """
    values = np.asarray(values, dtype=np.float64)
    valid = np.isfinite(values)
    gaps = int(values.size - np.count_nonzero(valid))
    if gaps == 0 or gaps == values.size:
        return values.copy(), gaps
    index = np.arange(values.size)
    # np.interp clamps outside the known points, which is exactly the leading/trailing rule.
    return np.interp(index, index[valid], values[valid]), gaps


def history_window(
    history: timedelta, resolution: timedelta, max_points: int | None, now: datetime
) -> tuple[datetime, datetime]:
    """The ``(start, end)`` of a range query covering ``history`` at ``resolution``.

    ``end`` is ``now`` aligned down to a multiple of ``resolution`` since the Unix epoch, so
    successive evaluations sample the same grid (and see the same values for the same past
    steps). The window holds ``history // resolution`` points (at least 1), capped at
    ``max_points`` (the backend's maximum context), i.e. ``start = end - (points - 1) * resolution``.
    """
    _require_aware(now, "now")
    if resolution <= timedelta(0):
        raise ValueError(f"resolution must be positive, got {resolution}")
    points = max(1, history // resolution)
    if max_points is not None:
        points = max(1, min(points, max_points))
    end = align_down(now, resolution)
    return end - (points - 1) * resolution, end


# --- client --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TLSSettings:
    """TLS for one endpoint, all PEM: the CA bundle that verifies the server (None: the system's trusted
    CAs), and a client certificate and key for mutual TLS (both or neither); or verification off.

    ``ca_from`` and ``cert_from`` say where the material came from (a Secret and its keys, or a flag), so
    that an error names it; they take no part in comparing settings."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    insecure_skip_verify: bool = False
    ca_from: str = field(default="the CA bundle", compare=False)
    cert_from: str = field(default="the client certificate and key", compare=False)

    @cached_property
    def fingerprint(self) -> str:
        """A digest of the material and the verify setting: equal for the same TLS, whoever holds it."""
        digest = hashlib.sha256(b"verify-off" if self.insecure_skip_verify else b"verify")
        for part in (self.ca, self.cert, self.key):
            digest.update(b"-" if part is None else len(part).to_bytes(8, "big") + part)
        return digest.hexdigest()

    def context(self) -> ssl.SSLContext | bool:
        """The context a connection uses (True: aiohttp's default, the system's CAs). Raises
        :class:`InvalidTLSMaterial` naming the part that cannot be used."""
        if self.ca is None and self.cert is None and not self.insecure_skip_verify:
            return True
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.ca is not None:
            # The certificates alone: a bundle may carry text around them (openssl x509 -text) that cadata refuses.
            blocks = _PEM_CERTIFICATE.findall(self.ca)
            try:
                if not blocks:
                    raise ValueError("no BEGIN CERTIFICATE line")
                # A context with a CA bundle trusts that bundle only, as KEDA's custom CA does.
                cadata = b"\n".join(blocks).decode("ascii")
                context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=cadata)
            except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
                raise InvalidTLSMaterial(f"{self.ca_from} is not a PEM CA bundle ({_ssl_reason(exc)})") from exc
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if (self.cert is None) != (self.key is None):
            raise InvalidTLSMaterial(f"{self.cert_from}: a client certificate needs its key, and a key its certificate")
        if self.cert is not None and self.key is not None:
            if problem := _pem_problem(self.cert, self.key):
                raise InvalidTLSMaterial(f"{self.cert_from}: {problem}")
            try:
                with _pem_paths(self.cert, self.key) as (cert, key):
                    # An empty password: an encrypted key fails here instead of prompting on a terminal.
                    context.load_cert_chain(cert, key, password=b"")
            except (ssl.SSLError, OSError) as exc:
                raise InvalidTLSMaterial(
                    f"{self.cert_from} cannot be used ({_ssl_reason(exc)}); they must be PEM, the key unencrypted "
                    "and the certificate's own"
                ) from exc
        return context


@dataclass(frozen=True)
class Connection:
    """Everything a request to one Prometheus carries beside the query, resolved (no Secret references):
    headers, the Authorization header among them, and the endpoint's TLS.

    ``credentials`` says where the Authorization header came from ("the username and password in Secret
    shop/prom", "--basic-auth presage"), so that an HTTP 401 or 403 names what to check; None when no
    credentials are sent."""

    headers: tuple[tuple[str, str], ...] = ()
    tls: TLSSettings = TLSSettings()
    credentials: str | None = None


class _Endpoint:
    """One pooled ``aiohttp.ClientSession`` to one endpoint with one TLS setting, shared by every
    client of that endpoint whatever its headers and credentials (they travel per request).

    A request takes one of the pool's MAX_CONNECTIONS :attr:`slots` before it starts, and its
    timeout runs from then: the wait for a connection of presage's own pool is the controller's
    load, not Prometheus's slowness. Counted in the timeout, it marked scalers PrometheusUnreachable
    in bursts under load (10,000 scalers on two cores), blaming Prometheus for presage's own queue.
    The evaluation's own deadline still bounds the wait.

    ``in_flight`` and ``last_used`` let a pool close it only when idle."""

    def __init__(self, tls: TLSSettings, *, timeout: float, now: float = 0.0) -> None:
        self._ssl = tls.context()
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self.slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self.in_flight = 0
        self.last_used = now

    def session(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop, as aiohttp requires.
        if self._session is None:
            # Answers are inflated by read_body, within MAX_ANSWER_BYTES; aiohttp's inflation is unbounded.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=MAX_CONNECTIONS),
                headers={"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING},
                timeout=self._timeout,
                auto_decompress=False,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


class PrometheusClient:
    """A client for one Prometheus-compatible endpoint, over its own pooled session or one a
    :class:`PrometheusClientPool` shares.

    ``address`` is the API base URL and may carry a path prefix (for example
    ``http://vmselect:8481/select/0/prometheus``); ``/api/v1/...`` is appended to it.
    Queries are sent as form-encoded POSTs so that long PromQL does not hit URL length limits.
    ``timeout`` bounds each request as a whole (connecting, sending and reading the answer), from
    when it holds one of the endpoint's connection slots.
    ``connection`` holds the headers every request carries and the TLS settings; by default none, and
    the system's trusted CAs verify the server. A client with its own endpoint raises
    :class:`InvalidTLSMaterial` here when its TLS material cannot be used.
    """

    def __init__(
        self,
        address: str,
        *,
        connection: Connection = Connection(),
        timeout: float = 10.0,
        endpoint: _Endpoint | None = None,
    ) -> None:
        self.address = address.rstrip("/")
        self._headers = dict(connection.headers)
        self._credentials = connection.credentials
        self._owns_endpoint = endpoint is None
        self._endpoint = endpoint or _Endpoint(connection.tls, timeout=timeout)

    async def aclose(self) -> None:
        """Close the session, unless it is a pool's (the pool closes it)."""
        if self._owns_endpoint:
            await self._endpoint.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def query_range(self, query: str, start: datetime, end: datetime, step: timedelta) -> SampledSeries:
        """Evaluate ``query`` on the grid ``start, start + step, ..., <= end``; see the module doc.

        The result starts at the first valid step, so it can be shorter than the requested
        range. Ranges longer than :data:`MAX_POINTS_PER_REQUEST` points are fetched in several
        requests.
        Raises :class:`TooManySeries` unless the query yields exactly one series over the whole
        range, and :class:`NoData` when it yields none or only NaN/Inf samples.
        """
        _require_aware(start, "start")
        _require_aware(end, "end")
        if step <= timedelta(0):
            raise ValueError(f"step must be positive, got {step}")
        if end < start:
            raise ValueError(f"end {end.isoformat()} is before start {start.isoformat()}")
        points = (end - start) // step + 1
        if points > MAX_POINTS_PER_QUERY:
            raise AnswerTooLarge(
                query,
                f"{start.isoformat()} to {end.isoformat()} at a {format_duration(step)} step is {points} points, "
                f"over the limit of {MAX_POINTS_PER_QUERY} points per query (28 days at 1s is 2,419,200)",
                "use a coarser resolution or a shorter history (or advice lookback)",
            )
        raw = np.full(points, np.nan)
        labels: list[dict[str, str]] = []
        for first in range(0, points, MAX_POINTS_PER_REQUEST):
            last = min(first + MAX_POINTS_PER_REQUEST, points) - 1
            params = {
                "query": query,
                "start": _unix(start + first * step),
                "end": _unix(start + last * step),
                "step": _seconds(step),
            }
            self._place(
                query, await self._api("/api/v1/query_range", params), raw, labels, start, step, last - first + 1
            )
        if not labels:
            raise NoData(query)
        valid = np.flatnonzero(np.isfinite(raw))
        if valid.size == 0:
            raise NoData(query, "returned only NaN or infinite samples")
        first, last = int(valid[0]), int(valid[-1])
        filled, gaps = fill_gaps(raw[first:])
        return SampledSeries(
            values=filled,
            step=step,
            start=start + first * step,
            gap_steps=gaps,
            labels=labels[0],
            trailing_gap_steps=points - 1 - last,
            leading_gaps_dropped=first,
            gaps=~np.isfinite(raw[first:]),
        )

    @staticmethod
    def _place(
        query: str,
        data: dict[str, Any],
        raw: np.ndarray,
        labels: list[dict[str, str]],
        start: datetime,
        step: timedelta,
        asked: int,
    ) -> None:
        """Put one answer's samples on the grid ``raw`` (which starts at ``start``) and add its series'
        labels to ``labels``. ``asked`` is how many steps the request spanned: an answer with more
        samples than that is refused before they are read one by one."""
        if data.get("resultType") != "matrix":
            raise QueryFailed(
                f"query_range for {query!r} returned {excerpt(repr(data.get('resultType')))}, not a matrix"
            )
        samples = 0
        with _malformed(query):
            for series in data.get("result") or []:
                metric = series.get("metric", {})
                if metric not in labels:
                    labels.append(metric)
                if len(labels) > 1:
                    # Over the full range these would have been separate series too.
                    raise TooManySeries(query, _series_count(data, labels))
                if "values" not in series:
                    raise QueryFailed(_HISTOGRAM_HINT.format(query=query))
                samples += len(series["values"])
                if samples > asked:
                    raise AnswerTooLarge(
                        query,
                        f"the answer holds more than the {asked} samples a series has for the {asked} steps asked for",
                        "check that the address is a Prometheus-compatible query API",
                    )
                origin, seconds, points = start.timestamp(), step.total_seconds(), len(raw)
                for timestamp, text in series["values"]:
                    index = round((float(timestamp) - origin) / seconds)
                    if 0 <= index < points:
                        raw[index] = _parse_value(text)

    async def query_instant(self, query: str, at: datetime | None = None) -> float:
        """Evaluate ``query`` at ``at`` (server time when None); must yield exactly one value.

        Accepts a one-sample vector or a scalar. Raises :class:`TooManySeries`, :class:`NoData`,
        or :class:`InvalidValue` when the value is NaN or +-Inf.
        """
        params = {"query": query}
        if at is not None:
            _require_aware(at, "at")
            params["time"] = _unix(at)
        data = await self._api("/api/v1/query", params)
        result_type = data.get("resultType")
        result: Any = data.get("result")  # decoded JSON, None included: _malformed reports a wrong shape
        with _malformed(query):
            if result_type == "scalar":
                text = result[1]
            elif result_type == "vector":
                if not result:
                    raise NoData(query)
                if len(result) > 1:
                    raise TooManySeries(query, len(result))
                if "value" not in result[0]:
                    raise QueryFailed(_HISTOGRAM_HINT.format(query=query))
                text = result[0]["value"][1]
            else:
                raise QueryFailed(
                    f"query {query!r} returned a {excerpt(repr(result_type))}, expected a vector or scalar"
                )
            value = _parse_value(text)
        if not math.isfinite(value):
            raise InvalidValue(
                f"query {query!r} returned {excerpt(str(text))}; guard divisions and rates so it yields a finite number"
            )
        return value

    async def _api(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        """POST a query and return the response's ``data``; map every failure to an error type."""
        # The full URL rather than aiohttp's base_url, so an address's path prefix always stays.
        url = self.address + path
        self._endpoint.in_flight += 1
        try:
            async with (
                self._endpoint.slots,
                self._endpoint.session().post(url, data=params, headers=self._headers) as response,
            ):
                status = response.status
                payload = await read_body(response, MAX_ANSWER_BYTES)
        except BodyTooLarge as exc:
            raise AnswerTooLarge(
                params["query"],
                f"{url} answered HTTP {status}: {exc}",
                f"one series of {MAX_POINTS_PER_REQUEST} points takes well under it, so make the query yield one "
                "series (aggregate it, for example sum(...) or max(...), or narrow its label matchers) and check "
                "that the address is a Prometheus query API",
            ) from exc
        except UnreadableBody as exc:
            raise QueryFailed(
                f"query {params['query']!r}: {url} answered HTTP {status}: {exc}; check that the address is a "
                "Prometheus query API",
                status_code=status,
            ) from exc
        except TimeoutError as exc:  # aiohttp's own timeout errors subclass it too
            raise PrometheusUnreachable(
                f"Prometheus at {self.address} timed out ({type(exc).__name__}); check that it is "
                "healthy, or make the query cheaper"
            ) from exc
        except aiohttp.ClientError as exc:
            hint = _TLS_HINT if _tls_failure(exc) else "check the address, the Service and any NetworkPolicy"
            if self.address.startswith("https://") and hint != _TLS_HINT:
                # A server refusing a client certificate may just reset the connection, with no TLS alert.
                hint += ", and the TLS settings: " + _TLS_CHECKS
            raise PrometheusUnreachable(
                f"cannot reach Prometheus at {self.address}: {exc or type(exc).__name__}; {hint}"
            ) from exc
        finally:
            self._endpoint.in_flight -= 1
        try:
            body = json.loads(payload)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the recursion limit
            body = None
        if status in _AUTH_STATUSES:
            # Refused before any query ran, often with a plain-text body ("Unauthorized") from a proxy or
            # Prometheus's own web config: what to check is the credentials, whatever the body says.
            said = body.get("error") if isinstance(body, dict) else payload.decode(errors="replace").strip()
            raise QueryFailed(
                f"query {params['query']!r} failed with HTTP {status} ({excerpt(str(said), 200)}); "
                f"{_auth_hint(status, self._credentials)}",
                status_code=status,
            )
        if not isinstance(body, dict):
            snippet = payload.decode(errors="replace")[:200].strip()
            raise QueryFailed(
                f"{url} answered HTTP {status} with a non-Prometheus "
                f"body ({snippet!r}); check that the address is a Prometheus query API base URL",
                status_code=status,
            )
        if status >= 400 or body.get("status") != "success":
            error_type, error = body.get("errorType"), body.get("error", "no error message")
            hint = _STATUS_HINTS.get(status, "check the query and the server's logs")
            raise QueryFailed(
                f"query {params['query']!r} failed with HTTP {status} ({excerpt(str(error_type))}): "
                f"{excerpt(str(error), 500)}; {hint}",
                status_code=status,
                error_type=error_type if isinstance(error_type, str) else None,
            )
        data = body.get("data")
        if not isinstance(data, dict):
            raise QueryFailed(f"query {params['query']!r}: response has no data object")
        return data


class PrometheusClientPool:
    """One connection pool per endpoint, shared by every scaler that queries it.

    The controller evaluates many scalers against few Prometheus servers; sharing sessions keeps
    connections alive between evaluations. Sessions are keyed by the address and the TLS settings'
    :attr:`~TLSSettings.fingerprint` only: headers and credentials travel with each request, so rotating a
    password or a token (or many tenants' tenant headers) opens nothing new, while two tenants' TLS
    material never shares a connection.

    Rotated certificates leave endpoints nobody uses any more. Past :data:`MAX_ENDPOINTS`, each new endpoint
    closes the least recently used ones that are idle (no request in flight, unused for
    :data:`ENDPOINT_IDLE_SECONDS`, longer than an evaluation's deadline, so no client handed out is still
    about to use one) until the pool is back at the bound or none is idle.
    """

    def __init__(self, *, timeout: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout = timeout
        self._clock = clock
        self._endpoints: OrderedDict[tuple[str, str], _Endpoint] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, address: str, connection: Connection | None = None) -> PrometheusClient:
        """A client of ``address`` with ``connection``'s headers and TLS, over the pooled session for them.
        Raises :class:`InvalidTLSMaterial` when a new endpoint's TLS material cannot be used."""
        connection = connection or Connection()
        key = (address.rstrip("/"), connection.tls.fingerprint)
        now = self._clock()
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            endpoint = self._endpoints[key] = _Endpoint(connection.tls, timeout=self._timeout, now=now)
            self._close_idle(now)
        self._endpoints.move_to_end(key)
        endpoint.last_used = now
        return PrometheusClient(address, connection=connection, endpoint=endpoint)

    def _close_idle(self, now: float) -> None:
        for key in list(self._endpoints):
            if len(self._endpoints) <= MAX_ENDPOINTS:
                return
            endpoint = self._endpoints[key]
            if endpoint.in_flight == 0 and now - endpoint.last_used > ENDPOINT_IDLE_SECONDS:
                del self._endpoints[key]
                task = asyncio.get_running_loop().create_task(endpoint.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    @property
    def sessions(self) -> int:
        """How many endpoints hold a pool (for tests: rotating a credential must not add one)."""
        return len(self._endpoints)

    async def aclose(self) -> None:
        endpoints, self._endpoints = list(self._endpoints.values()), OrderedDict()
        for endpoint in endpoints:
            await endpoint.aclose()
        if self._closing:
            await asyncio.gather(*self._closing)


# --- helpers -------------------------------------------------------------------------------

_HISTOGRAM_HINT = (
    "query {query!r} returned native histogram samples; reduce them to a number "
    "(for example histogram_quantile(...) or histogram_count(...))"
)

_STATUS_HINTS = {
    400: "fix the PromQL",
    404: "check the address (it should be the base URL in front of /api/v1)",
    422: "the query could not be executed; check the PromQL",
    503: "the server is overloaded or still starting",
}
_AUTH_STATUSES = (401, 403)
_TLS_CHECKS = "the CA bundle that verifies the server and, when the server asks for one, the client certificate"
_TLS_HINT = f"the TLS handshake failed: check {_TLS_CHECKS}"


def _auth_hint(status: int, credentials: str | None) -> str:
    """What to check when the server refused the request (HTTP 401 or 403), given the credentials sent."""
    if credentials is None:
        return (
            "the server asks for credentials (basic auth or a bearer token) or, for a multi-tenant Mimir, Cortex "
            "or Thanos, the tenant header X-Scope-OrgID"
            if status == 401
            else "the server refuses this request: check the headers sent (a tenant header) and its access rules"
        )
    if status == 401:
        return f"the server refused {credentials}: check the username, password or token there"
    return f"{credentials} may not run this query: check what the server grants them"


def _tls_failure(exc: BaseException) -> bool:
    """Whether a connection failed in TLS: a handshake aiohttp saw fail, or a TLS alert read afterwards
    (a server that requires a client certificate says so only once TLS 1.3's handshake is over)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError | aiohttp.ClientSSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def _pem_problem(cert: bytes, key: bytes) -> str | None:
    """What is plainly wrong with a client certificate and key, before OpenSSL says "PEM lib"."""
    if b"-----BEGIN CERTIFICATE-----" not in cert:
        return "the certificate is not PEM (no BEGIN CERTIFICATE line)"
    if b"PRIVATE KEY-----" not in key:
        return "the key is not a PEM private key (no BEGIN ... PRIVATE KEY line)"
    if b"ENCRYPTED" in key:
        return "the key is encrypted; give it unencrypted (openssl pkey -in KEY -out PLAIN)"
    return None


def _ssl_reason(exc: BaseException) -> str:
    """OpenSSL's reason for a failure (``KEY_VALUES_MISMATCH``), or the error itself."""
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else excerpt(str(exc) or type(exc).__name__, 200)


@contextmanager
def _pem_paths(*contents: bytes) -> Iterator[list[str]]:
    """Paths OpenSSL can read ``contents`` from (it loads a certificate chain from files only): memory-backed
    files where Linux has them, so a private key never reaches a disk, else files in a private temporary
    directory; gone when the block ends."""
    if hasattr(os, "memfd_create"):
        fds = [os.memfd_create("presage-tls", os.MFD_CLOEXEC) for _ in contents]
        try:
            for fd, content in zip(fds, contents, strict=True):
                with open(fd, "wb", closefd=False) as out:
                    out.write(content)
            yield [f"/proc/self/fd/{fd}" for fd in fds]
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="presage-tls-") as folder:
        paths = [os.path.join(folder, str(i)) for i in range(len(contents))]
        for path, content in zip(paths, contents, strict=True):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                out.write(content)
        yield paths


@contextmanager
def _malformed(query: str) -> Iterator[None]:
    """Turn a response that does not have the documented shape into :class:`QueryFailed`."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        # OverflowError: a number out of float range, such as a timestamp 1e400 or a 400-digit integer.
        raise QueryFailed(
            f"query {query!r}: malformed response ({type(exc).__name__}: {excerpt(str(exc), 200)}); check "
            "that the address is a Prometheus-compatible query API"
        ) from exc


def _parse_value(text: str) -> float:
    """Prometheus sends sample values as strings: ``"1.5"``, ``"NaN"``, ``"+Inf"``, ``"-Inf"``."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _series_count(data: dict[str, Any], seen: list[dict[str, str]]) -> int:
    """Distinct series across the chunks fetched so far plus the current chunk."""
    current = [s.get("metric", {}) for s in data.get("result") or []]
    return len(seen + [m for m in current if m not in seen])


def _require_aware(moment: datetime, name: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (for example datetime.now(UTC)), got {moment!r}")


def _unix(moment: datetime) -> str:
    return f"{moment.timestamp():.3f}"


def _seconds(step: timedelta) -> str:
    return f"{step.total_seconds():.3f}"

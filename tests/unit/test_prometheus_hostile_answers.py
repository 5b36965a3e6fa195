"""Hostile answers to the real PrometheusClient, from a real server on a loopback socket (hypothesis).

Each example is one answer a server named in a PredictiveScaler might send: a valid document changed
at one to three places (tests/harness/hostile_json.py), one padded with JSON whitespace to around the
answer cap (plain or gzip), a gzip or deflate bomb, a declared Content-Length past the cap, nesting up
to 200,000 deep, numbers out of range as timestamps or values, thousands of series, or slowness against
a short timeout.

The property: a query either returns what a valid answer holds (a series on the requested grid with
finite values, or a finite float) or raises a :class:`PrometheusError` whose reason is a failure reason
and whose message is short enough for a condition. Where the answer's size is known it decides: at
most the cap is read, one byte more is :class:`AnswerTooLarge`. An answer past the cap, however far it
inflates, costs the client a few times the cap at most (traced with tracemalloc).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import tracemalloc
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presage_scaler.api.reasons import FAILURES
from presage_scaler.clients.prometheus import (
    MAX_ANSWER_BYTES,
    AnswerTooLarge,
    PrometheusClient,
    PrometheusError,
    PrometheusUnreachable,
    QueryFailed,
    SampledSeries,
    TooManySeries,
)
from tests.harness.hostile_json import gzip_bomb, mutated
from tests.harness.local_http import serving

T0 = datetime(2024, 3, 1, tzinfo=UTC)
STEP = timedelta(minutes=1)
POINTS = 5
END = T0 + (POINTS - 1) * STEP

TIMEOUT_S = 0.25
"""The impatient client's timeout: slow answers are drawn around it, so each example stays short."""

MAX_MESSAGE = 2000
"""Longer than any message presage writes itself; a server's text must not make one longer."""

MAX_PEAK_OVER_CAP = 3 * MAX_ANSWER_BYTES + (4 << 20)
"""What reading an answer past the cap may cost at most: the bytes kept, one inflated piece, and room
for aiohttp's buffers and the server's own (it runs in this process)."""

SAMPLES = [[(T0 + i * STEP).timestamp(), f"{10 + i}"] for i in range(POINTS)]
RANGE = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"job": "x"}, "values": SAMPLES}]}}
VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": SAMPLES[0]}]}}
SCALAR = {"status": "success", "data": {"resultType": "scalar", "result": SAMPLES[0]}}

NUMBERS = [
    "1e400",
    "-1e400",
    "1" + "0" * 400,
    "1" + "0" * 5000,
    "NaN",
    "-Infinity",
    "-1e18",
    "1e18",
    "1.7976931348623157e308",
    '"1e400"',
    '"NaN"',
    '"+Inf"',
    '"-0"',
    "null",
]
"""Raw JSON text placed where a timestamp or a value goes: out of float range, past Python's 4,300
digits, not numbers at all, and numbers as strings (how Prometheus writes values)."""


@dataclass(frozen=True)
class Answer:
    """One answer to a ``query`` ("range" or "instant"): ``body`` as sent, with ``headers``; ``size``
    is its length once inflated, when the example knows it; ``declared`` a Content-Length other than
    the body's; ``delay`` seconds before the headers and ``drip`` seconds after each 8 KiB piece of
    the body (sent chunked)."""

    kind: str
    query: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    size: int | None = None
    declared: int | None = None
    chunked: bool = False
    delay: float = 0.0
    drip: float = 0.0

    def __repr__(self) -> str:  # the body may be MiBs: say what it is instead
        return (
            f"Answer({self.kind}, {self.query}, {len(self.body)} bytes on the wire, size={self.size}, "
            f"headers={self.headers}, "
            f"declared={self.declared}, chunked={self.chunked}, delay={self.delay}, drip={self.drip})"
        )

    @property
    def over_cap(self) -> bool:
        return (self.size or 0) > MAX_ANSWER_BYTES or (self.declared or 0) > MAX_ANSWER_BYTES

    @property
    def too_slow(self) -> bool:
        """Whether the answer cannot have arrived whole within the impatient client's timeout."""
        pieces = -(-len(self.body) // 8192) if self.chunked else 0
        return self.delay + self.drip * pieces > TIMEOUT_S


def document(base: dict) -> bytes:
    return json.dumps(base).encode()


def halves(text: bytes) -> tuple[bytes, bytes]:
    """A JSON object as the prefix and suffix that whitespace may go between."""
    return text[:-1], text[-1:]


def raw_deflate(gzip: bytes) -> bytes:
    """The deflate stream inside a gzip member written by zlib (a 10-byte header, an 8-byte trailer):
    what a server labelling raw deflate as ``deflate`` sends."""
    return gzip[10:-8]


@st.composite
def near_valid(draw: st.DrawFn) -> Answer:
    body = draw(mutated([RANGE, VECTOR, SCALAR]))
    query = draw(st.sampled_from(["range", "instant"]))
    if draw(st.booleans()):
        gzip = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        compressed = gzip.compress(body) + gzip.flush()
        return Answer("near-valid gzip", query, compressed, {"Content-Encoding": "gzip"}, len(body))
    return Answer("near-valid", query, body, size=len(body), chunked=draw(st.booleans()))


@st.composite
def around_the_cap(draw: st.DrawFn) -> Answer:
    """A valid answer padded to a size at or just past the cap (or well under it)."""
    size = MAX_ANSWER_BYTES + draw(st.sampled_from([-(1 << 20), -1, 0, 1, 2, 4096]))
    query, base = draw(st.sampled_from([("range", RANGE), ("instant", VECTOR)]))
    prefix, suffix = halves(document(base))
    if draw(st.booleans()):
        return Answer("padded gzip", query, gzip_bomb(prefix, size, suffix), {"Content-Encoding": "gzip"}, size)
    body = prefix + b" " * (size - len(prefix) - len(suffix)) + suffix
    return Answer("padded", query, body, size=size, chunked=draw(st.booleans()))


@st.composite
def bombs(draw: st.DrawFn) -> Answer:
    """Valid documents inflating to 16 to 256 MiB from 16 kB to 1.2 MB."""
    inflated, level = draw(st.sampled_from([(16 << 20, 9), (64 << 20, 9), (256 << 20, 1)]))
    prefix, suffix = halves(document(RANGE))
    gzip = gzip_bomb(prefix, inflated, suffix, level)
    if draw(st.booleans()):
        return Answer("deflate bomb", "range", raw_deflate(gzip), {"Content-Encoding": "deflate"}, inflated)
    return Answer("gzip bomb", "range", gzip, {"Content-Encoding": "gzip"}, inflated, chunked=draw(st.booleans()))


@st.composite
def declared_past_the_cap(draw: st.DrawFn) -> Answer:
    declared = draw(st.integers(MAX_ANSWER_BYTES + 1, 1 << 40))
    return Answer("declared", draw(st.sampled_from(["range", "instant"])), document(RANGE), declared=declared)


@st.composite
def nested(draw: st.DrawFn) -> Answer:
    depth = draw(st.integers(900, 200_000))
    deep = b"[" * depth + b"]" * depth
    body = draw(st.sampled_from([deep, b'{"status": "success", "data": ' + deep + b"}", b"[" * depth]))
    return Answer("nested", draw(st.sampled_from(["range", "instant"])), body, size=len(body))


@st.composite
def numbers(draw: st.DrawFn) -> Answer:
    """One timestamp or value of a valid answer replaced by raw text out of range or not a number."""
    query, base = draw(st.sampled_from([("range", RANGE), ("instant", VECTOR), ("instant", SCALAR)]))
    text = json.dumps(base)
    first = json.dumps(SAMPLES[0])  # [timestamp, "value"]
    timestamp, value = first[1:-1].split(", ")
    raw = draw(st.sampled_from(NUMBERS))
    replaced = f"[{raw}, {value}]" if draw(st.booleans()) else f"[{timestamp}, {raw}]"
    body = text.replace(first, replaced, 1).encode()
    return Answer("numbers", query, body, size=len(body))


@st.composite
def many_series(draw: st.DrawFn) -> Answer:
    count = draw(st.integers(2, 20_000))
    same = draw(st.booleans())
    result = [{"metric": {} if same else {"i": str(i)}, "values": SAMPLES[:1]} for i in range(count)]
    query = draw(st.sampled_from(["range", "instant"]))
    if query == "instant":
        result = [{"metric": r["metric"], "value": SAMPLES[0]} for r in result]
    kind = "matrix" if query == "range" else "vector"
    body = json.dumps({"status": "success", "data": {"resultType": kind, "result": result}}).encode()
    return Answer("many series" if same else "many distinct series", query, body, size=len(body))


@st.composite
def slow(draw: st.DrawFn) -> Answer:
    query, base = draw(st.sampled_from([("range", RANGE), ("instant", VECTOR)]))
    body = document(base)
    delay = draw(st.sampled_from([0.0, 0.05, 0.6]))
    drip = draw(st.sampled_from([0.0, 0.02, 0.3]))
    # Enough pieces that a drip of 0.3 s outlasts the timeout.
    body = body[:-1] + b" " * 20_000 + body[-1:]
    return Answer("slow", query, body, size=len(body), chunked=True, delay=delay, drip=drip)


ANSWERS = st.one_of(
    near_valid(), around_the_cap(), bombs(), declared_past_the_cap(), nested(), numbers(), many_series(), slow()
)


class Stage:
    """The server's next answer, set by each example before its query."""

    answer: Answer | None = None

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        answer = self.answer
        assert answer is not None
        await request.read()
        await asyncio.sleep(answer.delay)
        headers = {"Content-Type": "application/json", **answer.headers}
        if answer.declared is None and not answer.chunked:
            return web.Response(body=answer.body, headers=headers)
        response = web.StreamResponse(headers=headers)
        if answer.declared is not None:
            response.content_length = answer.declared
        else:
            response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            for at in range(0, len(answer.body), 8192):
                await response.write(answer.body[at : at + 8192])
                await asyncio.sleep(answer.drip)
        except ConnectionError:
            pass  # the client gave up reading, as it should past a cap or a timeout
        return response


async def ask(client: PrometheusClient, answer: Answer) -> SampledSeries | float:
    if answer.query == "range":
        return await client.query_range("demand", T0, END, STEP)
    return await client.query_instant("demand", T0)


def check(answer: Answer, outcome: SampledSeries | float | BaseException) -> None:
    if answer.kind == "slow" and answer.too_slow:
        assert isinstance(outcome, PrometheusUnreachable), outcome
    if isinstance(outcome, SampledSeries):
        assert not answer.over_cap
        values = outcome.values
        assert 1 <= len(values) <= POINTS and all(math.isfinite(v) for v in values)
        assert T0 <= outcome.start <= END and (outcome.start - T0) % STEP == timedelta(0)
        return
    if isinstance(outcome, float):
        assert not answer.over_cap and math.isfinite(outcome)
        return
    assert isinstance(outcome, PrometheusError), repr(outcome)
    assert outcome.reason in FAILURES
    assert len(str(outcome)) <= MAX_MESSAGE, str(outcome)[:300]
    if answer.over_cap:
        assert isinstance(outcome, AnswerTooLarge), outcome
        assert "4 MiB (4194304 bytes)" in str(outcome) and "'demand'" in str(outcome)
    elif answer.kind.startswith("padded"):
        raise AssertionError(f"a valid answer of {answer.size} bytes, within the cap, failed: {outcome}")
    if answer.kind == "slow":
        assert isinstance(outcome, PrometheusUnreachable), outcome
    if answer.kind == "nested":
        assert isinstance(outcome, QueryFailed), outcome
    if answer.kind == "many distinct series":
        assert isinstance(outcome, TooManySeries), outcome


@dataclass
class Loop:
    """One event loop for every example: the server and both clients live on it."""

    runner: asyncio.Runner
    stage: Stage
    patient: PrometheusClient
    impatient: PrometheusClient

    def query(self, answer: Answer) -> SampledSeries | float | BaseException:
        self.stage.answer = answer
        client = self.impatient if answer.kind == "slow" else self.patient
        traced = answer.over_cap
        if traced:
            tracemalloc.start()
        try:
            return self.runner.run(ask(client, answer))
        except Exception as exc:  # judged by check(): any exception is an outcome
            return exc
        finally:
            if traced:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                assert peak < MAX_PEAK_OVER_CAP, f"reading {answer!r} peaked at {peak >> 20} MiB"


@contextlib.contextmanager
def looping() -> Iterator[Loop]:
    with asyncio.Runner() as runner:
        stage = Stage()
        server = serving(stage)
        url = runner.run(server.__aenter__())
        patient, impatient = PrometheusClient(url, timeout=30.0), PrometheusClient(url, timeout=TIMEOUT_S)
        try:
            yield Loop(runner, stage, patient, impatient)
        finally:
            runner.run(patient.aclose())
            runner.run(impatient.aclose())
            runner.run(server.__aexit__(None, None, None))


def test_every_hostile_answer_is_a_value_or_a_reason_and_costs_a_bounded_memory() -> None:
    with looping() as shared:

        @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(ANSWERS)
        def one(answer: Answer) -> None:
            check(answer, shared.query(answer))

        one()

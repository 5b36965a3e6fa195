"""What the forecaster's fuzz tests share: the limits they serve under, valid requests to mutate, and
the check that an answer is one docs/forecaster.md documents.

The documented errors are read from the "Errors and limits" table of docs/forecaster.md, so an
error code the server answers with but the table does not list fails the fuzz tests.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st
from presage_forecaster.protocol import MAX_ABS_VALUE, MAX_TIMESTAMP, MIN_TIMESTAMP

DOCS = Path(__file__).resolve().parents[2] / "docs" / "forecaster.md"

MAX_CONTEXT, MAX_HORIZON, MAX_SERIES = 16256, 16, 4
"""The server's limits in the fuzz tests: the longest context TimesFM 2.5 allows next to a 16-step
horizon (16256 + 128 = 16384), so the magnitude bound is checked where it is tightest."""

MAX_ERROR_BYTES = 2048
"""An error body quotes at most 200 characters of the client's input (4 bytes each at worst)."""

BASES: list[dict[str, Any]] = [
    {
        "horizon": 4,
        "quantiles": [0.5, 0.9, "0.95"],
        "useQuantileHead": True,
        "series": [
            {
                "id": "rps",
                "values": [812.0, 790.5, None, 845.2],
                "timestamps": [1764460800, 1764461100, 1764461400, 1764461700],
            }
        ],
    },
    {
        "horizon": 1,
        "quantiles": [],
        "series": [{"values": [1, 2, 3]}, {"id": "b", "values": [None, 5.5, float("nan")]}],
    },
    {"horizon": MAX_HORIZON, "useQuantileHead": False, "series": [{"id": "é😀", "values": [0, -1e6, 1e6, 0.5]}]},
]
"""Valid requests, the starting points of mutated ones."""

BIG = "1" + "0" * 399
"""A 400-digit integer: JSON has no limit, float64 ends near 1.8e308."""

DEEP = "[" * 1000 + "]" * 1000

ISSUE_CASES: list[tuple[str, str, int, str, str | None]] = [
    ("400-digit horizon", '{"horizon": BIG, "series": [{"values": [1]}]}', 422, "HorizonTooLong", "horizon"),
    ("400-digit quantile", '{"horizon": 1, "quantiles": [BIG], "series": [{"values": [1]}]}', 422, "QuantileOutOfRange",
     "quantiles[0]"),
    ("400-digit timestamp", '{"horizon": 1, "series": [{"values": [1, 2], "timestamps": [1, BIG]}]}', 422,
     "InvalidTimestamps", "series[0].timestamps"),
    ("400-digit value", '{"horizon": 1, "series": [{"values": [1, BIG]}]}', 422, "InvalidValue", "series[0].values[1]"),
    ("lone surrogate id", r'{"horizon": 1, "series": [{"id": "\ud800", "values": [1]}]}', 422, "InvalidSeries",
     "series[0].id"),
    ("nested 1,000 deep", '{"horizon": 1, "series": DEEP}', 400, "InvalidJSON", None),
    ("values near 1e200", '{"horizon": 1, "series": [{"values": [1e200, 2e200, 1.5e200]}]}', 422, "InvalidValue",
     "series[0].values[0]"),
    ("infinite timestamp step", '{"horizon": 1, "series": [{"values": [1, 2], "timestamps": [-1e308, 1e308]}]}', 422,
     "InvalidTimestamps", "series[0].timestamps"),
]  # fmt: skip
"""Inputs that were answered with 500: those of issue 16, and an overflowing timestamp step found
since. (name, body with ``BIG`` and ``DEEP`` to expand, status, code, field)."""


def issue_body(template: str) -> bytes:
    """An ``ISSUE_CASES`` body as the wire carries it."""
    return template.replace("BIG", BIG).replace("DEEP", DEEP).encode()


def numbers() -> st.SearchStrategy[float | int]:
    """Any JSON number: NaN, infinities, integers of 400 digits, and floats within the value bound."""
    huge = 10**400
    return st.floats() | st.integers(min_value=-huge, max_value=huge) | st.floats(-MAX_ABS_VALUE, MAX_ABS_VALUE)


def _either(valid: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Half and half, however many branches each has: so that a share of requests is forecast."""
    return st.booleans().flatmap(lambda pick: hostile if pick else valid)


@st.composite
def numeric_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Requests valid in shape with any number in some numeric fields (and valid numbers in the others,
    so that a share reaches the forward pass); timestamps evenly spaced or not."""
    hostile = draw(st.sets(st.sampled_from(["values", "start", "step", "timestamps", "horizon", "quantiles"])))

    def pick(field: str, valid: st.SearchStrategy[Any], any_number: st.SearchStrategy[Any]) -> Any:
        return draw(any_number if field in hostile else valid)

    values = pick(
        "values",
        st.lists(st.none() | st.floats(-MAX_ABS_VALUE, MAX_ABS_VALUE), min_size=1, max_size=40),
        st.lists(st.none() | numbers(), min_size=1, max_size=40),
    )
    series: dict[str, Any] = {"values": values}
    if draw(st.booleans()):
        # Evenly spaced times reach the step and forecast-time arithmetic; integers stay within float's range.
        start = pick("start", st.floats(MIN_TIMESTAMP, MAX_TIMESTAMP), st.floats() | st.integers(-(2**63), 2**63))
        step = pick("step", st.floats(1e-3, 1e9), st.floats() | st.integers(min_value=1, max_value=2**40))
        regular = [start + step * i for i in range(len(values))]
        series["timestamps"] = pick("timestamps", st.just(regular), st.lists(numbers(), min_size=len(values)))
    levels = st.sampled_from([0.01, 0.5, 0.9, 0.95, "0.99"])
    return {
        "horizon": pick("horizon", st.integers(min_value=1, max_value=MAX_HORIZON), numbers()),
        "quantiles": pick("quantiles", st.lists(levels), st.lists(levels | numbers() | st.text(max_size=8))),
        "series": [series],
    }


@cache
def documented_errors() -> frozenset[tuple[int, str]]:
    """(status, code) of every row of docs/forecaster.md's "Errors and limits" table."""
    section = DOCS.read_text().split("## Errors and limits", 1)[1].split("\n## ", 1)[0]
    pairs = set()
    for line in section.splitlines():
        if row := re.match(r"\| (\d{3}) \| ([^|]+) \|", line):
            pairs |= {(int(row[1]), code) for code in re.findall(r"`([A-Za-z]+)`", row[2])}
    return frozenset(pairs)


def assert_documented_error(status: int, content: bytes) -> dict[str, str]:
    """A 4xx body ``{"error": {"code", "message"[, "field"]}}`` whose code the docs list for the status."""
    assert 400 <= status < 500, (status, content[:500])
    assert len(content) <= MAX_ERROR_BYTES, (status, len(content), content[:500])
    body = json.loads(content)
    assert body.keys() == {"error"}, body
    error = body["error"]
    assert {"code", "message"} <= error.keys() <= {"code", "message", "field"}, error
    assert all(isinstance(v, str) and v for v in error.values()), error
    assert (status, error["code"]) in documented_errors(), (status, error)
    return error


def assert_forecast(request: dict[str, Any], status: int, content: bytes) -> None:
    """A 200 answering ``request``: one finite forecast per series, ``horizon`` steps each."""
    assert status == 200, (status, content[:500])
    body = json.loads(content)
    assert body["horizon"] == request["horizon"] and len(body["series"]) == len(request["series"])
    for sent, got in zip(request["series"], body["series"], strict=True):
        assert got["id"] == sent.get("id", got["id"])
        # Forecast times need a step: two timestamps at least (``null`` is the same as absent).
        assert ("timestamps" in got) == (len(sent.get("timestamps") or []) > 1), got
        timestamps = [got["timestamps"]] if "timestamps" in got else []
        for values in (got["point"], *got["quantiles"].values(), *timestamps):
            assert len(values) == request["horizon"] and all(math.isfinite(v) for v in values), got


def render(content: object) -> bytes:
    """A body as the server renders it (Starlette's JSONResponse): strict JSON, UTF-8."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def alternating(magnitude: float, n: int) -> list[float]:
    """``+m, -m, +m, …``: for a given largest magnitude, the series with the largest variance."""
    return np.where(np.arange(n) % 2 == 0, magnitude, -magnitude).tolist()

"""The goal lines of ``benchmarks/bench_lifecycle.py``, on lives made up to exercise each: judged on every
trace long enough to reach a Proven advice, and saying met or not met."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
START = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def scripts() -> Iterator[tuple[ModuleType, ModuleType]]:
    """``benchmarks/bench_lifecycle.py`` and ``benchmarks/lifecycle.py``, imported as the script imports them."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("bench_lifecycle"), importlib.import_module("lifecycle")
    finally:
        sys.path.remove(str(BENCHMARKS))


def lived(scripts: tuple[ModuleType, ModuleType], name: str, days: float, ratio: float, under: float) -> Any:
    """A trace's life made up for the goal lines: Proven on day 30 when ``days`` allows it."""
    bench, lifecycle = scripts
    events = (lifecycle.Event(START + timedelta(days=30), "Proven"),) if days > 30 else ()
    life = lifecycle.Life(simulation=None, events=events, start=START, advice_runs=1)
    default = bench.Figures(under_pct=0.1, cost=2.0, replica_hours=100.0)
    own = bench.Figures(under_pct=under, cost=2.0 * ratio, replica_hours=100.0 * ratio)
    return bench.Lived(name, days, life, own, default, default, cpu=1.0)


def test_the_goals_judge_every_trace_long_enough_proven_or_not(scripts: tuple[ModuleType, ModuleType]) -> None:
    lives = [
        lived(scripts, "long_proven", 55, 0.7, 0.5),
        lived(scripts, "long_unproven", 29, 1.0, 0.1),
        lived(scripts, "short", 14, 1.5, 9.0),  # too short to be judged
    ]
    lines = scripts[0].goals(lives)
    assert "long_proven, long_unproven; Proven on long_proven" in lines[0] and "short" not in lines[0]
    assert lines[2:] == [
        "- NOT met: each reached a Proven advice (not long_unproven)",
        "- met: replica-hours ≤ 0.85× the default spec's, geometric mean (0.837×)",
        "- met: never more replica-hours than the default spec's (highest long_unproven: 1.000×)",
        "- met: under-provisioned ≤ 1.5 % of the time on each (worst long_proven: 0.50 %)",
    ]


def test_a_dearer_or_short_life_is_not_met(scripts: tuple[ModuleType, ModuleType]) -> None:
    lines = scripts[0].goals([lived(scripts, "dear", 40, 1.1, 2.0)])
    assert "- NOT met: never more replica-hours than the default spec's (more on dear 1.100×)" in lines
    assert "- NOT met: under-provisioned ≤ 1.5 % of the time on each (worst dear: 2.00 %)" in lines
    assert scripts[0].goals([lived(scripts, "short", 14, 0.5, 0.0)])[-1].startswith("- NOT met: no trace")

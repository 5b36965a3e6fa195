"""Replay every candidate at once: production's policy over many candidate policies in one pass.

:func:`presage_scaler.engine.policy.decide`, applied in the order its module docstring gives, falls
in two parts for one signal. What the forecast asks for — ⌈(upper + headroom) / capacity⌉, raised to
the reactive floor — and whether the spread between the targetQuantile and scaleDownQuantile
forecasts trips the uncertainty guard depend on no state, so they are computed for every decision at
once, once per (forecaster, targetQuantile, headroom) and per (forecaster, targetQuantile, guard).
The rest depends on the count in force and on how long a scale-down has been wanted — the
scale-down candidacy and its window, the rate limits, the bounds — and is carried forward decision
by decision for every candidate at once, as array operations.

The rate limits and then the bounds clamp the count into [floor, ceiling] and then into [minReplicas,
maxReplicas]; the count in force lies in both, so that is clamping into their intersection, tabulated
per count in force with production's own :func:`scale_down_floor` and :func:`scale_up_ceiling`.

The pods (:mod:`presage_scaler.backtest.simulator`): with newest-first cancellation, the ready count
at a step is the least count in force over the ``lead`` steps before it and itself (:func:`ready`).

Every count is production's: ``tests/unit/test_tune_parts.py`` replays random candidates through
:func:`presage_scaler.engine.policy.decide` and the simulator and compares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np

from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.simulator import Schedule
from presage_scaler.engine.policy import REPLICA_TOLERANCE, scale_down_floor, scale_up_ceiling
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs
from presage_scaler.tune.prepared import Forecasts

BLOCK = 256
"""Decisions whose stateless columns are gathered per candidate at once: a few MiB for thousands of
candidates."""


@dataclass(frozen=True)
class Decisions:
    """What the candidates' decisions see besides the forecasts, one entry per decision."""

    steps: range
    """The trace step of each decision."""
    observed: np.ndarray
    """The latest signal point each decision sees: what the reactive floor sizes to."""
    per_replica: float
    step: timedelta
    """The trace's step: a decision at trace step ``s`` is made ``s`` steps after the first."""
    initial: int
    """The count in force before the first decision."""


def _whole(replicas: np.ndarray) -> np.ndarray:
    """:func:`presage_scaler.engine.policy.whole_replicas` of every element."""
    return np.maximum(np.ceil(replicas - REPLICA_TOLERANCE), 0.0).astype(np.int64)


def _of(amount: Amount, base: np.ndarray) -> np.ndarray | float:
    """:meth:`Amount.of` of every element, with the same floating-point operations."""
    return base * amount.value / 100.0 if amount.percent else amount.value


def _floor(policy: PolicySpec, observed: np.ndarray, capacity: float) -> np.ndarray | None:
    """Per decision, the reactive floor's count (None when it is disabled)."""
    floor = policy.reactive_floor
    if not floor.enabled:
        return None
    seen = np.maximum(observed, 0.0)
    buffer = floor.buffer_size
    if buffer.percent:
        counts = _whole(seen * (1.0 + buffer.value / 100.0) / capacity)
    else:
        counts = _whole(seen / capacity) + _whole(np.array(buffer.value))
    return np.maximum(counts, 1)


@dataclass(frozen=True)
class _Columns:
    """The stateless part of every candidate's decisions, one column per distinct setting it comes from."""

    wanted: np.ndarray
    """``(decisions, columns)``: the forecast's count, raised to the reactive floor."""
    bounded: np.ndarray
    """The same within [minReplicas, maxReplicas]: a count below the one in force is a scale-down."""
    guarded: np.ndarray
    """``(decisions, guard columns)``: whether the spread keeps the count in force."""
    wanted_of: np.ndarray
    """Per candidate, its column of ``wanted`` and ``bounded``."""
    guarded_of: np.ndarray
    """Per candidate, its column of ``guarded``."""


def _columns(
    candidates: Sequence[Knobs],
    forecasts: Mapping[ForecasterKnobs, Forecasts],
    policy: PolicySpec,
    decisions: Decisions,
) -> _Columns:
    floor = _floor(policy, decisions.observed, decisions.per_replica)
    wanted: dict[tuple[ForecasterKnobs, float, Amount], int] = {}
    guarded: dict[tuple[ForecasterKnobs, float, float | None], int] = {}
    wanted_columns: list[np.ndarray] = []
    guarded_columns: list[np.ndarray] = []
    for knobs in candidates:
        made = forecasts[knobs.forecaster]
        upper = made.windows[:, made.levels.index(knobs.target_quantile)]
        key = (knobs.forecaster, knobs.target_quantile, knobs.headroom)
        if key not in wanted:
            sized = np.maximum(upper, 0.0)
            counts = _whole((sized + _of(knobs.headroom, sized)) / decisions.per_replica)
            wanted[key] = len(wanted_columns)
            wanted_columns.append(counts if floor is None else np.maximum(counts, floor))
        guard = (knobs.forecaster, knobs.target_quantile, knobs.max_relative_spread)
        if guard not in guarded:
            guarded[guard] = len(guarded_columns)
            if knobs.max_relative_spread is None:
                guarded_columns.append(np.zeros(len(upper), dtype=bool))
            else:
                # engine.policy.relative_spread, element by element
                lower = made.lower(knobs.target_quantile, policy.scale_down_quantile)
                guarded_columns.append((upper - lower) / np.maximum(lower, 1.0) > knobs.max_relative_spread)
    stacked = np.stack(wanted_columns, axis=1)
    return _Columns(
        wanted=stacked,
        bounded=np.minimum(np.maximum(stacked, policy.min_replicas), policy.max_replicas),
        guarded=np.stack(guarded_columns, axis=1),
        wanted_of=np.array([wanted[(k.forecaster, k.target_quantile, k.headroom)] for k in candidates], dtype=np.intp),
        guarded_of=np.array(
            [guarded[(k.forecaster, k.target_quantile, k.max_relative_spread)] for k in candidates], dtype=np.intp
        ),
    )


def _limits(candidates: Sequence[Knobs], policy: PolicySpec, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per count in force up to ``top``, the count a decision may reach at most (the scale-up rate and
    maxReplicas) and at least (per scale-down rate, one row each, flattened, and minReplicas); and per
    candidate, where its scale-down rate's row starts."""
    counts = range(top + 1)
    highest = np.array([min(scale_up_ceiling(c, policy), policy.max_replicas) for c in counts], dtype=np.int64)
    rates = list(dict.fromkeys(k.max_scale_down_rate for k in candidates))
    rows = []
    for rate in rates:
        stabilization = policy.stabilization.model_copy(update={"max_scale_down_rate": rate})
        limited = policy.model_copy(update={"stabilization": stabilization})
        rows.append([max(scale_down_floor(c, limited), policy.min_replicas) for c in counts])
    lowest = np.array(rows, dtype=np.int64).ravel()
    offsets = np.array([rates.index(k.max_scale_down_rate) * len(counts) for k in candidates], dtype=np.int64)
    return highest, lowest, offsets


def _window_steps(window: timedelta, step: timedelta) -> int:
    """The fewest whole trace steps ``n`` with ``n · step ≥ window``: a candidacy ``x`` steps old is
    inside the window exactly when ``x < n``."""
    return -(-(window // timedelta(microseconds=1)) // (step // timedelta(microseconds=1)))


def replay(
    candidates: Sequence[Knobs],
    forecasts: Mapping[ForecasterKnobs, Forecasts],
    policy: PolicySpec,
    decisions: Decisions,
    kept_from: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``(decisions, candidates)``: the count each candidate has in force after each decision from the
    ``kept_from``-th on (the earlier ones are replayed for the state they leave, not kept).

    ``policy`` is the starting spec's: what no candidate changes (bounds, scale-up rate, reactive
    floor, scaleDownQuantile) is read from it."""
    if decisions.initial < policy.min_replicas or decisions.initial > policy.max_replicas:
        raise ValueError(f"the initial count {decisions.initial} is outside [minReplicas, maxReplicas]")
    columns = _columns(candidates, forecasts, policy, decisions)
    # A count is what was wanted, or a count in force, or between: never above the most wanted.
    top = min(policy.max_replicas, max(decisions.initial, int(columns.wanted.max())))
    highest, lowest, offsets = _limits(candidates, policy, top)
    windows = np.array([_window_steps(k.scale_down_window, decisions.step) for k in candidates], dtype=np.int64)
    # A scale-down candidacy begun at step s keeps the count at the decisions before s + window: the
    # first ``patience`` of the run of decisions that want one, ``every`` steps apart.
    patience = -(-windows // max(1, decisions.steps.step))
    wanted_of, guarded_of = columns.wanted_of, columns.guarded_of
    # The smallest integers that hold every count: a month of minutes for thousands of candidates.
    small = np.int16 if top <= np.iinfo(np.int16).max else np.int32
    counts = np.empty((len(decisions.steps) - kept_from, len(candidates)), dtype=small)
    # The state in the narrowest integers that hold every count and run (fewer bytes, faster steps).
    fits = max(top, len(decisions.steps), int(patience.max())) < np.iinfo(np.int32).max
    state: type[np.signedinteger[Any]] = np.int32 if fits else np.int64
    current: np.ndarray[Any, np.dtype[np.signedinteger[Any]]] = np.full(len(candidates), decisions.initial, dtype=state)
    run = np.zeros(len(candidates), dtype=state)  # decisions in a row, this one included, that wanted one
    highest, lowest, patience = highest.astype(state), lowest.astype(state), patience.astype(state)
    # A block of decisions' stateless columns, gathered per candidate at once into buffers made once (a
    # block's few MiB, allocated anew each time, would be mapped and faulted in again each time).
    below, keep = np.empty(len(candidates), dtype=bool), np.empty(len(candidates), dtype=bool)
    ceiling, floor, limited = np.empty_like(current), np.empty_like(current), np.empty_like(current)
    at = np.empty(len(candidates), dtype=np.intp)
    columns_of = (columns.wanted.astype(state), columns.bounded.astype(state), columns.guarded)
    buffers = [np.empty((BLOCK, len(candidates)), dtype=column.dtype) for column in columns_of]
    for block in range(0, len(decisions.steps), BLOCK):
        rows = slice(block, block + BLOCK)
        wanted, bounded, guarded = (
            np.take(column[rows], of, axis=1, out=buffer[: len(column[rows])])
            for column, of, buffer in zip(columns_of, (wanted_of, wanted_of, guarded_of), buffers, strict=True)
        )
        for row in range(len(wanted)):
            # Every operation writes into an array made once: no allocation per decision.
            np.less(bounded[row], current, out=below)
            run += 1
            run *= below
            # A scale-down candidacy that has not run for the window keeps the count, as does the guard.
            np.less_equal(run, patience, out=keep)
            keep |= guarded[row]
            keep &= below
            # The count the rate limits and bounds allow: the tables hold every count up to ``top``.
            np.minimum(wanted[row], highest.take(current, out=ceiling, mode="clip"), out=limited)
            np.maximum(limited, lowest.take(np.add(offsets, current, out=at), out=floor, mode="clip"), out=limited)
            # current = keep ? current : limited, as a sum of products (the same integers as np.where, faster)
            current -= limited
            current *= keep
            current += limited
            index = block + row
            if index >= kept_from:
                counts[index - kept_from] = current
            if on_progress is not None and index % 4096 == 0:
                on_progress(index)
    if on_progress is not None:
        on_progress(len(decisions.steps))
    return counts


def in_force(
    counts: np.ndarray, schedule: Schedule, initial: int, begin: int, end: int, kept_from: int = 0
) -> np.ndarray:
    """``(candidates, end - begin)``: the count in force at trace steps ``[begin, end)`` of each
    candidate whose counts after the decisions from the ``kept_from``-th on are the columns of
    ``counts`` (none of the steps may be in force from an earlier decision)."""
    made = (np.arange(begin, end) - schedule.first) // schedule.every
    before = made < 0
    if (made[~before] < kept_from).any():
        raise ValueError(f"steps from {begin} on are in force from decisions before the {kept_from}-th")
    table = np.concatenate((counts.T, np.full((counts.shape[1], 1), initial, dtype=counts.dtype)), axis=1)
    return table.take(np.where(before, counts.shape[0], made - kept_from), axis=1)


def ready(desired: np.ndarray, lead: int) -> np.ndarray:
    """The ready count at each step but the first ``lead`` of ``desired`` (``candidates × steps``, the
    counts in force): the least of the ``lead + 1`` counts in force up to it."""
    length = desired.shape[1] - lead
    least = desired[:, lead:].copy()
    for back in range(1, lead + 1):
        np.minimum(least, desired[:, lead - back : lead - back + length], out=least)
    return least

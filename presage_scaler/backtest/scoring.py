"""How a simulated policy did against the demand it had to serve, after the warm-up."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from presage_scaler.backtest.simulator import Simulation

# Capacity and demand are floats; demand a rounding error above capacity is not a shortfall.
_RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Metrics:
    """The reported numbers of one policy over the reported steps."""

    under_provisioned_pct: float
    """Share of steps whose demand exceeded the ready capacity."""
    unserved_pct: float
    """Σ max(0, demand − capacity) / Σ demand."""
    replica_hours: float
    """Ready and booting pods, integrated over time."""
    changes: int
    """How often the desired count changed."""
    largest_shortfall: float
    """The largest demand − capacity of any step, in the signal's units."""


def shortfall(demand: np.ndarray, ready: np.ndarray, per_replica: float) -> np.ndarray:
    """Per step, the demand the ready pods could not serve (0 where they could)."""
    gap = demand - ready * per_replica
    gap[gap <= _RELATIVE_TOLERANCE * np.abs(demand)] = 0.0
    return gap


def measure(demand: np.ndarray, simulation: Simulation, per_replica: float, step: timedelta, start: int) -> Metrics:
    """The metrics over steps ``start …`` (``start`` ≥ the simulation's first step)."""
    if start < simulation.first or start >= len(demand):
        raise ValueError(f"reported steps start at {start}, outside {simulation.first}..{len(demand) - 1}")
    served = demand[start:]
    missing = shortfall(served, simulation.ready[start:], per_replica)
    total = float(served.sum())
    # The count in force before the first reported step is the baseline for the first change.
    desired = simulation.desired[start - 1 :] if start > 0 else simulation.desired
    return Metrics(
        under_provisioned_pct=100.0 * float(np.count_nonzero(missing)) / len(served),
        unserved_pct=100.0 * float(missing.sum()) / total if total > 0 else 0.0,
        replica_hours=float(simulation.desired[start:].sum()) * step / timedelta(hours=1),
        changes=int(np.count_nonzero(np.diff(desired))),
        largest_shortfall=float(missing.max()),
    )

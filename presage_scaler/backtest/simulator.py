"""The pod lifecycle every policy is simulated with: one simulator, policies plugged in.

Time is the trace's steps. A decision happens at the start of a step, before that step's demand is
served, and sees only the steps before it (the policy's business: :class:`Policy` gets the step index
and must not read demand at or after it). Then:

* pods added by a decision become ready ``lead`` steps later (they serve step ``step + lead`` on);
* when the desired count falls, booting pods are cancelled first, newest first (what a ReplicaSet
  does: unready and younger pods go first), then ready pods are removed at once;
* a step is served by the pods ready at its start, and costs the ready **and** booting pods.

With newest-first cancellation the ready count at step ``j`` is the smallest desired count in force
over steps ``j - lead … j``; that is what makes the oracle in :mod:`baselines` the cheapest policy
without under-provisioning.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Policy(Protocol):
    """Something that picks a desired replica count at a decision step."""

    def decide(self, step: int, current: int) -> int:
        """The desired count at the start of ``step``, given the ``current`` desired count."""
        ...


@dataclass(frozen=True)
class Schedule:
    """When decisions happen and how long a new pod takes, in trace steps."""

    first: int
    """The first decision step: one with a complete signal point behind it (a backtest starts
    :data:`presage_scaler.backtest.runner.PRE_ROLL` before the part it measures)."""
    every: int
    """Steps between decisions (the spec's interval, rounded up to whole steps)."""
    lead: int
    """Steps from a decision to the readiness of the pods it adds (at least 1)."""

    def decisions(self, steps: int) -> range:
        """The decision steps of a trace of ``steps`` steps."""
        return range(self.first, steps, self.every)


@dataclass(frozen=True)
class Simulation:
    """What a policy did: per trace step, the pods in existence (ready + booting) and the ready ones.

    Steps before ``first`` hold the initial count; they were not simulated."""

    desired: np.ndarray
    ready: np.ndarray
    first: int


def simulate(
    steps: int,
    schedule: Schedule,
    policy: Policy,
    initial: int,
    on_progress: Callable[[int], None] | None = None,
) -> Simulation:
    """Run ``policy`` over ``steps`` trace steps, starting with ``initial`` ready pods.

    ``on_progress`` is called with the number of decisions made so far, every few hundred decisions.
    """
    if schedule.lead < 1 or schedule.every < 1:
        raise ValueError(f"lead and every must be at least one step, got {schedule}")
    desired = [initial] * steps
    ready_counts = [initial] * steps
    ready = total = initial
    booting: deque[list[int]] = deque()  # [ready step, count], ready steps increasing
    next_decision = schedule.first
    made = 0
    for step in range(schedule.first, steps):
        while booting and booting[0][0] <= step:
            ready += booting.popleft()[1]
        if step == next_decision:
            wanted = policy.decide(step, total)
            if wanted < 0:
                raise ValueError(f"policy wanted {wanted} replicas at step {step}")
            if wanted > total:
                booting.append([step + schedule.lead, wanted - total])
            else:
                excess = total - wanted
                while excess and booting:
                    newest = booting[-1]
                    cancelled = min(excess, newest[1])
                    newest[1] -= cancelled
                    excess -= cancelled
                    if newest[1] == 0:
                        booting.pop()
                ready -= excess
            total = wanted
            next_decision += schedule.every
            made += 1
            if on_progress is not None and made % 256 == 0:
                on_progress(made)
        desired[step] = total
        ready_counts[step] = ready
    if on_progress is not None:
        on_progress(made)
    return Simulation(
        desired=np.array(desired, dtype=np.int64),
        ready=np.array(ready_counts, dtype=np.int64),
        first=schedule.first,
    )

"""The soak's judgements (:mod:`tests.harness.soak`), as plain functions of what it recorded.

Every figure is derived from what the real servers said, never from presage's own account of
itself: KEDA's answers as a gRPC client received them, the PredictiveScalers as a watch of the API
server delivered them, and the API server's audit log of status and Lease writes.

How a stale count is recognised: each scaler's count is pinned by its spec (``minReplicas =
maxReplicas = k``), and the soak changes ``k`` every few minutes. Once the API server has shown a
status evaluated at a newer generation, no replica can have confirmed the older count since, so
the older count answered more than the staleness bound after that is stale. A count that was
never any generation's is made up (0 above all).
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Answer:
    """One GetMetrics call as the client saw it: the count, or the gRPC status code's name."""

    at: float  # Unix seconds, when the answer arrived
    replica: str
    scaler: str
    value: int | None
    code: str
    took: float = 0.0  # seconds from the call to its answer


@dataclass
class ScalerHistory:
    """One PredictiveScaler as the watch showed it over the run."""

    counts: dict[int, int] = field(default_factory=dict)  # generation -> its pinned count
    spec_seen: dict[int, float] = field(default_factory=dict)  # generation -> first seen
    evaluated_at: dict[int, float] = field(default_factory=dict)  # generation -> first status at or past it
    buckets: dict[str, int] = field(default_factory=dict)  # shadow bucket start -> most samples seen
    lost: set[str] = field(default_factory=set)  # buckets that vanished or lost samples

    def observe(self, obj: Mapping[str, Any], at: float) -> None:
        """Record what one watch event (or list item) shows at ``at``."""
        generation = int(obj["metadata"].get("generation") or 0)
        policy = obj.get("spec", {}).get("policy", {})
        if generation not in self.counts and "minReplicas" in policy:
            self.counts[generation] = int(policy["minReplicas"])
            self.spec_seen[generation] = at
        status = obj.get("status") or {}
        observed = status.get("observedGeneration")
        if observed is not None and status.get("recommendedReplicas") is not None:
            for known in self.counts:
                if known <= observed:
                    self.evaluated_at.setdefault(known, at)
        if "shadow" not in status:
            return
        now = {b["start"]: int(b.get("samples", 0)) for b in (status.get("shadow") or {}).get("buckets") or ()}
        for start, most in self.buckets.items():
            if now.get(start, -1) < most:
                self.lost.add(start)
        for start, samples in now.items():
            self.buckets[start] = max(samples, self.buckets.get(start, 0))

    def superseded_at(self, count: int) -> float | None:
        """When a status evaluated at a generation with another count than ``count``, newer than
        every generation pinned to ``count``, was first seen; None while none has been."""
        generations = [g for g, k in self.counts.items() if k == count]
        if not generations:
            return None
        newer = [at for g, at in self.evaluated_at.items() if g > max(generations) and self.counts[g] != count]
        return min(newer, default=None)


@dataclass(frozen=True)
class AnswerVerdict:
    answers: int
    counts: int
    unavailable: int
    other_errors: dict[str, int]
    stale: list[Answer]
    zeros: list[Answer]
    made_up: list[Answer]
    slowest: float  # seconds, of any answer
    over_a_second: int


def judge_answers(
    answers: Iterable[Answer], histories: Mapping[str, ScalerHistory], attempted: Mapping[str, set[int]], bound: float
) -> AnswerVerdict:
    """Each answer: a count some generation pinned, no older than ``bound`` seconds past the status
    that superseded it; UNAVAILABLE; or a violation. ``attempted``: every count the soak asked for,
    by scaler (a patch whose answer was lost may still have landed)."""
    total = counts = unavailable = slow = 0
    slowest = 0.0
    other: dict[str, int] = {}
    stale: list[Answer] = []
    zeros: list[Answer] = []
    made_up: list[Answer] = []
    for answer in answers:
        total += 1
        slowest = max(slowest, answer.took)
        slow += answer.took > 1.0
        if answer.value is None:
            if answer.code == "UNAVAILABLE":
                unavailable += 1
            else:
                other[answer.code] = other.get(answer.code, 0) + 1
            continue
        counts += 1
        history = histories[answer.scaler]
        if answer.value == 0:
            zeros.append(answer)
        elif answer.value not in history.counts.values() and answer.value not in attempted.get(answer.scaler, ()):
            made_up.append(answer)
        else:
            superseded = history.superseded_at(answer.value)
            if superseded is not None and answer.at > superseded + bound:
                stale.append(answer)
    return AnswerVerdict(total, counts, unavailable, other, stale, zeros, made_up, slowest, slow)


@dataclass(frozen=True)
class Fault:
    name: str
    started: float
    ended: float


def longest_without_a_count(
    answers: Sequence[Answer],
    faults: Sequence[Fault],
    start: float,
    end: float,
    poll: float,
    *,
    past_its_end: bool = False,
) -> dict[str, tuple[float, str]]:
    """For each fault, the longest time a scaler went without any replica answering it with a count
    (the view of KEDA, which reaches whichever replica the Service picks), over the gaps whose first
    missed answer (``poll`` after the last count) came after that fault began and before the next:
    seconds, and the scaler. ``past_its_end``: only the part of each gap after every fault begun
    before the gap closed had ended (how long counts took to come back once the causes were gone; a
    fault that stops every evaluation, such as a stopped etcd, may rightly outlast the bound itself)."""
    by_scaler: dict[str, list[float]] = {answer.scaler: [] for answer in answers}
    for answer in sorted(answers, key=lambda a: a.at):
        if answer.value is not None:
            by_scaler[answer.scaler].append(answer.at)
    starts = [fault.started for fault in faults]
    longest = {f"{fault.name} at {fault.started - start:.0f}s": (0.0, "") for fault in faults}
    names = list(longest)
    for scaler, times in by_scaler.items():
        for before, after in itertools.pairwise([start, *times, end]):
            cause = bisect.bisect_right(starts, before + poll) - 1
            if cause < 0:
                continue
            if past_its_end:
                before = max([before, *(fault.ended for fault in faults if fault.started < after)])
            missed = after - before
            if missed > longest[names[cause]][0]:
                longest[names[cause]] = (missed, scaler)
    return longest


@dataclass(frozen=True)
class Write:
    at: float
    user: str


def audit_writes(lines: Iterable[str], namespace: str, lease: str) -> tuple[list[Write], list[Write]]:
    """From the API server's audit log: the status writes that took effect in ``namespace`` (when
    each was received), and the writes of Lease ``lease`` that took effect (when each completed)."""
    statuses: list[Write] = []
    leases: list[Write] = []
    for line in lines:
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        code = (event.get("responseStatus") or {}).get("code", 0)
        if event.get("stage") != "ResponseComplete" or not 200 <= code < 300 or ref.get("namespace") != namespace:
            continue
        user = event["user"]["username"]
        if ref.get("resource") == "predictivescalers" and ref.get("subresource") == "status":
            statuses.append(Write(_seconds(event["requestReceivedTimestamp"]), user))
        elif ref.get("resource") == "leases" and ref.get("name") == lease:
            leases.append(Write(_seconds(event["stageTimestamp"]), user))
    return statuses, leases


def non_leader_writes(statuses: Sequence[Write], leases: Sequence[Write], lease_duration: float) -> list[Write]:
    """Status writes whose writer was not the leader when it sent them: another replica had taken
    the Lease since the writer last wrote it, or the writer's last write of it was more than a
    lease duration earlier (its hold had expired)."""
    ordered = sorted(leases, key=lambda w: w.at)
    times = [lease.at for lease in ordered]
    offending = []
    for write in statuses:
        last = bisect.bisect_right(times, write.at) - 1
        if last < 0 or ordered[last].user != write.user or write.at - ordered[last].at > lease_duration:
            offending.append(write)
    return offending


def stuck_evaluations(histories: Mapping[str, ScalerHistory], cutoff: float) -> list[tuple[str, int]]:
    """Generations first seen before ``cutoff`` that no status ever reached: each a scaler whose
    evaluation stopped (an evaluation is single-flight, so one that hangs holds back every later one)."""
    return [
        (name, generation)
        for name, history in histories.items()
        for generation, seen in history.spec_seen.items()
        if seen < cutoff and generation not in history.evaluated_at
    ]


def slowest_evaluation(histories: Mapping[str, ScalerHistory]) -> float:
    """The longest from a spec change appearing to a status evaluated at it, in seconds."""
    return max(
        (
            history.evaluated_at[g] - seen
            for history in histories.values()
            for g, seen in history.spec_seen.items()
            if g in history.evaluated_at
        ),
        default=0.0,
    )


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()

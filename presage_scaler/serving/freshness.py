"""How recently a recommendation was confirmed, when its status is not rewritten at every evaluation.

The evaluating replica (the leader, or a shard's owner) writes a scaler's status when something
visible changed and otherwise holds it (:mod:`~presage_scaler.controller.status_cadence`), so a
written ``lastForecast.generatedAt`` can be older than the evaluation that last confirmed the
recommendation. The owner says so in the Lease it renews every retry period: the annotation
:data:`ANNOTATION` holds a :class:`FreshnessRecord`, the time ``t`` it was published and the
lateness ``R``: over every scaler the Lease covers whose written status has a recommendation and is
not Degraded, the largest ``(t - v) / B``, where ``v`` is when the latest evaluation whose visible
outcome that written status shows started, and ``B`` is the scaler's bound (the age past which its
recommendation is refused: :meth:`~presage_scaler.api.serving_contract.StalenessBound.served_within`). So
each such scaler's recommendation was confirmed no earlier than ``t - R·B``, and a replica serving
it at ``now`` takes its age as ``now - max(generatedAt, t - R·B)``.

Measured in bounds, not intervals, so that one scaler's lateness says as much of every other one
whatever their intervals: a 1-second scaler ten seconds late is 8 % of its 2-minute bound, not
ten intervals. Every replica reads the Leases every retry period anyway (to campaign for them), so
the records cost no request of their own. A record is a true statement when published, whoever
reads it later: a dead owner's record simply ages, and the recommendations it vouched for go stale
on the usual bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.serving.store import StoredRecommendation

ANNOTATION = "scaling.presage.sh/freshness"
"""The Lease annotation that carries a :class:`FreshnessRecord`."""


@dataclass(frozen=True)
class FreshnessRecord:
    """What a Lease's owner vouches for: every covered scaler was confirmed at or after
    ``published_at - lateness × its bound``. ``shards``: how many Leases the scalers are split across
    (1 unsharded); a record written under another split covers other scalers and is ignored."""

    published_at: datetime
    lateness: float
    shards: int

    def encode(self) -> str:
        return json.dumps(
            {"publishedAt": self.published_at.isoformat(), "lateness": round(self.lateness, 6), "shards": self.shards},
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: object) -> FreshnessRecord | None:
        """The record in an annotation's value; None when absent or unreadable (then it vouches for nothing)."""
        if not isinstance(text, str):
            return None
        try:
            raw = json.loads(text)
            at = datetime.fromisoformat(raw["publishedAt"])
            lateness, shards = float(raw["lateness"]), raw["shards"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        if at.tzinfo is None or not math.isfinite(lateness) or lateness < 0 or not isinstance(shards, int):
            return None
        return cls(at, lateness, shards)

    def confirmed_at(self, bound: float) -> datetime:
        """The earliest a covered scaler with a bound of ``bound`` seconds was confirmed."""
        return datetime.fromtimestamp(self.published_at.timestamp() - self.lateness * bound, self.published_at.tzinfo)


class LeaseFreshness:
    """The freshness records read from the Leases, and each recommendation's age by them."""

    def __init__(self, lease_of: Callable[[str, str], str], shards: int, staleness: StalenessBound) -> None:
        """``lease_of(namespace, name)``: the Lease whose owner evaluates that scaler."""
        self._lease_of = lease_of
        self._shards = shards
        self._staleness = staleness
        self._records: dict[str, FreshnessRecord] = {}

    def observe(self, lease: dict[str, object]) -> None:
        """Keep the record of a Lease just read (or written)."""
        meta = lease.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            return
        annotations = meta.get("annotations")
        record = FreshnessRecord.decode(annotations.get(ANNOTATION) if isinstance(annotations, dict) else None)
        if record is None or record.shards != self._shards:
            self._records.pop(meta["name"], None)
        else:
            self._records[meta["name"]] = record

    def record(self, lease: str) -> FreshnessRecord | None:
        return self._records.get(lease)

    def bound(self, rec: StoredRecommendation) -> float:
        """The scaler's bound in seconds: the age past which its recommendation is refused."""
        return self._staleness.served_within(rec.interval, rec.agones_max_age).total_seconds()

    def confirmed_at(self, rec: StoredRecommendation) -> datetime:
        """When ``rec`` was last confirmed: its forecast time, or later where its Lease vouches for it.
        A Degraded status is vouched for by nothing but itself."""
        if rec.degraded:
            return rec.generated_at
        record = self._records.get(self._lease_of(rec.namespace, rec.name))
        if record is None:
            return rec.generated_at
        return max(rec.generated_at, record.confirmed_at(self.bound(rec)))

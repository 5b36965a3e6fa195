"""This replica's part in leader election: its Lease elector(s), and what holding them decides.

Three arrangements, by ``presage run``'s flags: no election (this replica evaluates every scaler
and writes every status), one Lease (its holder does), or ``shards`` Leases (the owner of a
scaler's shard evaluates it, and shard 0's owner writes ForecastBackend statuses; see
:mod:`~presage_scaler.controller.shards`).

Every elector publishes a freshness record (:mod:`presage_scaler.serving.freshness`) in its Lease
at each renewal: the lateness of the scalers that Lease covers. Every replica reads the records of
the Leases it campaigns for; the holder also remembers what it published (:meth:`Leadership.vouch`)
and holds statuses by it.

The electors and the scaler controller need each other: the controller asks who leads and what the
Lease vouches for; the electors tell it which scalers it gained or lost, and publish its lateness.
So a :class:`Leadership` is built first and answers the controller's questions (everything is led
here until it campaigns); :meth:`Leadership.campaign` builds the electors once the controller
exists.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.api.sharding import shard_of
from presage_scaler.clients.kube.client import KubeClient
from presage_scaler.clients.kube.leader import LeaderElector
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.predictive_scaler_objects import Key
from presage_scaler.controller.shards import ShardElection, lease_of, shard_lease_name
from presage_scaler.controller.status_cadence import LeaseVouch
from presage_scaler.serving.freshness import ANNOTATION, FreshnessRecord, LeaseFreshness


class Leadership:
    """Who evaluates what on this replica, and the Lease elector(s) that decide it."""

    def __init__(self, lease_name: str, shards: int, staleness: StalenessBound) -> None:
        """``lease_name``: the Lease (or, sharded, the base of the shard Leases' names); ``shards``:
        1 for one Lease; ``staleness``: the bound KEDA is served under, by which records are read."""
        self.lease_name = lease_name
        self.shards = shards
        self.freshness = LeaseFreshness(self.lease, shards, staleness)
        self.elector: LeaderElector | ShardElection | None = None
        self._published: dict[str, LeaseVouch] = {}  # Lease name -> what this replica last published in it

    def shard(self, key: Key) -> int:
        return shard_of(*key, self.shards)

    def lease(self, namespace: str, name: str) -> str:
        """The Lease whose holder evaluates the scaler ``namespace/name``."""
        return lease_of(self.lease_name, self.shards, namespace, name)

    def leading(self) -> bool:
        """Whether this replica evaluates anything now (the leader, or the owner of a shard)."""
        if isinstance(self.elector, ShardElection):
            return self.elector.owns_any()
        return self.elector is None or self.elector.is_leader

    def owns(self, key: Key) -> bool:
        """Whether this replica evaluates (and writes) the scaler ``key`` now, once leading."""
        return not isinstance(self.elector, ShardElection) or self.elector.owns(self.shard(key))

    def writes_backends(self) -> bool:
        """Whether this replica writes ForecastBackend statuses: the leader, or shard 0's owner."""
        return self.elector.owns(0) if isinstance(self.elector, ShardElection) else self.leading()

    def vouch(self, key: Key) -> LeaseVouch | None:
        """What the scaler's Lease vouches for: the record this replica last published in it, if any."""
        return self._published.get(self.lease(*key))

    def campaign(
        self,
        client: KubeClient,
        namespace: str,
        identity: str,
        scalers: ScalerController,
        *,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
    ) -> LeaderElector | ShardElection:
        """Build the elector(s) for the Leases in ``namespace``, reporting to ``scalers``; they
        campaign once their ``run()`` is started. A record published may take up to a renew deadline
        and a retry period to reach the replicas that serve."""
        lag = timedelta(seconds=renew_deadline + retry_period)
        if self.shards > 1:

            def in_shard(shard: int) -> Callable[[Key], bool]:
                return lambda key: self.shard(key) == shard

            self.elector = ShardElection(
                client,
                namespace,
                self.lease_name,
                identity,
                self.shards,
                on_change=lambda s, owned: scalers.on_ownership(in_shard(s), owned),
                busy=lambda s: scalers.in_flight(in_shard(s)),
                annotate=lambda s: self._publish(scalers, shard_lease_name(self.lease_name, s), in_shard(s), lag),
                observe=self.freshness.observe,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
            )
        else:
            self.elector = LeaderElector(
                client,
                namespace,
                self.lease_name,
                identity,
                on_change=scalers.on_leadership,
                annotate=lambda: self._publish(scalers, self.lease_name, lambda key: True, lag),
                observe=self.freshness.observe,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
            )
        return self.elector

    def _publish(
        self, scalers: ScalerController, lease: str, selects: Callable[[Key], bool], lag: timedelta
    ) -> dict[str, str]:
        """The annotations of ``lease`` at a renewal: the lateness of the scalers ``selects`` picks,
        remembered as what this replica vouches for."""
        now = datetime.now(UTC)
        lateness = scalers.lateness(selects, self.freshness.record(lease), now)
        self._published[lease] = LeaseVouch(lateness, lag, now)
        return {ANNOTATION: FreshnessRecord(now, lateness, self.shards).encode()}

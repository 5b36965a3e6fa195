"""Sharded evaluation: N replicas split the scalers, and each scaler is evaluated by one replica.

A scaler belongs to shard :func:`~presage_scaler.api.sharding.shard_of` (a stable hash of
namespace/name, the same in every replica and every release). Each shard is a Lease,
``<lease>-shard-<i>``, taken and renewed by :class:`~presage_scaler.clients.kube.leader.LeaderElector`'s
rules, so no two replicas ever hold one at once; a replica evaluates a scaler, and writes its
status, only while it holds that scaler's shard.

Balance: every replica renews a membership Lease (``<lease>-member-<identity>``, labelled
:data:`MEMBERSHIP_LABEL`), and takes a shard only while it holds fewer than its fair share,
``ceil(shards / live members)``; above it, it hands the extra shards back: it stops starting their
evaluations, waits for those in flight, then releases the Lease. A replica that dies stops
renewing: its shard Leases expire after ``leaseDuration`` and the survivors, whose fair share has
grown, take them at their next round. Membership Leases left by dead replicas are deleted.

Every replica, sharded or not, serves KEDA and Agones for every scaler from the status it watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from presage_scaler.api.sharding import shard_of
from presage_scaler.clients.kube.client import JSON, ApiError, Conflict, KubeClient, NotFound
from presage_scaler.clients.kube.leader import LEASES, LeaderElector, micro_time

log = logging.getLogger(__name__)

MEMBERSHIP_LABEL = "scaling.presage.sh/membership"
"""Label of membership Leases; its value is the base Lease name the replicas share."""
FORGOTTEN_AFTER = 4
"""Lease durations after which a membership Lease nobody renews is deleted."""


def shard_lease_name(base: str, shard: int) -> str:
    return f"{base}-shard-{shard}"


def lease_of(base: str, shards: int, namespace: str, name: str) -> str:
    """The Lease whose holder evaluates the scaler ``namespace/name``: ``base`` itself unsharded."""
    return base if shards == 1 else shard_lease_name(base, shard_of(namespace, name, shards))


def member_lease_name(base: str, identity: str) -> str:
    """A valid Lease name for ``identity`` (hostnames carry ``_`` and capitals; names may not)."""
    readable = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:40] or "replica"
    digest = hashlib.blake2b(identity.encode(), digest_size=4).hexdigest()
    return f"{base}-member-{readable}-{digest}"


class Membership:
    """This replica's membership Lease, renewed every ``retry_period``, and the count of live members:
    those whose Lease changed within ``lease_duration`` on this replica's own clock."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        base: str,
        identity: str,
        *,
        lease_duration: float,
        retry_period: float,
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._base = base
        self._name = member_lease_name(base, identity)
        self._identity = identity
        self._lease_duration = lease_duration
        self._retry_period = retry_period
        self._seen: dict[str, tuple[str, float]] = {}  # name -> (renewTime, monotonic time first seen)
        self.live = 1  # this replica, until the first listing

    async def run(self) -> None:
        """Renew and count until cancelled; then delete this replica's Lease (a clean exit)."""
        try:
            while True:
                try:
                    await self._renew()
                    await self._count()
                except ApiError as exc:
                    log.warning("membership lease=%s/%s error=%s", self._namespace, self._name, exc)
                await asyncio.sleep(self._retry_period)
        finally:
            await asyncio.shield(self._delete(self._name))

    async def _renew(self) -> None:
        spec = {"holderIdentity": self._identity, "leaseDurationSeconds": max(1, round(self._lease_duration))}
        try:
            lease = await self._client.get(LEASES, self._namespace, self._name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self._name,
                    "namespace": self._namespace,
                    "labels": {MEMBERSHIP_LABEL: self._base},
                },
                "spec": {**spec, "renewTime": micro_time(datetime.now(UTC))},
            }
            await self._client.create(LEASES, self._namespace, body)
            return
        lease["spec"] = {**lease.get("spec", {}), **spec, "renewTime": micro_time(datetime.now(UTC))}
        with contextlib.suppress(Conflict):  # renewed again next round
            await self._client.replace(LEASES, self._namespace, self._name, lease)

    async def _count(self) -> None:
        listing = await self._client.list(
            LEASES, self._namespace, params={"labelSelector": f"{MEMBERSHIP_LABEL}={self._base}"}
        )
        now, live, names = time.monotonic(), 0, set()
        for lease in listing.get("items", []):
            name = lease["metadata"]["name"]
            names.add(name)
            renewed = (lease.get("spec") or {}).get("renewTime") or ""
            seen = self._seen.get(name)
            if seen is None or seen[0] != renewed:
                seen = self._seen[name] = (renewed, now)
            if name == self._name or now - seen[1] <= self._lease_duration:
                live += 1
            elif now - seen[1] > FORGOTTEN_AFTER * self._lease_duration:
                await self._delete(name)
        for gone in set(self._seen) - names:
            del self._seen[gone]
        self.live = max(live, 1)

    async def _delete(self, name: str) -> None:
        try:
            await self._client.delete(LEASES, self._namespace, name)
        except NotFound:
            pass
        except ApiError as exc:
            log.warning("could not delete membership lease=%s/%s error=%s", self._namespace, name, exc)


class ShardElection:
    """Campaigns for ``shards`` shard Leases, holding about a fair share of them.

    ``on_change(shard, owned)`` is called when this replica starts or stops owning a shard;
    ``busy(shard)`` says whether an evaluation of the shard is still in flight (a shard handed back
    is released only once none is); ``annotate(shard)`` and ``observe`` as for each shard's
    :class:`~presage_scaler.clients.kube.leader.LeaderElector`.
    """

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        base: str,
        identity: str,
        shards: int,
        *,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        on_change: Callable[[int, bool], None],
        busy: Callable[[int], bool],
        annotate: Callable[[int], dict[str, str]] | None = None,
        observe: Callable[[JSON], None] | None = None,
    ) -> None:
        if shards < 2:
            raise ValueError("sharding needs at least 2 shards; one shard is plain leader election")
        self.shards = shards
        self._retry_period = retry_period
        self._renew_deadline = renew_deadline
        self._on_change = on_change
        self._busy = busy
        self._leaving: set[int] = set()
        self.membership = Membership(
            client, namespace, base, identity, lease_duration=lease_duration, retry_period=retry_period
        )
        self.electors = [
            LeaderElector(
                client,
                namespace,
                shard_lease_name(base, shard),
                identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                on_change=functools.partial(self._changed, shard),
                may_acquire=self._below_share,
                annotate=None if annotate is None else functools.partial(annotate, shard),
                observe=observe,
            )
            for shard in range(shards)
        ]

    @property
    def share(self) -> int:
        """The most shards this replica should hold: ``ceil(shards / live members)``."""
        return math.ceil(self.shards / self.membership.live)

    def held(self) -> list[int]:
        return [shard for shard, elector in enumerate(self.electors) if elector.is_leader]

    def owns(self, shard: int) -> bool:
        """Whether this replica may evaluate (and write) the scalers of ``shard`` now."""
        return self.electors[shard].is_leader and shard not in self._leaving

    def owns_any(self) -> bool:
        return any(self.owns(shard) for shard in range(self.shards))

    def _below_share(self) -> bool:
        return len(self.held()) < self.share

    def _changed(self, shard: int, leading: bool) -> None:
        if not leading:
            self._leaving.discard(shard)
        self._on_change(shard, leading)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.membership.run())
            for elector in self.electors:
                group.create_task(elector.run())
            while True:
                await asyncio.sleep(self._retry_period)
                extra = len(self.held()) - len(self._leaving) - self.share
                for shard in sorted(set(self.held()) - self._leaving, reverse=True)[: max(extra, 0)]:
                    group.create_task(self._hand_back(shard))

    async def _hand_back(self, shard: int) -> None:
        """Stop the shard's evaluations, wait (up to the renew deadline) for those in flight, release."""
        self._leaving.add(shard)
        log.info("handing back shard=%d: %d shards held, fair share %d", shard, len(self.held()), self.share)
        self._on_change(shard, False)
        deadline = time.monotonic() + self._renew_deadline
        while self._busy(shard) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        self.electors[shard].step_down()

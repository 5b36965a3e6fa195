"""Leader election on a coordination.k8s.io/v1 Lease, the way Kubernetes' own controllers do it.

The leader renews ``spec.renewTime`` every ``retry_period``. A candidate takes the Lease only once
it has watched the record stay unchanged for a full ``lease_duration`` on its *own* clock (so clock
skew between nodes does not matter), and every write is conditional on the resourceVersion it read,
so two candidates can never both win. A leader that cannot renew within ``renew_deadline`` steps
down before anyone else may take over: each renewal is given until then and no longer, counted from
when the last successful one was sent. On a clean shutdown the leader releases the Lease so a
standby takes over at once instead of waiting out the duration.

:attr:`LeaderElector.is_leader` is read off the clock, not only off what the election task last
decided: it turns false the instant the renew deadline passes, even when the task that would step
down has not run since (a process starved of CPU, or an event loop held by other work). A writer
that checks it immediately before a request leaves (:class:`~presage_scaler.clients.kube.client.Fence`)
therefore never sends once another replica may have taken the Lease: the renew deadline runs from
before the renewal was sent, and the others wait a whole lease duration after they saw it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from presage_scaler.clients.kube.client import JSON, ApiError, Conflict, KubeClient, NotFound, Resource

log = logging.getLogger(__name__)

LEASES = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")


def micro_time(now: datetime) -> str:
    """A Lease's MicroTime (``acquireTime``, ``renewTime``): UTC, microseconds, ``Z``."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaign for one Lease; :attr:`is_leader` is true only while this process holds it."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_change: Callable[[bool], None] | None = None,
        may_acquire: Callable[[], bool] = lambda: True,
        annotate: Callable[[], dict[str, str]] | None = None,
        observe: Callable[[JSON], None] | None = None,
    ) -> None:
        """``may_acquire``: asked before taking the Lease from no one or from an expired holder (never
        before renewing it); a sharded replica above its fair share says no. ``annotate``: annotations
        to set on the Lease at every acquisition and renewal (what the holder publishes);
        ``observe``: called with the Lease at every read, and with what this replica wrote."""
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self._client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._on_change = on_change
        self._may_acquire = may_acquire
        self._annotate = annotate
        self._observe = observe
        self._step_down = False
        self._is_leader = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic time that record was first seen
        self._last_renewed = 0.0

    @property
    def is_leader(self) -> bool:
        """Whether this process certainly holds the Lease now: it won or renewed it, and the renew
        deadline, counted from when that renewal was sent, has not passed on this process's clock."""
        return self._is_leader and time.monotonic() < self._last_renewed + self.renew_deadline

    def _set_leading(self, leading: bool) -> None:
        if leading != self._is_leader:
            self._is_leader = leading
            log.info(
                "leader election lease=%s/%s identity=%s leading=%s", self.namespace, self.name, self.identity, leading
            )
            if self._on_change is not None:
                self._on_change(leading)

    def step_down(self) -> None:
        """Give the Lease up at the next round: stop leading, then release it (the caller has stopped
        what the Lease guards). It is taken again only when ``may_acquire`` allows."""
        self._step_down = True

    async def run(self) -> None:
        """Campaign and renew until cancelled; on cancellation release the Lease if held."""
        try:
            while True:
                if self._step_down:
                    self._step_down = False
                    if self._is_leader:
                        self._set_leading(False)
                        await self._release()
                        await asyncio.sleep(self.retry_period)
                        continue
                # A renewal is given until the renew deadline and no longer: an API server that
                # accepts the request and never answers (its etcd stopped) must not keep this replica
                # leading past it, or another replica takes the expired Lease while this one writes.
                # The hold runs from when the renewal was sent, before the record could have changed
                # in the API server, so it always ends before the Lease expires for the others.
                attempt = time.monotonic()
                left = self.renew_deadline
                if self._is_leader:
                    left = self._last_renewed + self.renew_deadline - attempt
                try:
                    async with asyncio.timeout(max(left, 0.0)):
                        acquired = await self._try_acquire_or_renew()
                except ApiError as exc:
                    log.warning("leader election lease=%s/%s error=%s", self.namespace, self.name, exc)
                    acquired = False
                except TimeoutError:
                    log.warning(
                        "leader election lease=%s/%s error=no answer within %.1fs", self.namespace, self.name, left
                    )
                    acquired = False
                now = time.monotonic()
                if acquired:
                    self._last_renewed = attempt
                    self._set_leading(True)
                elif self._is_leader:
                    lost = self._observed is not None and self._observed[0] != self.identity
                    if lost or now - self._last_renewed >= self.renew_deadline:
                        self._set_leading(False)
                pause = self.retry_period
                if self._is_leader:  # back at the deadline at the latest, to step down on time
                    pause = min(pause, max(0.0, self._last_renewed + self.renew_deadline - time.monotonic()))
                await asyncio.sleep(pause)
        finally:
            if self._is_leader:
                self._set_leading(False)
                await asyncio.shield(self._release())

    def _spec(self, acquire_time: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": micro_time(self._clock()),
            "leaseTransitions": transitions,
        }

    def _annotated(self, meta: JSON) -> JSON:
        if self._annotate is not None:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self._annotate()}
        return meta

    def _seen(self, lease: JSON) -> None:
        if self._observe is not None:
            self._observe(lease)

    async def _try_acquire_or_renew(self) -> bool:
        try:
            lease = await self._client.get(LEASES, self.namespace, self.name)
        except NotFound:
            if not self._may_acquire():
                return False
            body: JSON = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": self._annotated({"name": self.name, "namespace": self.namespace}),
                "spec": self._spec(micro_time(self._clock()), 0),
            }
            try:
                self._seen(await self._client.create(LEASES, self.namespace, body))
            except Conflict:
                return False
            self._observed = (self.identity, body["spec"]["renewTime"])
            self._observed_at = time.monotonic()
            return True
        self._seen(lease)
        spec = lease.get("spec", {})
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime") or "")
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        held_by_other = holder and holder != self.identity
        expired = time.monotonic() - self._observed_at > float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if held_by_other and not expired:
            return False
        if holder != self.identity and not self._may_acquire():
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            acquire_time = spec.get("acquireTime") or micro_time(self._clock())
        else:
            acquire_time, transitions = micro_time(self._clock()), transitions + 1
        lease["spec"] = self._spec(acquire_time, transitions)
        self._annotated(lease.setdefault("metadata", {}))
        try:
            updated = await self._client.replace(LEASES, self.namespace, self.name, lease)
        except Conflict:
            return False
        self._seen(updated)
        self._observed = (self.identity, updated["spec"]["renewTime"])
        self._observed_at = time.monotonic()
        return True

    async def _release(self) -> None:
        """Clear the holder so a standby need not wait out the lease duration."""
        try:
            lease = await self._client.get(LEASES, self.namespace, self.name)
            if lease.get("spec", {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            await self._client.replace(LEASES, self.namespace, self.name, lease)
            log.info("released lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        except ApiError as exc:
            log.warning("could not release lease=%s/%s error=%s", self.namespace, self.name, exc)

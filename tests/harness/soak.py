"""A long run of presage with faults injected together, measured from the outside.

Everything runs for real: etcd and kube-apiserver (with an audit log of PredictiveScaler status
writes and Lease writes), Prometheus (a backfilled demand series that a scraped gauge extends), and
two ``presage run`` replicas sharing one Lease, each authenticated as a ServiceAccount of its own so
that the audit log tells their writes apart. ``scalers`` PredictiveScalers in Enforce mode, each
pinned to a count that the soak changes every ``rotate`` seconds (:mod:`tests.harness.soak_figures`
says how that exposes a stale count).

A schedule injects, in turn and over again: SIGKILL of the leader (restarted ``restart_after``
seconds later, as the kubelet would), a Prometheus restart, a kube-apiserver restart, SIGSTOP of
etcd for ``etcd_stop`` seconds, and the idle-connection attack (:mod:`tests.harness.idle_connections`:
a thousand connections from 127.0.0.2, each reopened 2 s on average after presage closes it)
against the leader's webhook port. ``busy`` processes spin on the CPU for the whole measured run, as
other pods of a busy node would: the replicas, the API server and etcd are starved of CPU together,
which is when a leader's renewal and its writes fall behind its clock. Meanwhile the soak

* calls GetMetrics on every replica that is up for ``sampled`` scalers every ``poll`` seconds, as
  KEDA does (each scaler at its own phase);
* probes each replica's ``/healthz`` every 2 s with the kubelet's 1 s timeout, on the health port
  (where the chart's probes go) and on the webhook port (where the attack is);
* watches the PredictiveScalers (each generation's count, when a status first reached it, the
  shadow buckets), patches the pinned counts, polls the Lease and reads each replica's memory.

:func:`run` returns the :class:`Figures`; :meth:`Figures.lines` prints them and
:meth:`Figures.violations` names every figure that must be 0 and is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import httpx

from presage_scaler.api.serving_contract import SCALER_KEY
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.keda import metric_name
from tests.harness.idle_connections import AttackTotals, IdleConnections, raise_open_files_limit
from tests.harness.kube import KubeControlPlane, KubeHarnessError, ensure_kube_binaries
from tests.harness.live_values import LiveValues
from tests.harness.presage_cluster import REPO, install_crds, seasonal_backend
from tests.harness.process import ServerProcess, free_ports
from tests.harness.prometheus import PrometheusServer
from tests.harness.soak_figures import (
    Answer,
    AnswerVerdict,
    Fault,
    ScalerHistory,
    Write,
    audit_writes,
    judge_answers,
    longest_without_a_count,
    non_leader_writes,
    slowest_evaluation,
    stuck_evaluations,
)

NAMESPACE = "soak"
LEASE = "presage-scaler"
REPLICAS = ("replica-a", "replica-b")
BACKEND = "soak-seasonal"
GROUP_PATH = f"/apis/scaling.presage.sh/v1alpha1/namespaces/{NAMESPACE}/predictivescalers"
FAULTS = ("kill -9 the leader", "restart Prometheus", "restart kube-apiserver", "SIGSTOP etcd", "idle connections")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create", "update", "patch"],
            "resources": [
                {"group": "scaling.presage.sh", "resources": ["predictivescalers/status"]},
                {"group": "coordination.k8s.io", "resources": ["leases"]},
            ],
        },
        {"level": "None"},
    ],
}
PROBE_EVERY = 2.0
KEDA_TIMEOUT = 10.0
"""KEDA calls GetMetrics with the HPA's request context, whose deadline is the metrics API's (tens of
seconds); every answer's latency is reported beside."""
PROBE_TIMEOUT = 1.0  # the kubelet's default timeoutSeconds


@dataclass(frozen=True)
class SoakConfig:
    """How long, how many scalers, how the replicas are timed, and the fault schedule (seconds)."""

    minutes: float = 30.0
    scalers: int = 1000
    sampled: int = 100  # scalers KEDA's calls are made for
    interval: int = 60  # the PredictiveScalers' interval
    lead: str = "1m"  # their static lead time: a recommendation's shadow score comes this long after it
    resolution: str = "1m"  # their signal's step
    rotate: float = 180.0  # between two changes of one scaler's count
    poll: float = 5.0
    staleness_factor: float = 3.0
    staleness_floor: float = 30.0
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    first_fault: float = 120.0
    fault_every: float | None = None  # None: every 3 minutes, or closer so that each fault happens once
    etcd_stop: float = 30.0
    restart_after: float = 10.0
    attack_seconds: float = 60.0
    attack_connections: int = 1000
    early_memory: float = 300.0  # the first of the two memory readings compared
    busy: int = 0  # processes spinning on the CPU beside the run (a loaded node)

    @classmethod
    def short(cls, scalers: int = 100) -> SoakConfig:
        """The suite's two minutes: each fault once, 100 scalers every 10 s, 4 s leases."""
        return cls(
            minutes=2.0,
            scalers=scalers,
            sampled=scalers,
            interval=10,
            lead="20s",
            resolution="10s",
            rotate=30.0,
            poll=3.0,
            lease_duration=4.0,
            renew_deadline=3.0,
            retry_period=0.5,
            first_fault=8.0,
            fault_every=12.0,
            restart_after=3.0,
            attack_seconds=20.0,
            early_memory=30.0,
        )

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def bound(self) -> float:
        """Past this age a recommendation must be refused (UNAVAILABLE)."""
        return max(self.staleness_factor * self.interval, self.staleness_floor)

    @property
    def evaluation_allowance(self) -> float:
        """How long a spec change may take to be evaluated: a deadline and an interval, two lease
        durations for a new leader, and 10 s for the status to reach the watch."""
        deadline = min(max(self.interval, 10), 300)
        return deadline + self.interval + 2 * self.lease_duration + 10

    @property
    def spacing(self) -> float:
        """Seconds between two faults' starts."""
        if self.fault_every is not None:
            return self.fault_every
        room = self.seconds - self.first_fault - self.evaluation_allowance - self.etcd_stop
        return max(30.0, min(180.0, room / (len(FAULTS) - 1)))

    def schedule(self) -> list[tuple[float, str]]:
        """When each fault starts. Those that stop evaluations end before the last
        :attr:`evaluation_allowance`, so every spec change before it can be judged."""
        planned = []
        for i in range(int(self.seconds // self.spacing) + 1):
            at, name = self.first_fault + i * self.spacing, FAULTS[i % len(FAULTS)]
            lasts = {"SIGSTOP etcd": self.etcd_stop, "idle connections": self.attack_seconds}.get(name, 30.0)
            limit = self.seconds if name == "idle connections" else self.seconds - self.evaluation_allowance
            if at + lasts <= limit:
                planned.append((at, name))
        return planned


@dataclass
class Figures:
    """What the soak measured; :meth:`violations` lists every figure that must be 0 and is not."""

    config: SoakConfig
    answers: AnswerVerdict
    status_writes: int
    lease_writes: int
    non_leader: list[Write]
    buckets_seen: int
    samples_seen: int
    buckets_lost: int
    generations: int
    stuck: list[tuple[str, int]]
    slowest_evaluation: float
    memory: dict[str, tuple[float | None, float | None]]  # role -> MiB early, at the end
    probes: dict[str, tuple[int, int]]  # which -> (asked, failed)
    without: dict[str, tuple[float, str]]
    after: dict[str, tuple[float, str]]  # the same, counted from when each fault ended
    faults: list[Fault]
    attacks: list[AttackTotals]

    def violations(self) -> list[str]:
        found = []
        zero = {
            "stale counts answered": len(self.answers.stale),
            "made-up 0s answered": len(self.answers.zeros),
            "counts no generation pinned": len(self.answers.made_up),
            "GetMetrics errors other than UNAVAILABLE": sum(self.answers.other_errors.values()),
            "status writes by a non-leader": len(self.non_leader),
            "shadow buckets lost": self.buckets_lost,
            "evaluations stuck": len(self.stuck),
            "liveness probe failures": self.probes["health port /healthz"][1],
            "webhook port /healthz failures": self.probes["webhook port /healthz"][1],
        }
        found += [f"{what}: {count}" for what, count in zero.items() if count]
        found += [
            f"no count for {seconds:.1f}s after {fault} had ended ({scaler}), over the {self.config.bound:g}s bound"
            for fault, (seconds, scaler) in self.after.items()
            if seconds > self.config.bound
        ]
        if not self.answers.counts or not self.status_writes or not self.generations:
            found.append("nothing was measured: no counts answered, statuses written or generations seen")
        return found

    def memory_change(self, role: str) -> float | None:
        early, late = self.memory.get(role, (None, None))
        return None if early is None or late is None else (late - early) / early

    def lines(self) -> list[str]:
        a, c = self.answers, self.config
        lines = [
            f"{c.scalers} scalers every {c.interval}s, {c.minutes:g} min, staleness bound {c.bound:g}s, "
            f"{c.busy} busy processes beside",
            f"KEDA GetMetrics: {a.answers} answers to {c.sampled} scalers x {len(REPLICAS)} replicas: "
            f"{a.counts} counts, {a.unavailable} UNAVAILABLE, other errors {a.other_errors or 0}",
            f"  stale counts: {len(a.stale)}, made-up 0s: {len(a.zeros)}, counts no generation pinned: "
            f"{len(a.made_up)}; slowest answer {a.slowest:.2f}s, {a.over_a_second} over 1 s",
            f"status writes by a non-leader: {len(self.non_leader)} (of {self.status_writes} status writes; "
            f"{self.lease_writes} Lease writes)",
            f"shadow buckets lost across restarts: {self.buckets_lost} (of {self.buckets_seen} buckets, "
            f"{self.samples_seen} samples seen)",
            f"evaluations stuck past their deadline: {len(self.stuck)} (spec changes seen over "
            f"{c.evaluation_allowance:g}s before the end that no status reached, of {self.generations}; the "
            f"slowest through the faults was evaluated {self.slowest_evaluation:.1f}s after it appeared)",
        ]
        for role in ("leader", "standby"):
            early, late = self.memory.get(role, (None, None))
            change = self.memory_change(role)
            lines.append(
                f"RSS of the {role} at {c.early_memory / 60:g} min vs the end: "
                + (f"{early:.0f} MiB -> {late:.0f} MiB ({change:+.1%})" if change is not None else "not measured")
            )
        for which, (asked, failed) in self.probes.items():
            lines.append(f"{which} probe failures: {failed} of {asked}")
        lines.append(
            "longest without a count from any replica, after each fault began / once it had ended "
            f"(bound {c.bound:g}s):"
        )
        lines += [
            f"  {fault}: {seconds:.1f}s ({scaler or '-'}) / {self.after[fault][0]:.1f}s ({self.after[fault][1] or '-'})"
            for fault, (seconds, scaler) in self.without.items()
        ]
        lines += [
            f"idle-connection attack: {t.opened} connections opened, {t.closed_by_server} closed by the server"
            for t in self.attacks
        ]
        return lines


@dataclass
class _Replica:
    """One ``presage run`` slot: its ports stay, its process may be killed and started again."""

    name: str
    args: list[str]  # ``presage run``'s, but the ports
    log_dir: Path
    grpc_port: int = 0
    http_port: int = 0
    health_port: int = 0
    process: ServerProcess | None = None
    ready: bool = False  # started and answered /readyz once: the kubelet would have it in the Service
    starts: int = 0

    @property
    def up(self) -> bool:
        return self.ready and self.process is not None and self.process.running

    def start(self) -> None:
        """Start and wait until ready. The first start picks the ports, again if another process
        took one between picking and binding; later starts keep them, as a pod keeps its ports."""
        for attempt in range(3):
            if self.starts == 0:
                self.grpc_port, self.http_port, self.health_port = free_ports(3)
            self.starts += 1
            ports = [f"--grpc-port={self.grpc_port}", f"--http-port={self.http_port}"]
            argv = [*self.args, *ports, f"--health-port={self.health_port}"]
            log = self.log_dir / f"{self.name}-{self.starts}.log"
            self.process = ServerProcess(self.name, argv, log, error=KubeHarnessError, cwd=REPO)
            try:
                self.process.wait_http(f"http://127.0.0.1:{self.health_port}/readyz", time.monotonic() + 120)
            except KubeHarnessError:
                if self.starts > 1 or attempt == 2 or "Address already in use" not in self.process.log_tail():
                    raise
                self.starts = 0
                continue
            self.ready = True
            return

    def kill(self) -> None:
        self.ready = False
        if self.process is not None and self.process.running:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.stop()  # reaps it
        self.process = None

    def rss_mib(self) -> float | None:
        if not self.up:
            return None
        assert self.process is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return None


@dataclass
class _Record:
    """Everything observed, as it was observed."""

    answers: list[Answer] = field(default_factory=list)
    histories: dict[str, ScalerHistory] = field(default_factory=dict)
    attempted: dict[str, set[int]] = field(default_factory=dict)
    holder: str = ""
    memory: list[tuple[float, str, float]] = field(default_factory=list)  # (at, role, MiB)
    probes: dict[str, list[int]] = field(
        default_factory=lambda: {"health port /healthz": [0, 0], "webhook port /healthz": [0, 0]}
    )
    faults: list[Fault] = field(default_factory=list)
    attacks: list[AttackTotals] = field(default_factory=list)


def _scaler(i: int, prometheus: str, config: SoakConfig) -> dict[str, Any]:
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": f"s-{i:04d}", "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"w-{i:04d}"},
            "signal": {
                "prometheus": {"address": prometheus, "query": "max(soak_demand)"},
                "history": "1h",
                "resolution": config.resolution,
            },
            "capacity": {"perReplica": 10},
            "leadTime": {"static": config.lead},
            "interval": f"{config.interval}s",
            "forecast": {"backendRef": BACKEND},
            "policy": {"minReplicas": 1, "maxReplicas": 1},
            "mode": "Enforce",
        },
    }


def _deployment(i: int) -> dict[str, Any]:
    labels = {"app": f"w-{i:04d}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"w-{i:04d}", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


class Soak:
    """One soak: :meth:`run` sets everything up, runs the schedule and returns the figures."""

    def __init__(self, config: SoakConfig, workdir: Path, say: Callable[[str], None] = print) -> None:
        self.config = config
        self.workdir = workdir
        self.say = say
        self.record = _Record()
        self.names = [f"s-{i:04d}" for i in range(config.scalers)]
        self.audit_log = workdir / "audit.log"
        self.started = 0.0
        self.stopping = asyncio.Event()

    # -- set-up

    def _plane(self) -> KubeControlPlane:
        policy = self.workdir / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        args = [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json"]
        return KubeControlPlane(ensure_kube_binaries(), self.workdir / "kube", apiserver_args=args)

    def _ssl(self, plane: KubeControlPlane) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(plane.ca_path))
        context.load_cert_chain(str(plane.admin_cert), str(plane.admin_key))
        return context

    async def _create(self, api: httpx.AsyncClient, objects: list[dict[str, Any]]) -> None:
        gate = asyncio.Semaphore(16)

        async def one(obj: dict[str, Any]) -> None:
            group = "/apis/apps/v1" if obj["kind"] == "Deployment" else "/apis/scaling.presage.sh/v1alpha1"
            plural = "deployments" if obj["kind"] == "Deployment" else "predictivescalers"
            async with gate:
                response = await api.post(f"{group}/namespaces/{NAMESPACE}/{plural}", json=obj)
            if response.status_code != 201:
                raise KubeHarnessError(f"creating {obj['metadata']['name']}: {response.status_code} {response.text}")

        await asyncio.gather(*(one(obj) for obj in objects))

    def _replicas(self, plane: KubeControlPlane) -> list[_Replica]:
        c = self.config
        replicas = []
        for name in REPLICAS:
            plane.kubectl("create", "serviceaccount", name, "-n", NAMESPACE)
            plane.kubectl(
                "create",
                "clusterrolebinding",
                f"soak-{name}",
                "--clusterrole=cluster-admin",
                f"--serviceaccount={NAMESPACE}:{name}",
            )
            token = plane.service_account_token(NAMESPACE, name, duration=f"{int(c.seconds) + 3600}s")
            args = [
                sys.executable,
                "-m",
                "presage_scaler.cli.main",
                "run",
                f"--kubeconfig={plane.kubeconfig_for_token(token)}",
                f"--namespaces={NAMESPACE}",
                f"--lease-namespace={NAMESPACE}",
                f"--lease-name={LEASE}",
                f"--identity={name}",
                f"--lease-duration={c.lease_duration}",
                f"--renew-deadline={c.renew_deadline}",
                f"--retry-period={c.retry_period}",
                f"--staleness-factor={c.staleness_factor}",
                f"--staleness-floor={c.staleness_floor}",
                "--log-level=WARNING",
            ]
            replicas.append(_Replica(name, args, self.workdir))
        return replicas

    async def run(self) -> Figures:
        """Set up, run the schedule, measure; everything started is stopped on the way out."""
        c = self.config
        raise_open_files_limit(4 * c.attack_connections + 1024)
        live = LiveValues(soak_demand=100.0)
        prometheus = PrometheusServer(self.workdir / "prometheus")
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        history = [(now - timedelta(minutes=m), 100.0) for m in range(120, -1, -1)]
        prometheus.add_series("soak_demand", {"job": "soak"}, history)
        prometheus.add_scrape_target("soak", live.address, "5s")
        try:
            with self._plane() as plane:
                await asyncio.to_thread(prometheus.start)
                install_crds(plane)
                plane.kubectl("create", "namespace", NAMESPACE)
                plane.kubectl("apply", "-f", "-", input=json.dumps(seasonal_backend(BACKEND, "10m", 2)))
                replicas = self._replicas(plane)
                try:
                    return await self._set_up_and_measure(plane, prometheus, replicas)
                finally:
                    for replica in replicas:  # before the API server stops under them
                        replica.kill()
        finally:
            prometheus.stop()
            live.stop()

    async def _set_up_and_measure(
        self, plane: KubeControlPlane, prometheus: PrometheusServer, replicas: list[_Replica]
    ) -> Figures:
        c = self.config
        async with httpx.AsyncClient(base_url=plane.server, verify=self._ssl(plane), timeout=10.0) as api:
            self.say(f"creating {c.scalers} Deployments and PredictiveScalers")
            await self._create(api, [_deployment(i) for i in range(c.scalers)])
            await self._create(api, [_scaler(i, prometheus.url, c) for i in range(c.scalers)])
            self.record.histories = {name: ScalerHistory() for name in self.names}
            self.record.attempted = {name: {1} for name in self.names}
            for replica in replicas:
                await asyncio.to_thread(replica.start)
            await self._until_every_scaler_is_evaluated(api)
            return await self._measure(plane, api, prometheus, replicas)

    async def _until_every_scaler_is_evaluated(self, api: httpx.AsyncClient) -> None:
        waited = time.monotonic()
        while True:
            items = (await api.get(GROUP_PATH)).json()["items"]
            done = sum((o.get("status") or {}).get("recommendedReplicas") is not None for o in items)
            if done == self.config.scalers:
                self.say(f"every scaler evaluated after {time.monotonic() - waited:.0f}s")
                return
            if time.monotonic() - waited > 600:
                raise KubeHarnessError(f"only {done} of {self.config.scalers} scalers evaluated in 10 minutes")
            await asyncio.sleep(2)

    # -- the run

    async def _measure(
        self, plane: KubeControlPlane, api: httpx.AsyncClient, prometheus: PrometheusServer, replicas: list[_Replica]
    ) -> Figures:
        c = self.config
        self.started = time.time()
        sampled = self.names[: c.sampled]
        channels = {
            r.name: grpc.aio.insecure_channel(
                f"127.0.0.1:{r.grpc_port}",
                options=[("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 1000)],
            )
            for r in replicas
        }
        workers = [
            self._watch(api),
            self._lease(api),
            self._rotate(api),
            self._memory(replicas),
            self._probe(replicas),
            *(self._keda(name, i / len(sampled) * c.poll, replicas, channels) for i, name in enumerate(sampled)),
        ]
        tasks = [asyncio.create_task(worker) for worker in workers]
        spinners = [_spin(c.seconds + 60) for _ in range(c.busy)]
        try:
            await self._faults(plane, prometheus, replicas)
            await asyncio.sleep(max(0.0, self.started + c.seconds - time.time()))
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
            self.stopping.set()
            for task in tasks:
                task.cancel()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            for channel in channels.values():
                await channel.close()
        failed = [o for o in outcomes if isinstance(o, Exception) and not isinstance(o, asyncio.CancelledError)]
        if failed:
            raise failed[0]
        return self._figures(time.time())

    async def _faults(self, plane: KubeControlPlane, prometheus: PrometheusServer, replicas: list[_Replica]) -> None:
        c = self.config
        for at, name in c.schedule():
            await asyncio.sleep(max(0.0, self.started + at - time.time()))
            began = time.time()
            self.say(f"{began - self.started:6.0f}s  {name}")
            if name == "kill -9 the leader":
                leader = next((r for r in replicas if r.name == self.record.holder), replicas[0])
                leader.kill()
                await asyncio.sleep(c.restart_after)
                await asyncio.to_thread(leader.start)
            elif name == "restart Prometheus":
                await asyncio.to_thread(prometheus.start)
            elif name == "restart kube-apiserver":
                await asyncio.to_thread(plane.restart_apiserver)
            elif name == "SIGSTOP etcd":
                etcd = plane.pids["etcd"]
                os.kill(etcd, signal.SIGSTOP)
                try:
                    await asyncio.sleep(c.etcd_stop)
                finally:
                    os.kill(etcd, signal.SIGCONT)
            else:
                target = next((r for r in replicas if r.name == self.record.holder), replicas[0])
                attack = IdleConnections(
                    "127.0.0.1",
                    target.http_port,
                    count=c.attack_connections,
                    source="127.0.0.2",
                    reopen_after=2.0,
                    workdir=self.workdir,
                )
                await asyncio.to_thread(attack.start)
                try:
                    await asyncio.sleep(c.attack_seconds)
                finally:
                    self.record.attacks.append(await asyncio.to_thread(attack.stop))
            self.record.faults.append(Fault(name, began, time.time()))

    async def _watch(self, api: httpx.AsyncClient) -> None:
        """The PredictiveScalers: a list, then a watch from it, again whenever the watch breaks."""
        histories = self.record.histories
        while not self.stopping.is_set():
            try:
                response = await api.get(GROUP_PATH)
                if response.status_code != 200:  # 5xx while etcd is stopped
                    raise httpx.HTTPStatusError("list failed", request=response.request, response=response)
                listed = response.json()
                at = time.time()
                for obj in listed["items"]:
                    histories[obj["metadata"]["name"]].observe(obj, at)
                version = listed["metadata"]["resourceVersion"]
                params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "false"}
                async with api.stream("GET", GROUP_PATH, params=params, timeout=None) as stream:
                    async for line in stream.aiter_lines():
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            break
                        histories[event["object"]["metadata"]["name"]].observe(event["object"], time.time())
            except (httpx.HTTPError, httpx.StreamError, json.JSONDecodeError):
                pass  # the API server restarting, or etcd stopped: list again
            await asyncio.sleep(1.0)

    async def _lease(self, api: httpx.AsyncClient) -> None:
        while True:
            with contextlib.suppress(httpx.HTTPError, KeyError, json.JSONDecodeError):
                lease = await api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}")
                self.record.holder = lease.json()["spec"].get("holderIdentity") or ""
            await asyncio.sleep(1.0)

    async def _rotate(self, api: httpx.AsyncClient) -> None:
        """Each scaler's pinned count goes up by one every ``rotate`` seconds, the scalers staggered."""
        c = self.config
        counts = dict.fromkeys(self.names, 1)
        gate = asyncio.Semaphore(8)

        async def bump(name: str) -> None:
            counts[name] += 1
            count = counts[name]
            self.record.attempted[name].add(count)  # even a patch whose answer is lost may land
            patch = {"spec": {"policy": {"minReplicas": count, "maxReplicas": count}}}
            async with gate:
                with contextlib.suppress(httpx.HTTPError):
                    await api.patch(
                        f"{GROUP_PATH}/{name}",
                        content=json.dumps(patch),
                        headers={"Content-Type": "application/merge-patch+json"},
                    )

        pending: set[asyncio.Task[None]] = set()
        for round_ in range(1, int(c.seconds // c.rotate) + 2):
            for i, name in enumerate(self.names):
                due = self.started + (round_ - 1 + (i + 1) / len(self.names)) * c.rotate
                await asyncio.sleep(max(0.0, due - time.time()))
                task = asyncio.create_task(bump(name))
                pending.add(task)
                task.add_done_callback(pending.discard)

    async def _memory(self, replicas: list[_Replica]) -> None:
        while True:
            for replica in replicas:
                mib = replica.rss_mib()
                if mib is not None and self.record.holder:
                    role = "leader" if replica.name == self.record.holder else "standby"
                    self.record.memory.append((time.time(), role, mib))
            await asyncio.sleep(5.0)

    async def _probe(self, replicas: list[_Replica]) -> None:
        """/healthz as the kubelet asks it: a fresh connection each time, 1 s to answer."""
        fresh = httpx.Limits(max_keepalive_connections=0)
        transport = httpx.AsyncHTTPTransport(local_address="127.0.0.1", limits=fresh)
        async with httpx.AsyncClient(transport=transport, timeout=PROBE_TIMEOUT) as client:

            async def probe(replica: _Replica, which: str, port: int) -> None:
                counts = self.record.probes[which]
                try:
                    ok = (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if replica.up:  # a probe of a replica killed meanwhile is no failure of its server
                    counts[0] += 1
                    counts[1] += not ok

            while True:
                up = [r for r in replicas if r.up]
                await asyncio.gather(
                    *(probe(r, "health port /healthz", r.health_port) for r in up),
                    *(probe(r, "webhook port /healthz", r.http_port) for r in up),
                )
                await asyncio.sleep(PROBE_EVERY)

    async def _keda(
        self, name: str, phase: float, replicas: list[_Replica], channels: dict[str, grpc.aio.Channel]
    ) -> None:
        """KEDA's calls for one scaler: GetMetrics on every replica that is up, every ``poll`` seconds."""
        ref = pb.ScaledObjectRef(name=name, namespace=NAMESPACE, scalerMetadata={SCALER_KEY: name})
        request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric_name(name))
        stubs = {replica: pb_grpc.ExternalScalerStub(channels[replica]) for replica in channels}
        await asyncio.sleep(phase)
        while True:
            for replica in replicas:
                if not replica.up:
                    continue  # not ready, so out of the Service's endpoints: KEDA does not reach it
                called = time.time()
                try:
                    reply = await stubs[replica.name].GetMetrics(request, timeout=KEDA_TIMEOUT)
                    count, code = reply.metricValues[0].metricValue, "OK"
                except grpc.aio.AioRpcError as err:
                    if not replica.up:
                        continue
                    count, code = None, err.code().name
                now = time.time()
                answer = Answer(now, replica.name, name, count, code, now - called)
                self.record.answers.append(answer)
            await asyncio.sleep(self.config.poll)

    # -- the figures

    def _figures(self, end: float) -> Figures:
        c, r = self.config, self.record
        with (self.workdir / "answers.jsonl").open("w") as out:  # for a look at any figure afterwards
            for answer in r.answers:
                out.write(json.dumps({**answer.__dict__, "at": round(answer.at - self.started, 3)}) + "\n")
        statuses, leases = audit_writes(self.audit_log.read_text().splitlines(), NAMESPACE, LEASE)
        measured = [s for s in statuses if s.at >= self.started]
        memory: dict[str, tuple[float | None, float | None]] = {}
        for role in ("leader", "standby"):
            readings = [(at, mib) for at, which, mib in r.memory if which == role]
            early = [mib for at, mib in readings if at >= self.started + c.early_memory]
            memory[role] = (early[0] if early else None, readings[-1][1] if readings else None)
        return Figures(
            config=c,
            answers=judge_answers(r.answers, r.histories, r.attempted, c.bound),
            status_writes=len(measured),
            lease_writes=sum(lease.at >= self.started for lease in leases),
            non_leader=non_leader_writes(measured, leases, c.lease_duration),
            buckets_seen=sum(len(h.buckets) for h in r.histories.values()),
            samples_seen=sum(sum(h.buckets.values()) for h in r.histories.values()),
            buckets_lost=sum(len(h.lost) for h in r.histories.values()),
            generations=sum(len(h.spec_seen) for h in r.histories.values()),
            stuck=stuck_evaluations(r.histories, end - c.evaluation_allowance),
            slowest_evaluation=slowest_evaluation(r.histories),
            memory=memory,
            probes={which: (asked, failed) for which, (asked, failed) in r.probes.items()},
            without=longest_without_a_count(r.answers, r.faults, self.started, end, c.poll),
            after=longest_without_a_count(r.answers, r.faults, self.started, end, c.poll, past_its_end=True),
            faults=r.faults,
            attacks=r.attacks,
        )


def _spin(seconds: float) -> subprocess.Popen[bytes]:
    """A process that keeps one CPU busy for ``seconds`` at most (it ends by itself if left behind)."""
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", loop])


async def run(config: SoakConfig, workdir: Path, say: Callable[[str], None] = print) -> Figures:
    """Run one soak in ``workdir`` (its logs, the audit log and the servers' data stay there)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return await Soak(config, workdir, say).run()

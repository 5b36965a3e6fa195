"""Sharded evaluation on a real API server: two `presage run --shards 2` processes split the scalers,
each scaler is evaluated by the owner of its shard only, and a killed owner's shard moves."""

from __future__ import annotations

import json
import re
import signal
import time

import pytest
import yaml

from presage_scaler.api.sharding import shard_of
from presage_scaler.controller.app import ControllerOptions, running
from tests.harness.helm import CHART, IMAGE_FLAGS, Helm, ensure_helm
from tests.harness.presage_cluster import (
    apply,
    controller_process,
    deployment,
    eventually,
    get,
    predictive_scaler,
    recent_samples,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

SHARDS = 2
LEASE_S = 4  # controller_process's --lease-duration
PER_SHARD = 4


def _scalers(namespace: str) -> dict[str, int]:
    """PER_SHARD scaler names of each shard (the namespace is random: pick names that cover both)."""
    chosen: dict[str, int] = {}
    for k in range(1000):
        name, owner = f"s{k}", shard_of(namespace, f"s{k}", SHARDS)
        if list(chosen.values()).count(owner) < PER_SHARD:
            chosen[name] = owner
    return chosen


def _generated_at(obj) -> str | None:
    return ((obj.get("status") or {}).get("lastForecast") or {}).get("generatedAt")


def _holders(cluster, namespace: str) -> dict[int, str]:
    """Shard -> its Lease's holder ("" when released), for the shard Leases that exist."""
    listing = json.loads(cluster.kubectl("get", "leases", "-n", namespace, "-o", "json").stdout)
    holders = {}
    for lease in listing["items"]:
        if match := re.fullmatch(r"presage-scaler-shard-(\d+)", lease["metadata"]["name"]):
            holders[int(match[1])] = lease["spec"].get("holderIdentity") or ""
    return holders


def _evaluated(log: str, namespace: str) -> set[str]:
    """The scalers a replica's log says it evaluated."""
    return set(re.findall(rf"evaluated scaler={re.escape(namespace)}/(\S+) ", log))


async def test_replicas_split_the_shards_and_a_killed_owners_shard_moves(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path
):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    shard = _scalers(kube_namespace)
    assert len(shard) == SHARDS * PER_SHARD
    for name in shard:
        apply(cluster, deployment(name, 3), kube_namespace)
        scaler = predictive_scaler(name, name, prom.url, "app_demand", backend_name, interval="1s")
        apply(cluster, scaler, kube_namespace)
    logs = {name: tmp_path / f"{name}.log" for name in "ab"}
    processes = {
        name: controller_process(cluster, kube_namespace, name, logs[name], f"--shards={SHARDS}") for name in "ab"
    }
    try:
        holders = await eventually(
            lambda: _holders(cluster, kube_namespace),
            lambda h: len(h) == SHARDS and set(h.values()) == {"a", "b"},
            timeout=60,
            what="one shard per replica",
        )
        for name in shard:
            await eventually(
                lambda name=name: get(cluster, "predictivescaler", name, kube_namespace),
                lambda o: _generated_at(o) is not None,
                what=f"a first recommendation for {name}",
            )
        time.sleep(1)  # evaluations that started before the last handover have finished
        marks = {replica: len(logs[replica].read_text()) for replica in "ab"}
        time.sleep(3)  # a few more 1 s evaluations each
        assert _holders(cluster, kube_namespace) == holders  # stable once balanced
        # Since then each replica evaluated exactly the scalers of the shard it holds; none by both.
        owner_of = dict(holders)
        for replica in "ab":
            mine = {name for name in shard if owner_of[shard[name]] == replica}
            assert _evaluated(logs[replica].read_text()[marks[replica] :], kube_namespace) == mine, replica

        victim = owner_of[0]
        survivor = "b" if victim == "a" else "a"
        moved = {name for name in shard if shard[name] == 0}
        processes[victim].send_signal(signal.SIGKILL)
        processes[victim].wait(timeout=10)
        killed = time.monotonic()
        before_kill = _evaluated(logs[survivor].read_text()[marks[survivor] :], kube_namespace)
        assert not before_kill & moved  # the survivor had not touched the victim's shard
        kill_mark = len(logs[survivor].read_text())
        await eventually(
            lambda: _holders(cluster, kube_namespace),
            lambda h: set(h.values()) == {survivor},
            timeout=30,
            what="the survivor to take the killed owner's shard",
        )
        took_over = time.monotonic() - killed
        assert took_over < 2 * LEASE_S + 2, f"the shard moved after {took_over:.1f}s for a {LEASE_S}s lease"
        # Its statuses are held (nothing visible changes), so its log says what it evaluated.
        for name in moved:
            await eventually(
                lambda: logs[survivor].read_text()[kill_mark:],
                lambda log, name=name: name in _evaluated(log, kube_namespace),
                timeout=20,
                what=f"the survivor to evaluate {name}",
            )
        assert _evaluated(logs[survivor].read_text()[marks[survivor] :], kube_namespace) == set(shard)
        assert processes[survivor].poll() is None
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)
    # A clean exit releases the shards and deletes the replica's membership Lease.
    assert set(_holders(cluster, kube_namespace).values()) == {""}
    leases = cluster.kubectl("get", "leases", "-n", kube_namespace, "-o", "name").stdout
    assert f"lease.coordination.k8s.io/presage-scaler-member-{survivor}-" not in leases


RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


async def test_the_charts_sharded_rbac_grants_what_sharding_calls(
    cluster, kube_namespace, backend_name, prometheus_factory, tmp_path
):
    """The chart rendered with shards: 2 (under another name, beside the manifests' presage-scaler),
    its RBAC applied, and a sharded controller running with that ServiceAccount's own token: shard
    and membership Leases are created, renewed, listed and deleted without a 403."""
    name = "presage-sharded"
    helm = Helm(ensure_helm(), tmp_path / "helm")
    rendered = helm(
        "template",
        "presage",
        str(CHART),
        "--namespace=presage-system",
        f"--set=scaler.name={name}",
        "--set=scaler.leaderElection.shards=2",
        *IMAGE_FLAGS,
    ).stdout
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "presage-system"}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(namespace))  # as the install does; kept if there
    rbac = [obj for obj in yaml.safe_load_all(rendered) if obj and obj["kind"] in RBAC_KINDS]
    for obj in rbac:
        cluster.kubectl("apply", "-n", "presage-system", "-f", "-", input=json.dumps(obj))
    try:
        await _run_sharded_with_its_token(cluster, kube_namespace, backend_name, prometheus_factory, name)
    finally:
        for obj in rbac:
            cluster.kubectl("delete", "-n", "presage-system", "-f", "-", input=json.dumps(obj), check=False)


async def _run_sharded_with_its_token(cluster, kube_namespace, backend_name, prometheus_factory, name) -> None:
    token = cluster.service_account_token("presage-system", name)
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="2s"), kube_namespace)
    options = ControllerOptions(
        kubeconfig=cluster.kubeconfig_for_token(token),
        namespaces=(kube_namespace,),
        grpc_port=0,
        http_port=0,
        health_port=0,
        lease_namespace="presage-system",
        lease_name=name,
        shards=SHARDS,
        retry_period=0.5,
        probe_period=2,
    )
    async with running(options) as app:
        await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: _generated_at(o) is not None,
            what="a recommendation written by the sharded controller with the chart's RBAC",
        )
        assert app.leading and app.elector.held() == [0, 1]  # alone, it holds both shards
        leases = cluster.kubectl("get", "leases", "-n", "presage-system", "-o", "name").stdout
        assert f"lease.coordination.k8s.io/{name}-member-" in leases  # created, and listed to count
    leases = cluster.kubectl("get", "leases", "-n", "presage-system", "-o", "name").stdout
    assert f"lease.coordination.k8s.io/{name}-member-" not in leases  # deleted on a clean exit
    holders = {
        get(cluster, "lease", f"{name}-shard-{s}", "presage-system")["spec"].get("holderIdentity") for s in (0, 1)
    }
    assert holders <= {"", None}  # released

"""The Lease elector against a real API server whose etcd stops answering: it must stop leading
within its renew deadline (before the Lease expires for the other replicas), however long the
API server holds its renewal, and lead again once etcd answers."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import Fenced, KubeClient, Resource
from presage_scaler.clients.kube.leader import LeaderElector
from tests.harness.kube import KubeControlPlane, ensure_kube_binaries

pytestmark = pytest.mark.integration

RENEW_DEADLINE = 3.0
CONFIG_MAPS = Resource("", "v1", "configmaps", True, "ConfigMap")


async def until(condition, timeout: float) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"not within {timeout}s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_a_leader_steps_down_within_its_renew_deadline_when_etcd_stops(tmp_path: Path) -> None:
    # An API server of its own: its etcd is stopped here.
    with KubeControlPlane(ensure_kube_binaries(), tmp_path / "kube") as plane:
        plane.kubectl("create", "namespace", "lead")
        async with KubeClient(kube_config.load(plane.kubeconfig, None)) as client:
            elector = LeaderElector(
                client, "lead", "presage", "me", lease_duration=4.0, renew_deadline=RENEW_DEADLINE, retry_period=0.5
            )
            campaign = asyncio.create_task(elector.run())
            try:
                await until(lambda: elector.is_leader, timeout=15.0)
                etcd = plane.pids["etcd"]
                os.kill(etcd, signal.SIGSTOP)
                try:
                    # The last renewal was sent at most one retry period before etcd stopped.
                    led_on = await until(lambda: not elector.is_leader, timeout=20.0)
                finally:
                    os.kill(etcd, signal.SIGCONT)
                assert led_on <= RENEW_DEADLINE + 0.2, f"led on {led_on:.1f}s after etcd stopped"
                await until(lambda: elector.is_leader, timeout=30.0)
            finally:
                campaign.cancel()
                await asyncio.gather(campaign, return_exceptions=True)


async def test_a_leader_starved_of_cpu_stops_leading_at_its_deadline_and_sends_no_write(tmp_path: Path) -> None:
    with KubeControlPlane(ensure_kube_binaries(), tmp_path / "kube") as plane:
        plane.kubectl("create", "namespace", "lead")
        async with KubeClient(kube_config.load(plane.kubeconfig, None)) as client:
            await client.create(CONFIG_MAPS, "lead", {"metadata": {"name": "c"}, "data": {"k": "1"}})
            elector = LeaderElector(
                client, "lead", "presage", "me", lease_duration=4.0, renew_deadline=RENEW_DEADLINE, retry_period=0.5
            )
            campaign = asyncio.create_task(elector.run())
            try:
                await until(lambda: elector.is_leader, timeout=15.0)
                # The event loop held past the renew deadline: the election task cannot run to step
                # down, yet leadership has lapsed by the clock and a write is stopped before it leaves.
                time.sleep(RENEW_DEADLINE + 0.5)
                assert not elector.is_leader
                with pytest.raises(Fenced):
                    await client.merge_patch(
                        CONFIG_MAPS, "lead", "c", {"data": {"k": "2"}}, fence=lambda: elector.is_leader
                    )
                assert (await client.get(CONFIG_MAPS, "lead", "c"))["data"] == {"k": "1"}
                await until(lambda: elector.is_leader, timeout=30.0)  # it campaigns and leads again
                await client.merge_patch(
                    CONFIG_MAPS, "lead", "c", {"data": {"k": "3"}}, fence=lambda: elector.is_leader
                )
                assert (await client.get(CONFIG_MAPS, "lead", "c"))["data"] == {"k": "3"}
            finally:
                campaign.cancel()
                await asyncio.gather(campaign, return_exceptions=True)

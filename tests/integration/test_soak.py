"""Two minutes of presage with every fault of the soak once (:mod:`tests.harness.soak`): a kill -9 of
the leader, Prometheus and kube-apiserver restarts, etcd stopped for 30 s and a thousand idle
connections against the leader's webhook port, over 100 scalers on two replicas. Every figure that
must be 0 is 0; ``benchmarks/bench_soak.py`` runs the same for 30 minutes and 1,000 scalers.

``PRESAGE_SOAK_BUSY=4`` runs it with four processes spinning on the CPU beside it (a starved node:
one writer must hold there too). The suite runs it without them, since the spinners would starve
the tests that the other worker runs beside it, whose timing is not what they judge;
``tests/integration/test_leader_election.py`` starves a leader deterministically instead."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tests.harness.soak import SoakConfig, run

pytestmark = pytest.mark.integration


async def test_two_minutes_of_faults_lose_nothing(tmp_path: Path) -> None:
    busy = int(os.environ.get("PRESAGE_SOAK_BUSY", "0"))
    figures = await run(replace(SoakConfig.short(), busy=busy), tmp_path)
    print("\n".join(figures.lines()))
    assert not figures.violations(), "\n".join(figures.lines())
    # Each fault happened, and KEDA was answered throughout.
    assert [fault.name for fault in figures.faults] == [
        "kill -9 the leader",
        "restart Prometheus",
        "restart kube-apiserver",
        "SIGSTOP etcd",
        "idle connections",
    ]
    assert figures.answers.counts > figures.answers.answers // 2

"""Applying a Proven advice, on the real API server and Prometheus: by presage (``spec.advice.apply:
WhenProven``, with the controller's own ServiceAccount from ``manifests/``), and by hand (the commands
docs/shadow-to-enforce.md gives, run with the real kubectl).

The advice is put in ``status.advice`` as presage advise and the live record leave it (verdict Proven);
what happens after the apply is the controller's own scoring of the demand that comes: a surge the
applied spec did not foresee is a live miss, and the previous policy comes back. The controller runs on a
simulated clock over history backfilled into Prometheus, one evaluation a minute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler_status import AdviceApplied
from tests.harness.presage_cluster import REPO, apply, deployment, get, predictive_scaler, unique
from tests.harness.prometheus import Series
from tests.harness.simulated_controller import SimulatedScaler, simulated_controller, usable

pytestmark = pytest.mark.integration

START = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=100)
"""The simulated clock's first evaluation: far enough in the past that every moment the test evaluates
at is backfilled history."""
SURGE = START + timedelta(minutes=6)
"""When demand triples, unforeseen by every forecast made before it."""
CAPACITY = 10


def surging(at: datetime) -> float:
    return 150.0 if at >= SURGE else 50.0


def steady(at: datetime) -> float:
    """A daily-looking wave no forecast made from the hours before misses by a replica."""
    return 50.0 + 5.0 * ((at.minute // 10) % 2)


def history(demand: Callable[[datetime], float]) -> list[tuple[datetime | float, float]]:
    """One sample a minute from four hours before START up to now."""
    first = START - timedelta(hours=4)
    minutes = int((datetime.now(UTC) - first) / timedelta(minutes=1))
    return [(first + timedelta(minutes=i), demand(first + timedelta(minutes=i))) for i in range(minutes + 1)]


def advice(patch: str, generation: int, backend: str | None, verdict: str = "Proven") -> dict[str, Any]:
    """``status.advice`` as presage advise writes it and the live record turns it: the patch and the
    SeasonalNaive ``backend`` it names (None: none), for the spec at ``generation``."""
    made = {
        "verdict": verdict,
        "patch": patch,
        "observedGeneration": generation,
        "serviceLevel": "1%",
        "message": f"{verdict}: test advice",
    }
    return made if backend is None else {**made, "forecastBackend": {"name": backend, "season": "1h", "cycles": 1}}


def set_advice(cluster, name: str, namespace: str, fields: dict[str, Any]) -> None:
    body = json.dumps({"status": {"advice": fields}})
    cluster.kubectl("patch", "ps", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", body)


def events(cluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [e for e in items if e["reason"] == reason]


def managers(cluster, namespace: str) -> dict[str, str]:
    """The scaler's field managers, each with the fields of its spec it manages."""
    shown = cluster.kubectl("get", "ps", "web", "-n", namespace, "--show-managed-fields", "-o", "json").stdout
    return {
        entry["manager"]: json.dumps(entry.get("fieldsV1", {}).get("f:spec", {}))
        for entry in json.loads(shown)["metadata"]["managedFields"]
    }


def applied_of(obj: dict[str, Any]) -> AdviceApplied | None:
    raw = ((obj.get("status") or {}).get("advice") or {}).get("applied")
    return parse(AdviceApplied, raw) if raw is not None else None


def advised_scaler(
    cluster,
    namespace: str,
    prometheus_url: str,
    backend: str,
    patch: str,
    advised: str | None,
    *,
    verdict: str = "Proven",
    prove_for: str = "7d",
) -> dict[str, Any]:
    """Scaler "web" in Enforce with ``apply: WhenProven``, whose advice ``patch`` (naming the backend
    ``advised``, or none) has ``verdict``; the scaler as stored before anything is applied."""
    apply(cluster, deployment("web", 5), namespace)
    scaler = predictive_scaler(
        "web",
        "web",
        prometheus_url,
        "app_demand",
        backend,
        mode="Enforce",
        interval="1m",
        capacity={"perReplica": CAPACITY},
        advice={"apply": "WhenProven", "every": "1h", "serviceLevel": "1%", "proveFor": prove_for},
    )
    apply(cluster, scaler, namespace)
    before = get(cluster, "predictivescaler", "web", namespace)
    set_advice(cluster, "web", namespace, advice(patch, before["metadata"]["generation"], advised, verdict))
    return before


async def test_a_proven_advice_is_applied_and_rolled_back_after_a_live_miss(
    cluster, kube_namespace, backend_name, prometheus_factory
) -> None:
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, history(surging)))
    advised_backend = unique("seasonal-naive-1h-x1")
    patch = json.dumps(
        {"spec": {"policy": {"targetQuantile": "0.8", "headroom": "5%"}, "forecast": {"backendRef": advised_backend}}}
    )
    before = advised_scaler(cluster, ns, prom.url, backend_name, patch, advised_backend)
    now = [START]
    try:
        async with simulated_controller(cluster, now) as (app, controller):
            await usable(app.backends, backend_name)
            scaler_runs = SimulatedScaler(controller, cluster, "web", ns)

            # Proven: applied at the first evaluation, the advised backend created first.
            obj = await scaler_runs.evaluate()
            assert obj["spec"] == merge_patch(before["spec"], json.loads(patch)["spec"])
            generation = obj["metadata"]["generation"]
            assert generation == before["metadata"]["generation"] + 1
            applied = applied_of(obj)
            assert applied is not None
            assert (applied.patch, applied.generation, applied.time) == (patch, generation, START)
            assert (applied.samples, applied.misses, applied.rolled_back) == (0, 0, None)
            was = before["spec"]["policy"]
            assert json.loads(applied.restore) == {
                "spec": {
                    "policy": {"targetQuantile": was.get("targetQuantile"), "headroom": was.get("headroom")},
                    "forecast": {"backendRef": backend_name},
                }
            }
            owned = managers(cluster, ns)["presage-advice"]
            assert all(f'"f:{field}"' in owned for field in ("targetQuantile", "headroom", "backendRef")), owned
            created = get(cluster, "forecastbackend", advised_backend)["spec"]
            assert created == {"type": "SeasonalNaive", "seasonalNaive": {"season": "1h", "cycles": 1}}
            [event] = events(cluster, ns, "AdviceApplied")
            assert patch in event["message"] and "restores" in event["message"]
            await usable(app.backends, advised_backend)

            # Watched: every decision after the apply is counted as it is scored; none short before the
            # surge, so the apply stays.
            counts: list[tuple[int, int]] = []
            rolled_back = None
            for minute in range(1, 16):
                now[0] = START + timedelta(minutes=minute)
                obj = await scaler_runs.evaluate()
                applied = applied_of(obj)
                assert applied is not None
                counts.append((applied.samples or 0, applied.misses or 0))
                if applied.rolled_back is not None:
                    rolled_back = now[0]
                    break
                assert obj["spec"]["policy"]["targetQuantile"] == "0.8"
            assert rolled_back is not None, f"never rolled back; (samples, misses) per evaluation: {counts}"
            samples, misses = counts[-1]
            assert misses >= 1 and samples > misses
            assert [m for _, m in counts[:-1]] == [0] * (len(counts) - 1)  # rolled back at the first miss
            assert counts[-2][0] >= 1  # moments before the surge were scored, all covered
            # The first miss is a decision made within one lead time (2m) of the surge, scored once its
            # moment is observed.
            assert SURGE <= rolled_back <= SURGE + timedelta(minutes=2)

            # Rolled back: exactly the fields applied are restored, the rest of the spec as it was.
            assert obj["spec"] == before["spec"]
            assert obj["metadata"]["generation"] == generation + 1
            assert applied is not None and applied.rolled_back_time == rolled_back
            why = applied.rolled_back or ""
            assert "under-provisioned" in why and "1%" in why
            assert obj["status"]["advice"]["verdict"] == "FailedLive"
            [event] = events(cluster, ns, "AdviceRolledBack")
            assert event["type"] == "Warning" and why in event["message"]

            # Never applied again.
            now[0] += timedelta(minutes=1)
            obj = await scaler_runs.evaluate()
            assert obj["spec"] == before["spec"]
            assert len(events(cluster, ns, "AdviceApplied")) == 1
    finally:
        cluster.kubectl("delete", "forecastbackend", advised_backend, "--ignore-not-found", check=False)


async def test_a_patch_the_api_server_refuses_is_said_in_an_event(
    cluster, kube_namespace, backend_name, prometheus_factory
) -> None:
    """An advice whose patch the CRD's validation refuses leaves the spec as it is and says why, once per
    evaluation, rather than failing the evaluation."""
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, history(surging)))
    patch = json.dumps({"spec": {"policy": {"targetQuantile": "1.5"}}})
    before = advised_scaler(cluster, ns, prom.url, backend_name, patch, None)
    now = [START]
    async with simulated_controller(cluster, now) as (app, controller):
        await usable(app.backends, backend_name)
        obj = await SimulatedScaler(controller, cluster, "web", ns).evaluate()
    assert obj["spec"] == before["spec"] and applied_of(obj) is None
    assert obj["status"]["recommendedReplicas"] >= 5  # the evaluation itself succeeded
    [event] = events(cluster, ns, "AdviceNotApplied")
    assert event["type"] == "Warning" and "refused the patch" in event["message"]
    assert "is not a quantile strictly between 0 and 1" in event["message"]


async def test_an_advice_proven_on_live_demand_is_applied_as_it_is_proven(
    cluster, kube_namespace, backend_name, prometheus_factory
) -> None:
    """The whole way from Advised: the controller scores the advised spec on the demand that comes
    (``status.advice.live``), it meets the service level for ``proveFor``, and the evaluation that
    finds it Proven applies it."""
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, history(steady)))
    patch = json.dumps({"spec": {"policy": {"targetQuantile": "0.8"}}})
    before = advised_scaler(cluster, ns, prom.url, backend_name, patch, None, verdict="Advised", prove_for="1h")
    now = [START]
    async with simulated_controller(cluster, now) as (app, controller):
        await usable(app.backends, backend_name)
        runs = SimulatedScaler(controller, cluster, "web", ns)
        for minute in range(0, 70):
            now[0] = START + timedelta(minutes=minute)
            obj = await runs.evaluate()
            if applied_of(obj) is not None:
                break
            assert obj["status"]["advice"]["verdict"] == "Advised" and obj["spec"] == before["spec"]
    live = obj["status"]["advice"]["live"]
    assert obj["status"]["advice"]["verdict"] == "Proven" and live["verdict"] == "Proven"
    assert now[0] - START >= timedelta(hours=1) and live["samples"] >= 50
    assert obj["spec"]["policy"]["targetQuantile"] == "0.8"
    assert len(events(cluster, ns, "AdviceProven")) == 1 and len(events(cluster, ns, "AdviceApplied")) == 1


def documented_commands() -> list[str]:
    """The shell blocks of docs/shadow-to-enforce.md's "By hand" section, in order."""
    text = (REPO / "docs" / "shadow-to-enforce.md").read_text()
    section = text[text.index("### By hand: one command") :]
    section = section[: section.index("\n### ", 1)]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)


def test_the_documented_commands_apply_a_proven_advice_and_only_that(cluster, kube_namespace, tmp_path: Path) -> None:
    ns = kube_namespace
    backend = unique("seasonal-naive-1h-x1")
    commands = documented_commands()
    assert len(commands) == 2
    create_backend, apply_advice = (command.replace("web -n shop", f"web -n {ns}") for command in commands)
    assert all(f"web -n {ns}" in command for command in (create_backend, apply_advice))

    # kubectl on PATH is the harness's, with its kubeconfig: the commands run exactly as written.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kubectl"
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(f"'{arg}'" for arg in cluster.kubectl_argv()) + ' "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60)

    apply(cluster, predictive_scaler("web", "web", "http://127.0.0.1:9", "q", "default", mode="Enforce"), ns)
    spec = get(cluster, "predictivescaler", "web", ns)["spec"]
    generation = get(cluster, "predictivescaler", "web", ns)["metadata"]["generation"]
    patch = json.dumps({"spec": {"policy": {"targetQuantile": "0.8"}, "forecast": {"backendRef": backend}}})
    try:
        # Advised, not yet Proven: the backend is created, the spec is left alone.
        set_advice(cluster, "web", ns, advice(patch, generation, backend, verdict="Advised"))
        created = run(create_backend)
        assert created.returncode == 0, created.stderr
        assert get(cluster, "forecastbackend", backend)["spec"] == {
            "type": "SeasonalNaive",
            "seasonalNaive": {"season": "1h", "cycles": 1},
        }
        again = run(create_backend)
        assert again.returncode != 0 and "AlreadyExists" in again.stderr  # what the doc says it answers
        refused = run(apply_advice)
        assert refused.returncode != 0
        assert get(cluster, "predictivescaler", "web", ns)["spec"] == spec

        # Proven: the advised fields change, nothing else.
        set_advice(cluster, "web", ns, advice(patch, generation, backend))
        applied = run(apply_advice)
        assert applied.returncode == 0, applied.stderr
        assert get(cluster, "predictivescaler", "web", ns)["spec"] == merge_patch(spec, json.loads(patch)["spec"])
    finally:
        cluster.kubectl("delete", "forecastbackend", backend, "--ignore-not-found", check=False)

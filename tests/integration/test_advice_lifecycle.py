"""A scaler's advised life, end to end on the real API server and Prometheus, through production code
only: the test writes a spec as a user would, and nothing in ``status``.

A Shadow scaler with no ``spec.advice`` is advised by ``presage advise`` (in-process, with the advise
ServiceAccount of ``manifests/``); a controller of the test's own, on a simulated clock, scores the advice
on the demand that comes (``status.advice.live``); the user turns the scaler to Enforce with
``spec.advice.apply: WhenProven``, so presage advise advises the changed spec again; the advice is proven
and applied by the controller, and a surge of demand nobody foresaw, within the apply's watch, restores
the previous policy.

The history is backfilled into Prometheus up to the real now; the simulated clock runs hours behind it, so
every moment evaluated is history, and the surge is planned in it after the apply.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from presage_scaler.api.advice_patch import merge_patch, patch_digest
from presage_scaler.api.quantities import parse_duration
from presage_scaler.clients.kube.credentials import load
from presage_scaler.controller.advice_apply import FIELD_MANAGER as APPLY_MANAGER
from presage_scaler.tune.in_cluster_advisor import ADVICE_READY, AdviseOptions, advise_cluster
from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import apply, deployment, get, scaler_table, web_demand_scaler
from tests.harness.prometheus import Series
from tests.harness.simulated_controller import SimulatedScaler, simulated_controller, usable

pytestmark = pytest.mark.integration

DAYS = 17
STEP = timedelta(minutes=5)
"""The samples' step, the signal's resolution and the scaler's interval: one evaluation per sample."""
DAY = 288
"""Steps in a day."""
LEAD = timedelta(minutes=10)
END = datetime.now(UTC).replace(second=0, microsecond=0)
END -= timedelta(minutes=END.minute % 5)
"""The last sample: the real now, on the 5m grid the samples and the evaluations share."""
FIRST = END - (DAYS * DAY - 1) * STEP
"""The first sample."""
T0 = END - timedelta(hours=4)
"""The simulated clock's start: when the scaler is first advised and first evaluated."""
PROVING = timedelta(hours=2)
"""How long the controller scores the advice before the user asks for it to be applied."""
SURGE = T0 + PROVING + timedelta(minutes=30)
"""When demand triples, for an hour: after the apply, within its watch of one ``every`` (1h)."""
USER_PATCH: dict[str, Any] = {"mode": "Enforce", "advice": {"apply": "WhenProven", "proveFor": "1h", "every": "1h"}}
"""What the user sets: with one ``every`` of 1h at a 5m interval (12 decisions), a single miss is more
than the 1% service level allows."""


def history() -> list[tuple[datetime | float, float]]:
    """Seventeen days of one day's demand, one sample every five minutes up to :data:`END`: a daily cycle
    with a jagged profile that every day repeats exactly, and the surge. A forecaster that has seen a
    whole day foresees every moment but the surge, so the advised spec's proof and its watch are decided
    by the surge alone; the hourly SeasonalNaive the scaler starts with pays for the jags in headroom,
    so a change is advised. A function of the step, not of the clock: every run tunes the same numbers."""
    steps = DAYS * DAY
    jags = np.random.default_rng(11).normal(0, 15, DAY)
    times = [FIRST + i * STEP for i in range(steps)]
    values = [200 + 120 * math.sin(2 * math.pi * i / DAY) + jags[i % DAY] for i in range(steps)]
    surge = [3.0 if SURGE <= at < SURGE + timedelta(hours=1) else 1.0 for at in times]
    return [(at, factor * value) for at, factor, value in zip(times, surge, values, strict=True)]


@dataclass(frozen=True)
class Life:
    """What each step of the scaler's life after its first advice acts on: the API server, the scaler's
    namespace, the simulated clock ``now[0]``, the scaler as the controller evaluates it, and what presage
    advise prints."""

    cluster: KubeControlPlane
    ns: str
    now: list[datetime]
    scaler: SimulatedScaler
    capsys: pytest.CaptureFixture[str]


def events(cluster: KubeControlPlane, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [e for e in items if e["reason"] == reason]


def leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths of the fields a merge patch sets (not those it removes), or that ``fieldsV1`` names (its
    ``f:`` prefixes dropped, and its ``.`` entries, which name an object itself, left out)."""
    found: set[tuple[str, ...]] = set()
    for name, value in tree.items():
        if name == "." or value is None:
            continue
        path = (*prefix, name.removeprefix("f:"))
        found |= leaves(value, path) if isinstance(value, dict) and value else {path}
    return found


def managed_by(cluster: KubeControlPlane, namespace: str, manager: str) -> set[tuple[str, ...]]:
    """The spec fields ``manager`` manages on the scaler "web"."""
    shown = cluster.kubectl("get", "ps", "web", "-n", namespace, "--show-managed-fields", "-o", "json").stdout
    entries = json.loads(shown)["metadata"]["managedFields"]
    return set().union(*(leaves(e["fieldsV1"].get("f:spec", {})) for e in entries if e["manager"] == manager))


def advice_of(obj: dict[str, Any]) -> dict[str, Any]:
    advice: dict[str, Any] = obj["status"]["advice"]
    return advice


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def advise(cluster: KubeControlPlane, namespace: str, when: datetime, capsys: pytest.CaptureFixture[str]) -> str:
    """One run of presage advise over ``namespace`` at the simulated time ``when``, as the CronJob's pod
    runs it (with its ServiceAccount), after a day's warm-up; what it printed (it must succeed)."""
    token = cluster.service_account_token("presage-system", "presage-scaler-advise")
    options = AdviseOptions(deadline=timedelta(minutes=5), namespace=namespace, warmup=timedelta(days=1))
    config = load(cluster.kubeconfig_for_token(token))
    status = await advise_cluster(config, options, listing_only=False, clock=lambda: when)
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[-1].startswith("shard 0 of 1: 1 advised, 0 failed"), out
    return out


async def test_a_shadow_scaler_is_advised_proven_applied_and_rolled_back(
    cluster, kube_namespace, backend_name, prometheus_factory, capsys
) -> None:
    ns = kube_namespace
    prom = prometheus_factory(Series("web_demand", {"job": "web"}, history()))
    apply(cluster, deployment("web", 10), ns)
    apply(cluster, web_demand_scaler("web", prom.url, backend_name), ns)
    shadow = get(cluster, "predictivescaler", "web", ns)
    assert shadow["spec"]["mode"] == "Shadow" and "advice" not in shadow["spec"]
    now = [T0]
    created: list[str] = []
    try:
        async with simulated_controller(cluster, now) as (app, controller):
            await usable(app.backends, backend_name)
            advice = await advised_by_default(cluster, ns, shadow, capsys)
            created.extend([advice["forecastBackend"]["name"]] if advice.get("forecastBackend") else [])
            life = Life(cluster, ns, now, SimulatedScaler(controller, cluster, "web", ns), capsys)
            live = await proving(life, shadow, advice)
            user_spec = await enforced_when_proven(life, advice, live)
            applied = await proven_and_applied(life, user_spec, advice)
            if created:
                await usable(app.backends, created[0])
            await rolled_back_by_the_surge(life, user_spec, applied)
    finally:
        for name in created:
            cluster.kubectl("delete", "forecastbackend", name, "--ignore-not-found", check=False)


async def advised_by_default(
    cluster: KubeControlPlane, ns: str, shadow: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """Step 1, at T0: presage advise advises the Shadow scaler with spec.advice's defaults, from the
    history before T0 alone; the spec is left as it was."""
    out = await advise(cluster, ns, T0, capsys)
    assert f"{ns}/web Advised" in out, out
    obj = get(cluster, "predictivescaler", "web", ns)
    assert obj["spec"] == shadow["spec"] and obj["metadata"]["generation"] == shadow["metadata"]["generation"]
    advice = advice_of(obj)
    assert advice["verdict"] == "Advised", advice["message"]
    assert advice["observedGeneration"] == shadow["metadata"]["generation"] and advice["serviceLevel"] == "1%"
    assert at(advice["time"]) == T0 and at(advice["history"]["end"]) < T0  # the surge is in no advice's history
    # The default lookback (28d) reads all there is: from the step the first sample ends.
    assert at(advice["history"]["start"]) == FIRST - STEP
    assert advice["changes"] and float(advice["saving"]) > 0 and "live" not in advice, advice
    assert set(json.loads(advice["patch"])) == {"spec"}
    [ready] = events(cluster, ns, ADVICE_READY)
    assert ready["type"] == "Normal" and advice["message"] in ready["message"]
    return advice


async def proving(life: Life, shadow: dict[str, Any], advice: dict[str, Any]) -> dict[str, Any]:
    """Step 2, from T0 for :data:`PROVING`: the controller scores the advised spec beside the current one
    at each evaluation, in ``status.advice.live``; nothing is proven within spec.advice's default proveFor
    (7d), and the Shadow spec is left alone. The record as it stands at the end."""
    cluster, scaler, now = life.cluster, life.scaler, life.now
    samples: list[int] = []
    for step in range(int(PROVING / STEP) + 1):
        now[0] = T0 + step * STEP
        obj = await scaler.evaluate()
        assert obj["spec"] == shadow["spec"]
        assert advice_of(obj)["verdict"] == "Advised" and advice_of(obj)["patch"] == advice["patch"]
        live = advice_of(obj)["live"]
        assert live["verdict"] == "Proving" and at(live["since"]) == T0, live
        assert live["patchDigest"] == patch_digest(advice["patch"])
        samples.append(live["samples"])
    # A pair decided at t is scored at t + lead: every evaluation but the last two has been.
    assert samples == sorted(samples) and samples[-1] == len(samples) - int(LEAD / STEP), samples
    assert float(live["underProvisioned"]) == 0.0, live  # what Proven needs below: not one miss
    assert float(live["replicaHours"]) > 0 and float(live["currentReplicaHours"]) > 0, live
    # Cheaper than the current spec, as advised, and shown by kubectl get ps -o wide.
    assert float(live["replicaHours"]) < float(live["currentReplicaHours"]), live
    assert scaler_table(cluster, obj["metadata"]["namespace"])["web"]["Live"] == live["saving"]
    return dict(live)


async def enforced_when_proven(life: Life, advice: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """Step 3: the user sets Enforce and ``apply: WhenProven`` (:data:`USER_PATCH`). The spec changed, so
    the advice is stale and presage advise, run again now, advises it anew: the same patch (the previous
    advice is kept while it still meets the service level and costs about as little), so the live record
    it scores goes on untouched. The spec as the user left it."""
    cluster, ns, now, capsys = life.cluster, life.ns, life.now, life.capsys
    before = get(cluster, "predictivescaler", "web", ns)
    cluster.kubectl("patch", "ps", "web", "-n", ns, "--type=merge", "-p", json.dumps({"spec": USER_PATCH}))
    obj = get(cluster, "predictivescaler", "web", ns)
    assert obj["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert obj["spec"]["advice"] == {"enabled": True, "lookback": "28d", "serviceLevel": "1%", **USER_PATCH["advice"]}
    assert advice_of(obj)["observedGeneration"] != obj["metadata"]["generation"]  # stale: never applied

    out = await advise(cluster, ns, now[0], capsys)
    assert f"{ns}/web Advised" in out, out
    again = advice_of(get(cluster, "predictivescaler", "web", ns))
    assert again["observedGeneration"] == obj["metadata"]["generation"] and at(again["time"]) == now[0]
    assert at(again["history"]["end"]) < now[0] < SURGE
    assert again["verdict"] == "Advised" and again["patch"] == advice["patch"], again
    assert again["live"] == live  # kept as the controller left it: the proof goes on
    return dict(obj["spec"])


async def proven_and_applied(life: Life, user_spec: dict[str, Any], advice: dict[str, Any]) -> dict[str, Any]:
    """Step 4: the next evaluation finds the record Proven (scored for more than proveFor, none short) and
    applies the advice: the advised fields alone, under presage's own field manager, with what restores
    them recorded in ``status.advice.applied``. That record."""
    cluster, ns, scaler, now = life.cluster, life.ns, life.scaler, life.now
    generation = scaler.read()["metadata"]["generation"]
    now[0] += STEP
    obj = await scaler.evaluate()
    proven_at = now[0]
    live = advice_of(obj)["live"]
    assert advice_of(obj)["verdict"] == "Proven" and live["verdict"] == "Proven", advice_of(obj)
    assert at(live["provenTime"]) == proven_at and float(live["underProvisioned"]) == 0.0
    [proven] = events(cluster, ns, "AdviceProven")
    assert "met serviceLevel 1% on live demand" in proven["message"], proven

    changes = json.loads(advice["patch"])["spec"]
    assert obj["spec"] == merge_patch(user_spec, changes)
    assert obj["metadata"]["generation"] == generation + 1
    assert managed_by(cluster, ns, APPLY_MANAGER) == leaves(changes)
    applied = advice_of(obj)["applied"]
    assert applied["patch"] == advice["patch"] and applied["generation"] == generation + 1
    assert at(applied["time"]) == proven_at and "rolledBack" not in applied
    restore = json.loads(applied["restore"])["spec"]
    assert merge_patch(obj["spec"], restore) == user_spec
    [event] = events(cluster, ns, "AdviceApplied")
    assert event["type"] == "Normal" and advice["patch"] in event["message"] and applied["restore"] in event["message"]
    if advice.get("forecastBackend"):  # the advised SeasonalNaive, created by the apply
        backend = get(cluster, "forecastbackend", advice["forecastBackend"]["name"])["spec"]["seasonalNaive"]
        chosen = advice["forecastBackend"]
        assert parse_duration(backend["season"]) == parse_duration(chosen["season"])
        assert backend["cycles"] == chosen["cycles"]
    return dict(applied)


async def rolled_back_by_the_surge(life: Life, user_spec: dict[str, Any], applied: dict[str, Any]) -> None:
    """Step 5: the applied spec is watched for one ``every``, in which the 1% service level allows no miss
    of its 12 decisions; the surge is one, and the previous policy comes back, exactly, with the reason in
    status and in a Warning Event. It is never applied again."""
    cluster, ns, scaler, now = life.cluster, life.ns, life.scaler, life.now
    applied_spec = scaler.read()["spec"]
    counts: list[tuple[int, int]] = []
    while now[0] < SURGE + timedelta(hours=1):
        now[0] += STEP
        obj = await scaler.evaluate()
        record = advice_of(obj)["applied"]
        counts.append((record.get("samples", 0), record.get("misses", 0)))
        if "rolledBack" in record:
            break
        assert obj["spec"] == applied_spec, now[0]
    rolled_back = now[0]
    assert "rolledBack" in record, f"never rolled back; (samples, misses) per evaluation: {counts}"
    # The first miss: the decision made one lead time before the surge, scored when it comes.
    assert SURGE <= rolled_back <= SURGE + LEAD, (rolled_back, counts)
    assert [misses for _, misses in counts[:-1]] == [0] * (len(counts) - 1) and counts[-1][1] >= 1, counts

    assert obj["spec"] == user_spec
    assert obj["metadata"]["generation"] == applied["generation"] + 1
    why = record["rolledBack"]
    assert at(record["rolledBackTime"]) == rolled_back
    assert "under-provisioned" in why and "1% service level" in why, why
    assert advice_of(obj)["verdict"] == "FailedLive" and advice_of(obj)["live"]["verdict"] == "FailedLive"
    assert advice_of(obj)["message"] == f"FailedLive: applied, then rolled back: {why}"
    [event] = events(cluster, ns, "AdviceRolledBack")
    assert event["type"] == "Warning" and event["message"] == f"restored {applied['restore']}: {why}", event

    now[0] += STEP
    obj = await scaler.evaluate()
    assert obj["spec"] == user_spec and len(events(cluster, ns, "AdviceApplied")) == 1

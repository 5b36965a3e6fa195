"""The soak's judgements (tests/harness/soak_figures.py) on records made up to exercise each rule."""

from __future__ import annotations

import json

from tests.harness.soak_figures import (
    Answer,
    Fault,
    ScalerHistory,
    Write,
    audit_writes,
    judge_answers,
    longest_without_a_count,
    non_leader_writes,
    stuck_evaluations,
)


def scaler(generation: int, count: int, observed: int | None = None, buckets: dict[str, int] | None = None) -> dict:
    status: dict = {}
    if observed is not None:
        status = {"observedGeneration": observed, "recommendedReplicas": count}
    if buckets is not None:
        status["shadow"] = {"buckets": [{"start": start, "samples": n} for start, n in buckets.items()]}
    return {"metadata": {"generation": generation}, "spec": {"policy": {"minReplicas": count}}, "status": status}


def history() -> ScalerHistory:
    """Count 1 at generation 1, evaluated at t=10; count 2 at generation 2 (seen at 100), evaluated at 105."""
    h = ScalerHistory()
    h.observe(scaler(1, 1, observed=1), at=10.0)
    h.observe(scaler(2, 2, observed=1), at=100.0)
    h.observe(scaler(2, 2, observed=2), at=105.0)
    return h


def test_a_superseded_count_is_stale_only_past_the_bound() -> None:
    histories = {"s": history()}
    answers = [
        Answer(130.0, "a", "s", 1, "OK"),  # 25 s after count 2's status: within a 30 s bound
        Answer(140.0, "a", "s", 1, "OK"),  # 35 s after: stale
        Answer(140.0, "a", "s", 2, "OK"),
        Answer(141.0, "b", "s", None, "UNAVAILABLE"),
        Answer(142.0, "b", "s", 0, "OK"),
        Answer(143.0, "b", "s", 7, "OK"),  # no generation pinned 7, nor was it asked for
        Answer(144.0, "b", "s", 3, "OK"),  # asked for; its patch's answer was lost
        Answer(145.0, "b", "s", None, "INTERNAL"),
    ]
    verdict = judge_answers(answers, histories, {"s": {1, 2, 3}}, bound=30.0)
    assert [a.at for a in verdict.stale] == [140.0]
    assert [a.at for a in verdict.zeros] == [142.0]
    assert [a.value for a in verdict.made_up] == [7]
    assert (verdict.answers, verdict.counts, verdict.unavailable, verdict.other_errors) == (8, 6, 1, {"INTERNAL": 1})


def test_a_failed_evaluation_of_a_new_generation_supersedes_the_old_count_too() -> None:
    h = ScalerHistory()
    h.observe(scaler(1, 1, observed=1), at=10.0)
    h.observe(scaler(2, 2, observed=2) | {"status": {"observedGeneration": 2, "recommendedReplicas": 1}}, at=50.0)
    assert h.superseded_at(1) == 50.0  # generation 2 was evaluated (and failed): count 1 was last confirmed before


def test_shadow_buckets_that_vanish_or_lose_samples_are_lost() -> None:
    h = ScalerHistory()
    h.observe(scaler(1, 1, observed=1, buckets={"10:00": 3, "11:00": 1}), at=1.0)
    h.observe(scaler(1, 1, observed=1, buckets={"10:00": 4, "11:00": 1}), at=2.0)
    assert not h.lost
    h.observe(scaler(1, 1, observed=1, buckets={"10:00": 2}), at=3.0)
    assert h.lost == {"10:00", "11:00"}
    h.observe(scaler(1, 1, observed=1), at=4.0)  # a status without shadow says nothing of it
    assert h.lost == {"10:00", "11:00"}


def test_a_status_write_after_losing_or_outliving_the_lease_is_a_non_leaders() -> None:
    leases = [Write(0.0, "a"), Write(2.0, "a"), Write(10.0, "b"), Write(11.0, "b")]
    statuses = [
        Write(3.0, "a"),  # a renewed 1 s before: fine
        Write(7.5, "a"),  # 5.5 s after a's last renewal, lease 4 s: expired
        Write(10.5, "a"),  # b had taken it
        Write(10.5, "b"),
        Write(1.0, "c"),  # never held it
    ]
    offending = non_leader_writes(statuses, leases, lease_duration=4.0)
    assert offending == [Write(7.5, "a"), Write(10.5, "a"), Write(1.0, "c")]


def test_audit_writes_keeps_what_took_effect_in_the_namespace() -> None:
    def event(resource: str, code: int, namespace: str = "soak", **ref: str) -> str:
        return json.dumps(
            {
                "stage": "ResponseComplete",
                "user": {"username": "system:serviceaccount:soak:replica-a"},
                "objectRef": {"resource": resource, "namespace": namespace, **ref},
                "responseStatus": {"code": code},
                "requestReceivedTimestamp": "2026-01-01T00:00:01.000000Z",
                "stageTimestamp": "2026-01-01T00:00:02.500000Z",
            }
        )

    lines = [
        event("predictivescalers", 200, subresource="status", name="s"),
        event("predictivescalers", 409, subresource="status", name="s"),
        event("predictivescalers", 200, namespace="other", subresource="status", name="s"),
        event("leases", 200, name="presage-scaler"),
        event("leases", 200, name="another-lease"),
    ]
    statuses, leases = audit_writes(lines, "soak", "presage-scaler")
    assert [w.at % 10 for w in statuses] == [1.0]  # received
    assert [w.at % 10 for w in leases] == [2.5]  # completed


def test_a_spec_change_no_status_reached_before_the_cutoff_is_stuck() -> None:
    h = history()
    h.observe(scaler(3, 3, observed=2), at=200.0)
    assert stuck_evaluations({"s": h}, cutoff=150.0) == []
    assert stuck_evaluations({"s": h}, cutoff=250.0) == [("s", 3)]


def test_a_gap_is_charged_to_the_fault_before_its_first_missed_answer() -> None:
    answers = [Answer(t, "a", "s", 1, "OK") for t in (0.0, 5.0, 10.0, 40.0, 45.0)]
    faults = [Fault("kill", 8.0, 12.0), Fault("etcd", 12.0, 42.0)]
    longest = longest_without_a_count(answers, faults, start=0.0, end=50.0, poll=5.0)
    # The gap from 10 to 40 missed its first answer at 15, after etcd stopped.
    assert longest == {"kill at 8s": (5.0, "s"), "etcd at 12s": (30.0, "s")}
    # Once etcd ran again (42) only the poll's own spacing is left; the kill's gaps ended before it did.
    after = longest_without_a_count(answers, faults, start=0.0, end=50.0, poll=5.0, past_its_end=True)
    assert after == {"kill at 8s": (0.0, ""), "etcd at 12s": (5.0, "s")}
    late = [*answers, Answer(80.0, "a", "s", 1, "OK")]
    after = longest_without_a_count(late, faults, start=0.0, end=90.0, poll=5.0, past_its_end=True)
    assert after["etcd at 12s"] == (35.0, "s")  # 45 to 80, all of it after etcd ran again


def test_a_gap_through_a_later_fault_is_judged_once_that_one_ended_too() -> None:
    answers = [Answer(t, "a", "s", 1, "OK") for t in (0.0, 5.0, 10.0, 60.0)]
    faults = [Fault("restart", 8.0, 12.0), Fault("etcd", 20.0, 50.0)]
    # The gap from 10 to 60 began with the restart and ran through etcd's stop: 10 s once both ended.
    after = longest_without_a_count(answers, faults, start=0.0, end=60.0, poll=5.0, past_its_end=True)
    assert after == {"restart at 8s": (10.0, "s"), "etcd at 20s": (0.0, "")}


def test_a_gap_past_the_bound_after_a_fault_is_a_violation() -> None:
    from tests.harness.soak import Figures, SoakConfig

    config = SoakConfig.short()

    def figures(gap: float) -> Figures:
        return Figures(
            config=config,
            answers=judge_answers([Answer(20.0, "replica-a", "s-1", 1, "OK")], {"s-1": history()}, {}, config.bound),
            status_writes=10,
            lease_writes=10,
            non_leader=[],
            buckets_seen=1,
            samples_seen=1,
            buckets_lost=0,
            generations=1,
            stuck=[],
            slowest_evaluation=1.0,
            memory={},
            probes={"health port /healthz": (1, 0), "webhook port /healthz": (1, 0)},
            without={"restart kube-apiserver at 32s": (gap + 10.0, "s-1")},
            after={"restart kube-apiserver at 32s": (gap, "s-1")},
            faults=[],
            attacks=[],
        )

    assert figures(config.bound).violations() == []
    assert figures(config.bound + 0.1).violations() == [
        f"no count for {config.bound + 0.1:.1f}s after restart kube-apiserver at 32s had ended (s-1), over the "
        f"{config.bound:g}s bound"
    ]

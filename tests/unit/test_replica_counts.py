"""Which targets' counts a watch may answer, and what the watch keeps of each object."""

from __future__ import annotations

from presage_scaler.api.predictive_scaler import ScaleTargetRef
from presage_scaler.controller.replica_counts import WatchedReplicas, replica_count


def _ref(api_version: str, kind: str) -> ScaleTargetRef:
    return ScaleTargetRef.model_validate({"apiVersion": api_version, "kind": kind, "name": "web"})


def test_the_watch_keeps_only_the_name_version_and_count() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42", "uid": "u", "labels": {"a": "b"}},
        "spec": {"replicas": 4, "template": {"spec": {"containers": [{"name": "a"}]}}},
        "status": {"replicas": 3},
    }
    assert replica_count(deployment) == {
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42"},
        "replicas": 4,  # spec.replicas, what the scale subresource reports; not status
    }
    assert replica_count({"metadata": {"name": "web"}, "spec": "nonsense"})["replicas"] is None


async def test_other_kinds_are_never_watched_and_apps_kinds_only_answer_once_listed() -> None:
    watched = WatchedReplicas(client=None)  # type: ignore[arg-type]  # nothing is started or called
    for api_version, kind in (
        ("argoproj.io/v1alpha1", "Rollout"),
        ("agones.dev/v1", "Fleet"),
        ("apps/v1beta1", "Deployment"),
    ):
        assert watched.replicas("shop", _ref(api_version, kind)) is None
    assert watched._to_start.empty()
    assert watched.replicas("shop", _ref("apps/v1", "Deployment")) is None  # asked for: its watch is queued
    assert watched.replicas("shop", _ref("apps/v1", "Deployment")) is None  # not listed yet: the caller GETs
    assert watched._to_start.qsize() == 1
    assert watched.watching() == []

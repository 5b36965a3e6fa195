"""The controller's copy of each PredictiveScaler keeps what it reads, not server-side apply's field
owners or kubectl's last-applied annotation."""

from __future__ import annotations

import copy

import pytest

from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.controller.predictive_scaler_objects import ScalerEntry, SpecCache, compact, status_of
from presage_scaler.engine.evaluator import EvaluationError


def scaler(version: str) -> dict:
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u-1",
            "resourceVersion": version,
            "generation": 3,
            "labels": {"team": "shop"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}" * 500},
            "managedFields": [{"manager": "presage", "fieldsV1": {"f:status": {}}}] * 20,
        },
        "spec": {"interval": "1m"},
        "status": {"recommendedReplicas": 4},
    }


def test_compact_drops_unread_metadata_and_leaves_the_object_alone():
    obj = scaler("7")
    before = copy.deepcopy(obj)
    kept = compact(obj)
    assert obj == before
    assert kept["metadata"] == {
        "name": "web",
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 3,
        "labels": {"team": "shop"},
    }
    assert kept["spec"] == obj["spec"] and kept["status"] == obj["status"] and kept["kind"] == "PredictiveScaler"
    assert compact(kept) is kept  # nothing to drop: no copy


def test_an_entry_keeps_compact_objects_and_never_an_older_write():
    entry = ScalerEntry(obj=scaler("7"), generation=3)
    assert "managedFields" not in entry.obj["metadata"]
    entry.keep(scaler("9"))
    assert entry.obj["metadata"]["resourceVersion"] == "9" and "annotations" not in entry.obj["metadata"]
    entry.accept(scaler("8"))  # a write's answer older than what the watch already brought
    assert entry.obj["metadata"]["resourceVersion"] == "9"
    entry.accept(scaler("10"))
    assert entry.obj["metadata"]["resourceVersion"] == "10" and "managedFields" not in entry.obj["metadata"]


def test_the_status_is_kept_apart_and_reads_as_status_of_reads_it():
    obj = scaler("7")
    obj["status"] = {
        "recommendedReplicas": 4,
        "observedGeneration": 3,
        "lastForecast": {
            "generatedAt": "2026-12-01T10:00:00Z",
            "point": 12.5,
            "leadTimeSeconds": 120,
            "backend": "default",
        },
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Recommended",
                "message": "m",
                "lastTransitionTime": "2026-12-01T10:00:00Z",
            }
        ],
    }
    entry = ScalerEntry(obj=obj, generation=3)
    assert "status" not in entry.obj
    assert entry.status() == status_of(obj) and entry.status().recommended_replicas == 4


def test_an_unreadable_status_reads_as_empty():
    obj = scaler("7")
    obj["status"] = {"recommendedReplicas": "many"}
    assert ScalerEntry(obj=obj, generation=3).status() == status_of(obj) == PredictiveScalerStatus()
    obj["status"] = ["not", "an", "object"]
    assert ScalerEntry(obj=obj, generation=3).status() == PredictiveScalerStatus()


def test_the_spec_is_kept_apart_and_parsed_once_per_generation():
    obj = scaler("7")
    obj["spec"] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "sum(rate(x[1m]))"}},
        "capacity": {"perReplica": "20"},
        "policy": {"maxReplicas": 30},
        "interval": "2m",
    }
    entry = ScalerEntry(obj=obj, generation=3)
    assert "spec" not in entry.obj and entry.spec_json() == obj["spec"]
    specs = SpecCache()
    parsed = entry.spec(specs)
    assert parsed == specs.get(obj) and parsed.interval.total_seconds() == 120
    edited = copy.deepcopy(obj)
    edited["spec"]["interval"] = "5m"
    entry.keep(edited)
    assert entry.spec(specs) is parsed  # the same generation: not parsed again
    edited["metadata"]["generation"] = 4
    entry.keep(edited)
    assert entry.spec(specs).interval.total_seconds() == 300
    broken = copy.deepcopy(edited)
    broken["metadata"]["generation"] = 5
    broken["spec"]["policy"] = {"maxReplicas": "lots"}
    entry.keep(broken)
    with pytest.raises(EvaluationError, match="maxReplicas"):
        entry.spec(specs)

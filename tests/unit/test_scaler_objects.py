"""The controller's copy of each PredictiveScaler keeps what it reads, not server-side apply's field
owners or kubectl's last-applied annotation."""

from __future__ import annotations

import copy

from presage_scaler.controller.scaler_objects import ScalerEntry, compact


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

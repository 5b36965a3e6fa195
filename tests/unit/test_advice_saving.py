"""``status.adviceSaving``: the SAVING column, with its unit, and ``Applied`` once the spec holds the advice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from presage_scaler.api.predictive_scaler_status import AdviceStatus
from presage_scaler.controller.advice_saving import APPLIED, advice_saving, holds_patch

SPEC: dict[str, Any] = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}, "history": "336h"},
    "capacity": {"perReplica": 50},
    "policy": {"maxReplicas": 10, "targetQuantile": "0.9", "headroom": "10%"},
}
PATCH = {"spec": {"policy": {"targetQuantile": "0.95", "headroom": "5%"}, "signal": {"history": "168h"}}}


def advice(verdict: str, saving: float = 5.1072, patch: dict[str, Any] | str | None = PATCH) -> AdviceStatus:
    text = patch if isinstance(patch, str) or patch is None else json.dumps(patch)
    return AdviceStatus.model_validate({"verdict": verdict, "saving": saving, "patch": text})


def patched(spec: dict[str, Any], **policy: Any) -> dict[str, Any]:
    return {**spec, "policy": {**spec["policy"], **policy}, "signal": {**spec["signal"], "history": "168h"}}


def test_the_saving_has_its_unit_until_the_advice_is_applied() -> None:
    assert advice_saving(advice("Advised"), SPEC) == "5.1%"
    applied = patched(SPEC, targetQuantile="0.95", headroom="5%")
    assert advice_saving(advice("Advised"), applied) == APPLIED


def test_a_proven_advice_shows_its_saving_and_applied_as_an_advised_one_and_a_failed_one_nothing() -> None:
    applied = patched(SPEC, targetQuantile="0.95", headroom="5%")
    assert (advice_saving(advice("Proven"), SPEC), advice_saving(advice("Proven"), applied)) == ("5.1%", APPLIED)
    assert advice_saving(advice("FailedLive"), SPEC) is None
    assert advice_saving(advice("FailedLive"), applied) is None  # rolled back or not: nothing to apply


def test_applied_is_read_by_meaning_not_by_spelling() -> None:
    # The same values written otherwise, and a spec with more (defaults the API server filled in).
    spelled = patched(SPEC, targetQuantile="0.950", headroom="5%", minReplicas=1)
    assert holds_patch(spelled, json.dumps(PATCH))
    # One of the advised changes missing: not applied.
    half = patched(SPEC, targetQuantile="0.95")
    assert not holds_patch(half, json.dumps(PATCH))


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        (None, None),
        (advice("Keep", saving=0.0, patch=None), "0%"),
        (advice("NothingMet", saving=0.0, patch=None), None),
        (advice("NotEnoughHistory", saving=0.0, patch=None), None),
        (AdviceStatus.model_validate({"error": "Prometheus unreachable"}), None),  # never advised yet
    ],
)
def test_what_advises_nothing_shows_nothing_to_save(status: AdviceStatus | None, shown: str | None) -> None:
    assert advice_saving(status, SPEC) == shown


@pytest.mark.parametrize("patch", ["{not json", json.dumps(["spec"]), json.dumps({"spec": "policy"})])
def test_a_patch_that_cannot_be_read_is_not_applied(patch: str) -> None:
    assert advice_saving(advice("Advised", patch=patch), SPEC) == "5.1%"


@pytest.mark.parametrize("spec", [None, "spec", {"policy": {"maxReplicas": "ten"}}])
def test_a_spec_that_cannot_be_read_is_not_applied(spec: Any) -> None:
    assert advice_saving(advice("Advised"), spec) == "5.1%"

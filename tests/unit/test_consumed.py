"""The ``Consumed`` condition: which ScaledObjects name a PredictiveScaler, whether one composes its
triggers with a scalingModifiers formula, and what that says."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from presage_scaler.api.conditions import Condition
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.reasons import Reason
from presage_scaler.controller.condition_updates import (
    CONSUMED,
    ConditionUpdate,
    consumed_condition,
    consumed_warning_due,
    hides_known,
)
from presage_scaler.controller.keda_scaledobjects import ConsumerIndex, scalers_named, scaling_formula

NS = "shop"
PRESAGE = {"type": "external", "metadata": {"scalerAddress": "presage:9090", "predictiveScaler": "web"}}
CPU = {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}


def scaled_object(name: str, *triggers: Any, namespace: str = NS) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"triggers": list(triggers)}}


def external(scaler: Any, type_: Any = "external") -> dict[str, Any]:
    return {"type": type_, "metadata": {"predictiveScaler": scaler}}


@pytest.mark.parametrize(
    ("triggers", "named"),
    [
        ([PRESAGE], {"web"}),
        ([CPU, PRESAGE], {"web"}),
        ([external("web", "external-push")], {"web"}),  # StreamIsActive is served too
        ([external(" web ")], {"web"}),  # stripped, as the gRPC server reads it
        ([PRESAGE, external("api")], {"web", "api"}),
        ([external("web", "prometheus")], set()),  # predictiveScaler means nothing to other scalers
        ([CPU], set()),
        ([external("")], set()),
        ([external(7)], set()),
        ([external(["web"])], set()),
        ([external("web", ["external"])], set()),  # an unhashable type must not raise
        ([{"type": "external", "metadata": ["predictiveScaler"]}], set()),
        (["external", None, 3], set()),
    ],
)
def test_scalers_named(triggers: list[Any], named: set[str]) -> None:
    assert scalers_named(scaled_object("so", *triggers)) == named


@pytest.mark.parametrize("spec", [None, [], "triggers", {"triggers": "external"}, {"triggers": None}])
def test_scalers_named_of_any_shape_is_empty(spec: Any) -> None:
    assert scalers_named({"metadata": {"name": "so", "namespace": NS}, "spec": spec}) == frozenset()


async def test_the_index_follows_upserts_and_deletes() -> None:
    index = ConsumerIndex()
    await index.on_event("upsert", scaled_object("b", PRESAGE))
    await index.on_event("upsert", scaled_object("a", CPU, PRESAGE))
    await index.on_event("upsert", scaled_object("c", external("api")))
    await index.on_event("upsert", scaled_object("a", PRESAGE, namespace="elsewhere"))
    assert index.consumers(NS, "web") == ["a", "b"]
    assert index.consumers(NS, "api") == ["c"]
    assert index.consumers("elsewhere", "web") == ["a"]  # namespaces never mix

    await index.on_event("upsert", scaled_object("b", CPU))  # b loses presage's trigger
    await index.on_event("upsert", scaled_object("c", external("web")))  # c now names web instead
    assert index.consumers(NS, "web") == ["a", "c"]
    assert index.consumers(NS, "api") == []

    await index.on_event("delete", scaled_object("a", PRESAGE))
    await index.on_event("delete", scaled_object("c", external("web")))
    assert index.consumers(NS, "web") == []
    assert index.consumers("elsewhere", "web") == ["a"]


class FakeConsumers:
    """What the ScaledObject cache answers: a list, or None while it is not synced; and the formulas."""

    def __init__(self, found: Sequence[str] | None, formulas: Mapping[str, str] | None = None) -> None:
        self.found = found
        self._formulas = formulas or {}

    def consumers(self, namespace: str, scaler: str) -> Sequence[str] | None:
        assert (namespace, scaler) == (NS, "web")
        return self.found

    def formulas(self, namespace: str, scaler: str) -> Mapping[str, str]:
        assert (namespace, scaler) == (NS, "web")
        return self._formulas


def spec(mode: str = "Enforce", target: dict[str, str] | None = None) -> PredictiveScalerSpec:
    raw = {
        "mode": mode,
        "scaleTargetRef": target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}},
        "capacity": {"perReplica": 10},
        "policy": {"maxReplicas": 100},
    }
    return parse(PredictiveScalerSpec, raw)


FLEET = {"apiVersion": "agones.dev/v1", "kind": "Fleet", "name": "arena"}


def test_a_scaledobject_that_names_the_scaler_consumes_it() -> None:
    consumed = consumed_condition(spec(), NS, "web", FakeConsumers(["web-so"]))
    assert (consumed.type, consumed.status, consumed.reason) == (CONSUMED, "True", Reason.SCALED_OBJECT_FOUND)
    assert "ScaledObject web-so in namespace shop names this scaler" in consumed.message
    several = consumed_condition(spec(), NS, "web", FakeConsumers(["a", "b"]))
    assert "ScaledObjects a, b in namespace shop name this scaler" in several.message


@pytest.mark.parametrize(("mode", "says"), [("Enforce", "nothing applies"), ("Shadow", "Shadow needs none")])
def test_no_scaledobject(mode: str, says: str) -> None:
    consumed = consumed_condition(spec(mode), NS, "web", FakeConsumers([]))
    assert (consumed.status, consumed.reason) == ("False", Reason.NO_SCALED_OBJECT)
    assert says in consumed.message
    assert "presage scaledobject web -n shop | kubectl apply -f -" in consumed.message


def test_an_unsynced_cache_is_unknown() -> None:
    consumed = consumed_condition(spec(), NS, "web", FakeConsumers(None))
    assert (consumed.status, consumed.reason) == ("Unknown", Reason.SCALED_OBJECTS_UNKNOWN)
    assert "scaledobjects.keda.sh" in consumed.message


@pytest.mark.parametrize("found", [None, []])
def test_a_fleet_is_unknown_whatever_the_cache_says(found: list[str] | None) -> None:
    consumed = consumed_condition(spec(target=FLEET), NS, "web", FakeConsumers(found))
    assert (consumed.status, consumed.reason) == ("Unknown", Reason.AGONES_WEBHOOK)
    assert "kubectl get fleetautoscalers -n shop" in consumed.message


def test_a_fleet_named_by_a_scaledobject_is_consumed() -> None:
    assert consumed_condition(spec(target=FLEET), NS, "web", FakeConsumers(["so"])).status == "True"


def written(status: str, reason: str, generation: int) -> Condition:
    return Condition(
        type=CONSUMED,
        status=status,
        reason=reason,
        message="",
        observed_generation=generation,
        last_transition_time=datetime(2026, 1, 1, tzinfo=UTC),
    )


UNCONSUMED = ConditionUpdate(CONSUMED, "False", Reason.NO_SCALED_OBJECT, "no ScaledObject")


@pytest.mark.parametrize(
    ("was", "consumed", "due"),
    [
        (None, UNCONSUMED, True),  # first evaluation
        (written("Unknown", Reason.SCALED_OBJECTS_UNKNOWN, 3), UNCONSUMED, True),  # the cache just synced
        (written("True", Reason.SCALED_OBJECT_FOUND, 3), UNCONSUMED, True),  # its ScaledObject was deleted
        (written("False", Reason.NO_SCALED_OBJECT, 2), UNCONSUMED, True),  # the spec changed (to Enforce, say)
        (written("False", Reason.NO_SCALED_OBJECT, 3), UNCONSUMED, False),  # already said at this generation
        (None, ConditionUpdate(CONSUMED, "True", Reason.SCALED_OBJECT_FOUND, ""), False),
        (None, ConditionUpdate(CONSUMED, "Unknown", Reason.SCALED_OBJECTS_UNKNOWN, ""), False),
    ],
)
def test_unconsumed_warning_due(was: Condition | None, consumed: ConditionUpdate, due: bool) -> None:
    assert consumed_warning_due("Enforce", was, consumed, 3) is due
    assert consumed_warning_due("Shadow", was, consumed, 3) is False  # Shadow needs no ScaledObject


MODIFIED = ConditionUpdate(CONSUMED, "True", Reason.SCALING_MODIFIERS, "formula")


@pytest.mark.parametrize(
    ("mode", "was", "due"),
    [
        ("Shadow", None, True),
        ("Shadow", written("True", Reason.SCALED_OBJECT_FOUND, 3), True),  # a formula was just added
        ("Shadow", written("True", Reason.SCALING_MODIFIERS, 2), True),  # the spec changed (to Shadow, say)
        ("Shadow", written("True", Reason.SCALING_MODIFIERS, 3), False),  # already said at this generation
        ("Enforce", None, False),  # the formula is the user's choice there: the condition says what it does
    ],
)
def test_scaling_modifiers_warning_due_in_shadow(mode: str, was: Condition | None, due: bool) -> None:
    assert consumed_warning_due(mode, was, MODIFIED, 3) is due


# --- advanced.scalingModifiers ------------------------------------------------------------------


def with_formula(obj: dict[str, Any], formula: Any) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], "advanced": {"scalingModifiers": {"target": "1", "formula": formula}}}}


@pytest.mark.parametrize(
    ("obj", "formula"),
    [
        (with_formula(scaled_object("so", PRESAGE), "(presage + cpu) / 2"), "(presage + cpu) / 2"),
        (with_formula(scaled_object("so", PRESAGE), ""), None),
        (with_formula(scaled_object("so", PRESAGE), 3), None),
        (scaled_object("so", PRESAGE), None),
        ({"spec": {"advanced": "scalingModifiers"}}, None),
        ({"spec": {"advanced": {"scalingModifiers": ["formula"]}}}, None),
        ({"spec": None}, None),
    ],
)
def test_scaling_formula_of_any_shape(obj: dict[str, Any], formula: str | None) -> None:
    assert scaling_formula(obj) == formula


async def test_the_index_keeps_the_formulas_of_the_scaledobjects_naming_a_scaler() -> None:
    index = ConsumerIndex()
    await index.on_event("add", with_formula(scaled_object("avg", PRESAGE, CPU), "(web + cpu) / 2"))
    await index.on_event("add", scaled_object("plain", PRESAGE))
    await index.on_event("add", with_formula(scaled_object("other", CPU), "cpu * 2"))  # names no scaler
    assert index.consumers(NS, "web") == ["avg", "plain"]
    assert index.formulas(NS, "web") == {"avg": "(web + cpu) / 2"}
    await index.on_event("update", scaled_object("avg", PRESAGE, CPU))  # the formula removed
    assert index.formulas(NS, "web") == {}
    await index.on_event("update", with_formula(scaled_object("plain", PRESAGE), "web * 2"))
    assert index.formulas(NS, "web") == {"plain": "web * 2"}
    await index.on_event("delete", scaled_object("plain", PRESAGE))
    assert index.formulas(NS, "web") == {} and index.consumers(NS, "web") == ["avg"]


@pytest.mark.parametrize(
    ("mode", "says"),
    [("Shadow", "an average or a sum moves the count"), ("Enforce", "not the recommendation as presage made it")],
)
def test_a_formula_between_presage_and_the_count_is_said(mode: str, says: str) -> None:
    consumers = FakeConsumers(["avg", "plain"], {"avg": "(web + cpu) / 2"})
    consumed = consumed_condition(spec(mode), NS, "web", consumers)
    assert (consumed.status, consumed.reason) == ("True", Reason.SCALING_MODIFIERS)
    assert consumed.message.startswith("KEDA ScaledObjects avg, plain in namespace shop name this scaler")
    assert "advanced.scalingModifiers.formula (avg: '(web + cpu) / 2')" in consumed.message
    assert says in consumed.message
    assert "Drop presage's trigger from a ScaledObject with a formula" in consumed.message


UNKNOWN = ConditionUpdate(CONSUMED, "Unknown", Reason.SCALED_OBJECTS_UNKNOWN, "")


@pytest.mark.parametrize(
    ("consumed", "was", "hides"),
    [
        (UNKNOWN, written("False", Reason.NO_SCALED_OBJECT, 3), True),
        (UNKNOWN, written("True", Reason.SCALED_OBJECT_FOUND, 3), True),
        (UNKNOWN, written("False", Reason.NO_SCALED_OBJECT, 2), False),  # known for another spec: no longer
        (UNKNOWN, written("Unknown", Reason.SCALED_OBJECTS_UNKNOWN, 3), False),
        (UNKNOWN, None, False),
        (UNCONSUMED, written("True", Reason.SCALED_OBJECT_FOUND, 3), False),
        (
            ConditionUpdate(CONSUMED, "Unknown", Reason.AGONES_WEBHOOK, ""),
            written("True", Reason.SCALED_OBJECT_FOUND, 3),
            False,
        ),
    ],
)
def test_hides_known(consumed: ConditionUpdate, was: Condition | None, hides: bool) -> None:
    assert hides_known(consumed, was, 3) is hides

"""KEDA ScaledObjects from the cluster: trigger counts for the gRPC server's Shadow-mode answer, and
which ScaledObjects name each PredictiveScaler, for its ``Consumed`` condition.

Shadow mode must never change the replica count: alone in a ScaledObject presage reports the
current count, beside other triggers it reports 0. Which case applies is read from a watched cache
of KEDA ScaledObjects (``keda.sh/v1alpha1``), so answering KEDA costs no API call. The same watch
keeps an index from PredictiveScaler to the ScaledObjects whose external trigger names it, so that
the controller learns whether anything applies a recommendation without scanning every ScaledObject
at every evaluation, and which of those compose their triggers with ``advanced.scalingModifiers``:
KEDA then scales to the formula's result, which can pass a Shadow answer of 0 on to the count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from presage_scaler.api.serving_contract import SCALER_KEY
from presage_scaler.clients.kube.client import JSON, KubeClient, Resource
from presage_scaler.clients.kube.informer import Informer, Key, key_of

SCALED_OBJECTS = Resource("keda.sh", "v1alpha1", "scaledobjects", True, "ScaledObject")
EXTERNAL_TRIGGERS = frozenset({"external", "external-push"})
"""KEDA's trigger types that call an external scaler such as presage (both are served)."""


def scalers_named(obj: JSON) -> frozenset[str]:
    """The PredictiveScalers a ScaledObject's external triggers name (``metadata.predictiveScaler``).

    A ScaledObject is any tenant's content: whatever its shape, this returns, never raises.
    """
    spec = obj.get("spec")
    triggers = spec.get("triggers") if isinstance(spec, dict) else None
    names = set()
    for trigger in triggers if isinstance(triggers, list) else ():
        if not isinstance(trigger, dict) or not isinstance(trigger.get("type"), str):
            continue
        metadata = trigger.get("metadata")
        name = metadata.get(SCALER_KEY) if isinstance(metadata, dict) else None
        if trigger["type"] in EXTERNAL_TRIGGERS and isinstance(name, str) and name.strip():
            names.add(name.strip())  # as the gRPC server reads it
    return frozenset(names)


def scaling_formula(obj: JSON) -> str | None:
    """A ScaledObject's ``advanced.scalingModifiers.formula``; None when it sets none. Never raises,
    whatever the ScaledObject's shape."""
    node: object = obj
    for name in ("spec", "advanced", "scalingModifiers", "formula"):
        node = node.get(name) if isinstance(node, dict) else None
    return node if isinstance(node, str) and node.strip() else None


class ConsumerIndex:
    """PredictiveScaler (namespace, name) -> the ScaledObjects in that namespace naming it, and the
    formulas of those that set one, kept current from informer events."""

    def __init__(self) -> None:
        self._named: dict[Key, frozenset[str]] = {}  # ScaledObject -> the scalers it names
        self._consumers: dict[Key, set[str]] = {}  # scaler -> the ScaledObjects naming it
        self._formulas: dict[Key, str] = {}  # ScaledObject naming a scaler -> its scalingModifiers formula

    async def on_event(self, kind: str, obj: JSON) -> None:
        namespace, scaled_object = key = key_of(obj)
        self._formulas.pop(key, None)
        for scaler in self._named.pop(key, frozenset()):
            consumers = self._consumers[(namespace, scaler)]
            consumers.discard(scaled_object)
            if not consumers:
                del self._consumers[(namespace, scaler)]
        if kind == "delete":
            return
        names = scalers_named(obj)
        if names:
            self._named[key] = names
            formula = scaling_formula(obj)
            if formula is not None:
                self._formulas[key] = formula
        for scaler in names:
            self._consumers.setdefault((namespace, scaler), set()).add(scaled_object)

    def consumers(self, namespace: str, scaler: str) -> list[str]:
        return sorted(self._consumers.get((namespace, scaler), ()))

    def formulas(self, namespace: str, scaler: str) -> dict[str, str]:
        """The ScaledObjects naming ``scaler`` that set a scalingModifiers formula, and each formula."""
        found = ((so, self._formulas.get((namespace, so))) for so in self._consumers.get((namespace, scaler), ()))
        return {so: formula for so, formula in found if formula is not None}


class KubeScaledObjectTriggers:
    """A :class:`~presage_scaler.serving.keda.ScaledObjectTriggers` and a
    :class:`~presage_scaler.controller.condition_updates.ScaledObjectConsumers` backed by one informer."""

    def __init__(self, client: KubeClient, namespaces: Sequence[str] | None = None) -> None:
        self.index = ConsumerIndex()
        self.informer = Informer(client, SCALED_OBJECTS, self.index.on_event, namespaces)

    async def run(self) -> None:
        await self.informer.run()

    async def trigger_count(self, namespace: str, scaled_object_name: str) -> int:
        if not self.informer.synced:
            raise LookupError(
                "ScaledObjects are not cached yet "
                "(is KEDA installed, and may presage list/watch scaledobjects.keda.sh?)"
            )
        obj = self.informer.get(namespace, scaled_object_name)
        if obj is None:
            raise LookupError(f"ScaledObject {namespace}/{scaled_object_name} does not exist")
        triggers = (obj.get("spec") or {}).get("triggers") or []
        return len(triggers)

    def consumers(self, namespace: str, scaler: str) -> list[str] | None:
        """Unknown (``None``) until every watched namespace is listed, and while KEDA's CRD is not served."""
        return self.index.consumers(namespace, scaler) if self.informer.synced else None

    def formulas(self, namespace: str, scaler: str) -> Mapping[str, str]:
        return self.index.formulas(namespace, scaler)

"""The KEDA ScaledObject that hands a PredictiveScaler's workload to presage: pure rendering, no I/O.

``presage scaledobject`` (:mod:`presage_scaler.cli.scaledobject`) reads the PredictiveScaler from the
cluster, or from a file without one (GitOps; :mod:`presage_scaler.scaledobject.sources`), and prints
what :func:`render` returns. Field
names follow KEDA's ScaledObject specification
(https://keda.sh/docs/latest/reference/scaledobject-spec/; the tests apply it under the CRDs of KEDA
v2.21.0 and run it through a real KEDA and HPA) and its external scaler (``enableTLS`` in the
trigger metadata; ``caCert``, ``tlsClientCert``, ``tlsClientKey`` as authentication parameters,
which KEDA reads only from a TriggerAuthentication). Every value that is a decision rather than a
copy carries its reason into the YAML as a comment, so the reader of a manifest in git sees why.

One value depends on the cluster: the HPA's ``tolerance``, which only Kubernetes' HPAConfigurableTolerance
and a KEDA whose CRD has the field accept. It is set where the cluster is known to take it
(:class:`ClusterSupport`, which the command reads) or where the user asks, and left out otherwise: a
ScaledObject without it is right on every Kubernetes presage supports, one with it is refused by an
older KEDA's CRD and silently loses it on an older Kubernetes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import yaml
from pydantic import ValidationError

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.serving_contract import SCALER_KEY
from presage_scaler.engine.adjustments import planned_adjustments
from presage_scaler.engine.leadtime import HorizonError

JSON = dict[str, Any]

DEFAULT_SCALER_ADDRESS = "presage-scaler.presage-system.svc:9090"
DEFAULT_FAILURE_THRESHOLD = 3
POLLING_MIN_SECONDS = 5
POLLING_MAX_SECONDS = 30  # KEDA's own default
HPA_POLICY_PERIOD_SECONDS = 15  # the HPA's default sync period: one period per HPA decision
FALLBACK_BEHAVIOR = "currentReplicasIfHigher"
# cert-manager's and kubernetes.io/tls Secrets' key names.
TLS_SECRET_KEYS = {"caCert": "ca.crt", "tlsClientCert": "tls.crt", "tlsClientKey": "tls.key"}
_DEFAULT_TARGET = ("apps/v1", "Deployment")
TOLERANCE_BY_DEFAULT = (1, 35)
"""The Kubernetes version from which HPAConfigurableTolerance is on by default (beta); it is alpha, off
by default, in 1.33 and 1.34, and absent before."""
TOLERANCE_GATED = (1, 33)
TOLERANCE_NEEDS = (
    "Kubernetes' HPAConfigurableTolerance (on by default from 1.35; a feature gate, off by default, in 1.33 "
    "and 1.34) and KEDA 2.18 or later, whose ScaledObject CRD has the field"
)
TOLERANCE_WHY = (
    "by default the HPA ignores a change within 10% of the current count (10 -> 11 replicas is a 10% change "
    "and is dropped)"
)


class ScaledObjectError(Exception):
    """This PredictiveScaler cannot be served through a ScaledObject as asked; the message says why."""


@dataclass(frozen=True)
class ScaledObjectOptions:
    """What ``presage scaledobject`` lets the user choose; the defaults are the recommended setup."""

    scaler_address: str = DEFAULT_SCALER_ADDRESS
    name: str | None = None  # the ScaledObject's name; default: the PredictiveScaler's
    polling_interval: int | None = None  # seconds; default: derived from the scaler's interval
    hpa_tolerance: bool | None = None  # None: set where the cluster is known to take it (ClusterSupport)
    fallback_failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    fallback_replicas: int | None = None  # default: max(minReplicas, 1)
    tls: bool = False
    tls_secret: str | None = None  # Secret with ca.crt (and tls.crt/tls.key with tls_client_cert)
    tls_client_cert: bool = False


@dataclass(frozen=True)
class Rendered:
    """The manifests, the reasons to print above them, and warnings for the person running the command."""

    documents: list[JSON]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unchecked: str | None = None
    """What only the cluster could have told (rendered from a file): said, never a failure."""


@dataclass(frozen=True)
class ClusterSupport:
    """What the cluster the ScaledObject is for takes, as far as the command could read it; None: not known
    (rendered from a file, or not readable)."""

    kubernetes: tuple[int, int] | None = None
    """The API server's (major, minor) version (``GET /version``)."""
    keda_tolerance: bool | None = None
    """Whether KEDA's ScaledObject CRD has ``behavior.scaleUp.tolerance``."""

    @property
    def version(self) -> str:
        return "an unknown version" if self.kubernetes is None else "{}.{}".format(*self.kubernetes)


def kubernetes_version(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """(major, minor) from a ``GET /version`` body; None when it says neither plainly (a provider's
    ``"minor": "35+"`` is 35)."""
    try:
        major, minor = (int(str(body[key]).rstrip("+")) for key in ("major", "minor"))
    except (KeyError, TypeError, ValueError):
        return None
    return major, minor


def crd_has_tolerance(crd: Mapping[str, Any]) -> bool:
    """Whether a ScaledObject CustomResourceDefinition's served versions declare
    ``spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.tolerance``; False for any other shape."""
    path = ("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleUp", "tolerance")
    versions = (crd.get("spec") or {}).get("versions") if isinstance(crd.get("spec"), dict) else None
    for version in versions if isinstance(versions, list) else ():
        node: Any = ((version or {}).get("schema") or {}).get("openAPIV3Schema") if isinstance(version, dict) else None
        for name in path:
            properties = node.get("properties") if isinstance(node, dict) else None
            node = properties.get(name) if isinstance(properties, dict) else None
        if node is not None and version.get("served", True):
            return True
    return False


@dataclass(frozen=True)
class Tolerance:
    """Whether the ScaledObject sets ``tolerance: 0``, the comment saying why, and what to tell the person
    running the command (None: nothing)."""

    included: bool
    note: str
    warning: str | None = None


def tolerance(option: bool | None, support: ClusterSupport) -> Tolerance:
    """``--hpa-tolerance`` / ``--no-hpa-tolerance`` as asked; without either, set only where ``support``
    shows the cluster takes it (Kubernetes 1.35 or later and KEDA's CRD with the field)."""
    if option is False:
        return Tolerance(
            False,
            "no tolerance (--no-hpa-tolerance): the HPA's default 10% tolerance applies, so a recommendation "
            "within 10% of the current count (e.g. 10 -> 11 replicas) is ignored.",
        )
    if option:
        refused = _tolerance_refused(support)
        return Tolerance(
            True,
            f"tolerance 0 (--hpa-tolerance): {TOLERANCE_WHY}. It needs {TOLERANCE_NEEDS}; an API server without "
            "the feature drops the field and the 10% applies.",
            None if refused is None else f"--hpa-tolerance: {refused}.",
        )
    version = support.kubernetes
    if version is not None and version >= TOLERANCE_BY_DEFAULT and support.keda_tolerance:
        return Tolerance(
            True,
            f"tolerance 0: {TOLERANCE_WHY}. Set because this cluster takes it: Kubernetes {support.version} "
            "enables HPAConfigurableTolerance by default and KEDA's ScaledObject CRD has the field "
            "(--no-hpa-tolerance leaves it out).",
        )
    if version is None:
        reason = "the cluster's Kubernetes and KEDA versions are not known"
    elif version < TOLERANCE_BY_DEFAULT:
        reason = f"Kubernetes {support.version} does not enable HPAConfigurableTolerance by default"
    elif support.keda_tolerance is None:
        reason = "KEDA's ScaledObject CRD could not be read to check that it has the field"
    else:
        reason = "KEDA's ScaledObject CRD has no tolerance field (KEDA before 2.18)"
    return Tolerance(
        False,
        f"no tolerance: {reason}, so it is left out, which every Kubernetes and KEDA take; the HPA's default "
        "10% tolerance applies, so a recommendation within 10% of the current count (e.g. 10 -> 11 "
        f"replicas) is ignored. --hpa-tolerance sets tolerance 0; it needs {TOLERANCE_NEEDS}.",
        f"HPA tolerance left out ({reason}): the HPA ignores a change within 10% of the current count "
        "(10 -> 11 replicas); pass --hpa-tolerance where the cluster takes it (Kubernetes 1.35 or later, or "
        "1.33 and 1.34 with the HPAConfigurableTolerance feature gate, and KEDA 2.18 or later), or "
        "--no-hpa-tolerance to say you mean the 10%.",
    )


def _tolerance_refused(support: ClusterSupport) -> str | None:
    """Why the cluster, as far as known, would not apply a ``tolerance`` it is given; None when it would
    (or nothing says otherwise)."""
    if support.keda_tolerance is False:
        return (
            "KEDA's ScaledObject CRD in this cluster has no tolerance field (KEDA before 2.18): kubectl apply "
            "refuses the ScaledObject as an unknown field"
        )
    version = support.kubernetes
    if version is not None and version < TOLERANCE_GATED:
        return (
            f"Kubernetes {support.version} has no configurable HPA tolerance: the API server drops the field "
            "and the HPA keeps its 10%"
        )
    if version is not None and version < TOLERANCE_BY_DEFAULT:
        return (
            f"Kubernetes {support.version} takes tolerance only with the HPAConfigurableTolerance feature gate "
            "on (off by default before 1.35); without it the field is dropped and the HPA keeps its 10%"
        )
    return None


def polling_interval_seconds(interval: timedelta) -> int:
    """Half the evaluation interval, within [5 s, 30 s].

    presage's value changes once per ``interval``, so polling faster buys nothing; half of it bounds
    how long KEDA's own loop (activation from and to zero) lags a new recommendation. The cap is
    KEDA's default, which also keeps error counting towards ``fallback`` prompt; the floor spares
    KEDA pointless work on very short intervals. From one replica up the HPA polls on its own
    15 s sync period anyway.
    """
    half = int(interval.total_seconds() // 2)
    return max(POLLING_MIN_SECONDS, min(POLLING_MAX_SECONDS, half))


def hpa_behavior(max_replicas: int, tolerance: bool) -> JSON:
    """HPA behaviour that applies presage's count as is: no stabilization window, any step allowed.

    presage already has its own scale-down window, uncertainty guard and rate limits; the HPA's
    defaults (a 300 s scale-down window, scale-up capped at +100 % or +4 pods per 15 s) would delay
    or truncate a decision presage has made. ``Pods: maxReplicas`` per period reaches any count up to
    the maximum in one step; ``Percent: 100`` lets a scale-down go all the way to the minimum.
    """
    scale_up: JSON = {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Pods", "value": max_replicas, "periodSeconds": HPA_POLICY_PERIOD_SECONDS}],
    }
    scale_down: JSON = {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": HPA_POLICY_PERIOD_SECONDS}],
    }
    if tolerance:
        # The value is a replica count, not a noisy utilisation: any difference from the current
        # count is a decision. The default 10 % would drop e.g. 10 -> 11.
        scale_up["tolerance"] = 0
        scale_down["tolerance"] = 0
    return {"scaleUp": scale_up, "scaleDown": scale_down}


def fallback_replicas(min_replicas: int, override: int | None) -> int:
    """The floor KEDA holds while presage errors (with ``currentReplicasIfHigher``).

    The behaviour, not this number, is what guarantees no scale-down on failure: KEDA uses
    ``max(current replicas, replicas)``. The default floor, ``max(minReplicas, 1)``, makes the
    fallback "hold the current count", the same thing the HPA does when a metric is missing and
    presage does when an evaluation fails. In Enforce mode the current count *is* presage's last
    recommendation, applied, so it is a live version of ``status.recommendedReplicas`` rather than
    a snapshot taken when this manifest was generated. ``maxReplicas`` would be safe for one
    workload but, since every ScaledObject served by presage fails at the same moment when presage
    is down, it would scale all of them to their maximum at once. At least 1, because KEDA skips
    its fallback for ``replicas: 0`` and, with ``minReplicaCount: 0``, may then scale to zero on an
    error.
    """
    return override if override is not None else max(min_replicas, 1)


def validate_options(options: ScaledObjectOptions) -> None:
    """Refuse contradictory or malformed options before anything is read from the cluster."""
    host, sep, port = options.scaler_address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ScaledObjectError(
            f"scaler address {options.scaler_address!r} must be host:port, e.g. {DEFAULT_SCALER_ADDRESS}"
        )
    if options.tls_client_cert and not options.tls_secret:
        raise ScaledObjectError("a client certificate (mutual TLS) needs the Secret that holds it: pass --tls-secret")
    if options.fallback_failure_threshold < 0:
        raise ScaledObjectError("the fallback failure threshold must be 0 or more")
    if options.polling_interval is not None and options.polling_interval < 1:
        raise ScaledObjectError("the polling interval must be at least 1 second")


def _scale_target_ref(api_version: str, kind: str, name: str) -> JSON:
    """KEDA defaults to apps/v1 Deployment; anything else must be spelled out."""
    if (api_version, kind) == _DEFAULT_TARGET:
        return {"name": name}
    return {"name": name, "apiVersion": api_version, "kind": kind}


def _status(scaler: Mapping[str, Any]) -> PredictiveScalerStatus:
    try:
        return PredictiveScalerStatus.model_validate(scaler.get("status") or {})
    except ValidationError:
        return PredictiveScalerStatus()


def _trigger_auth_name(scaled_object: str) -> str:
    return f"{scaled_object}-presage-tls"


def _tls_parameters(options: ScaledObjectOptions) -> list[str]:
    """The authentication parameters the TriggerAuthentication passes from ``tls_secret``."""
    return ["caCert"] + (["tlsClientCert", "tlsClientKey"] if options.tls_client_cert else [])


def _trigger_authentication(name: str, namespace: str, options: ScaledObjectOptions) -> JSON:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "secretTargetRef": [
                {"parameter": p, "name": options.tls_secret, "key": TLS_SECRET_KEYS[p]}
                for p in _tls_parameters(options)
            ]
        },
    }


def render(
    scaler: Mapping[str, Any],
    options: ScaledObjectOptions | None = None,
    *,
    from_cluster: bool = True,
    support: ClusterSupport | None = None,
) -> Rendered:
    """The ScaledObject (and, with ``tls_secret``, its TriggerAuthentication) for one PredictiveScaler.

    ``scaler`` is the PredictiveScaler as the API server returns it or, with ``from_cluster`` False,
    as a file holds it: the same manifests, but its status (whether presage has evaluated it, the
    workload's current count) is not the cluster's now, so the warnings that read it give way to
    :attr:`Rendered.unchecked`. ``support``: what the cluster takes, as far as known (default: nothing
    known), which decides the HPA tolerance unless the options do. Raises :class:`ScaledObjectError`
    when it cannot be served through KEDA (an Agones Fleet, an invalid spec) or the options contradict
    each other.
    """
    options = options or ScaledObjectOptions()
    validate_options(options)
    meta = scaler.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    where = f"PredictiveScaler {namespace}/{name}"
    try:
        spec = parse(PredictiveScalerSpec, scaler.get("spec"))
    except SpecError as exc:
        raise ScaledObjectError(f"{where} has an invalid spec: {exc}") from None
    target = spec.scale_target_ref
    if target.is_agones_fleet:
        raise ScaledObjectError(
            f"{where} scales an Agones Fleet ({target.api_version} {target.name}): a Fleet is scaled by its "
            "FleetAutoscaler, which calls presage's webhook, never by KEDA. See docs/agones.md."
        )
    policy = spec.policy
    status = _status(scaler) if from_cluster else None
    floor = fallback_replicas(policy.min_replicas, options.fallback_replicas)
    if not 1 <= floor <= policy.max_replicas:
        raise ScaledObjectError(
            f"fallback replicas {floor} must be between 1 and the scaler's maxReplicas ({policy.max_replicas})"
        )
    polling = options.polling_interval or polling_interval_seconds(spec.interval)
    so_name = options.name or name
    hpa_tolerance = tolerance(options.hpa_tolerance, support or ClusterSupport())

    metadata = {"scalerAddress": options.scaler_address, SCALER_KEY: name}
    tls = options.tls or options.tls_secret is not None
    if tls:
        metadata["enableTLS"] = "true"  # trigger metadata is a map of strings
    trigger: JSON = {"type": "external", "metricType": "AverageValue", "metadata": metadata}
    documents: list[JSON] = []
    if options.tls_secret is not None:
        auth = _trigger_auth_name(so_name)
        trigger["authenticationRef"] = {"name": auth}
        documents.append(_trigger_authentication(auth, namespace, options))

    scaled_object: JSON = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": so_name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": _scale_target_ref(target.api_version, target.kind, target.name),
            "pollingInterval": polling,
            "minReplicaCount": policy.min_replicas,
            "maxReplicaCount": policy.max_replicas,
            "fallback": {
                "failureThreshold": options.fallback_failure_threshold,
                "replicas": floor,
                "behavior": FALLBACK_BEHAVIOR,
            },
            "advanced": {
                "horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(policy.max_replicas, hpa_tolerance.included)}
            },
            "triggers": [trigger],
        },
    }
    documents.insert(0, scaled_object)
    return Rendered(
        documents=documents,
        notes=_notes(where, spec, polling, options, floor, tls, hpa_tolerance),
        warnings=_warnings(where, spec, status, options, floor, hpa_tolerance),
        unchecked=None if from_cluster else _unchecked(where, spec),
    )


def _notes(
    where: str,
    spec: PredictiveScalerSpec,
    polling: int,
    options: ScaledObjectOptions,
    floor: int,
    tls: bool,
    hpa_tolerance: Tolerance,
) -> list[str]:
    interval = int(spec.interval.total_seconds())
    notes = [
        f"KEDA ScaledObject for {where}, generated by `presage scaledobject`. presage reads the scaler's mode "
        f"({spec.mode} now) on every call, so switching between Shadow and Enforce needs no new ScaledObject.",
        "metricType AverageValue with presage's target of 1: the HPA's desired count is exactly the value "
        "presage returns (Enforce: the recommended replicas; Shadow: the current count when presage is the "
        "only trigger, 0 beside other triggers).",
        (
            f"pollingInterval {polling}s: set with --polling-interval."
            if options.polling_interval
            else f"pollingInterval {polling}s: half the scaler's {interval}s interval, within "
            f"{POLLING_MIN_SECONDS}-{POLLING_MAX_SECONDS}s; presage's value changes once per interval."
        ),
        "HPA behavior: no stabilization window and policies that allow any step, because presage already "
        "applies its own scale-down window and rate limits.",
    ]
    notes.append(hpa_tolerance.note)
    notes.append(_fallback_note(spec.policy.min_replicas, options, floor))
    if tls:
        how = (
            f"the TriggerAuthentication passes Secret {options.tls_secret}'s "
            + ", ".join(f"{TLS_SECRET_KEYS[p]} as {p}" for p in _tls_parameters(options))
            if options.tls_secret
            else "KEDA verifies presage's certificate against the CAs it already trusts"
        )
        notes.append(
            f"enableTLS: KEDA dials presage over TLS; {how}. presage's certificate must be valid for the host "
            "in scalerAddress."
        )
    return notes


def _fallback_note(min_replicas: int, options: ScaledObjectOptions, floor: int) -> str:
    if options.fallback_replicas is not None:
        floor_effect = " (floor set with --fallback-replicas)."
    elif min_replicas >= floor:
        floor_effect = (
            "; the default floor max(minReplicas, 1) adds no scale-up either, and --fallback-replicas raises it."
        )
    else:
        floor_effect = (
            "; with minReplicas 0 the floor is still 1 (KEDA skips a fallback of 0), so a workload at 0 replicas "
            "is raised to 1 while presage fails, in Shadow mode too."
        )
    return (
        f"fallback: once more than {options.fallback_failure_threshold} consecutive requests to presage have "
        f"failed (presage answered an error: a stale recommendation, an unknown scaler), KEDA holds "
        f"max(current replicas, {floor}): never a scale-down on failure"
        + floor_effect
        + " When presage is unreachable KEDA does not reach its fallback and the HPA keeps the count as it is."
        " It needs a KEDA with fallback.behavior; an older KEDA applies fallback.replicas as a fixed count."
    )


def _unchecked(where: str, spec: PredictiveScalerSpec) -> str:
    policy = spec.policy
    shadow = (
        f", nor whether its workload runs outside minReplicas-maxReplicas [{policy.min_replicas}, "
        f"{policy.max_replicas}] (the HPA clamps it to that range, even in Shadow mode)"
        if spec.mode == "Shadow"
        else ""
    )
    return (
        f"{where} was read from a file, not from the cluster: not checked whether presage has evaluated it yet "
        f"(KEDA gets NOT_FOUND until it has){shadow}."
    )


def _warnings(
    where: str,
    spec: PredictiveScalerSpec,
    status: PredictiveScalerStatus | None,
    options: ScaledObjectOptions,
    floor: int,
    hpa_tolerance: Tolerance,
) -> list[str]:
    """What the person applying the ScaledObject should know; with ``status`` None (not read from the
    cluster) only what the spec alone tells: among it, what the scaler is sized with other than its spec
    states or probably means, as its SpecAdjusted condition will say."""
    policy = spec.policy
    warnings = [f"{where}: {adjusted}" for adjusted in _adjustments(spec)]
    if status is not None and status.recommended_replicas is None:
        warnings.append(
            f"{where} has no recommendation yet: KEDA gets NOT_FOUND (counted towards the fallback) until "
            "presage has evaluated it once."
        )
    current = None if status is None else status.current_replicas
    if spec.mode == "Shadow" and current is not None and not policy.min_replicas <= current <= policy.max_replicas:
        clamped = min(max(current, policy.min_replicas), policy.max_replicas)
        warnings.append(
            f"{where} is in Shadow mode but its target runs {current} replicas, outside minReplicas-maxReplicas "
            f"[{policy.min_replicas}, {policy.max_replicas}]: the HPA clamps to that range, so applying this "
            f"ScaledObject moves it to {clamped} even in Shadow mode."
        )
    if floor > policy.min_replicas and (spec.mode == "Shadow" or options.fallback_replicas is None):
        warnings.append(
            f"{where}: the fallback floor of {floor} replicas raises a workload running fewer to {floor} whenever "
            f"presage answers with errors, in {spec.mode} mode too"
            + (
                " (minReplicas is 0 and KEDA skips a fallback of 0 replicas)."
                if options.fallback_replicas is None
                else "."
            )
        )
    if hpa_tolerance.warning is not None:
        warnings.append(hpa_tolerance.warning)
    return warnings


def _adjustments(spec: PredictiveScalerSpec) -> list[str]:
    """:func:`~presage_scaler.engine.adjustments.planned_adjustments`, each as its reason and message."""
    try:
        return [f"SpecAdjusted {a.reason}: {a.message}" for a in planned_adjustments(spec)]
    except HorizonError as exc:
        return [f"no evaluation can succeed ({exc.reason}): {exc}"]


def to_yaml(rendered: Rendered, width: int = 100) -> str:
    """Multi-document YAML with the notes as a comment block on top."""
    header = []
    for note in rendered.notes:
        lines = textwrap.wrap(note, width=width - 4)
        header.extend(["# - " + lines[0], *("#   " + line for line in lines[1:])])
    body = "---\n".join(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False) for doc in rendered.documents)
    return "\n".join(header) + "\n" + body

"""Where ``presage scaledobject`` reads the PredictiveScaler from: the cluster, with what decides the
HPA tolerance there (the API server's version and KEDA's ScaledObject CRD), or a YAML file or stdin
without one (a GitOps pipeline: Argo CD, Flux)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from presage_scaler.api import manifests
from presage_scaler.api.kinds import API_VERSION, PREDICTIVE_SCALER
from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import JSON, ApiError, KubeClient
from presage_scaler.clients.kube.scaler_lookup import CommandError, read_scaler
from presage_scaler.scaledobject.render import ClusterSupport, crd_has_tolerance, kubernetes_version

SCALED_OBJECT_CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/scaledobjects.keda.sh"


async def from_cluster(
    kubeconfig: Path | None, context: str | None, namespace: str | None, name: str
) -> tuple[JSON, ClusterSupport]:
    """The PredictiveScaler ``namespace/name`` (``namespace`` None: the kubeconfig context's), and what
    the cluster takes as far as it can be read (an answer it cannot read leaves that part unknown: the
    tolerance is then left out, and the command says so)."""
    try:
        config = kube_config.load(kubeconfig, context)
    except kube_config.KubeConfigError as exc:
        raise CommandError(str(exc)) from None
    async with KubeClient(config, user_agent="presage-scaledobject") as client:
        scaler = await read_scaler(client, namespace or config.namespace, name)
        return scaler, await cluster_support(client)


async def cluster_support(client: KubeClient) -> ClusterSupport:
    """The API server's version and whether KEDA's ScaledObject CRD has the HPA tolerance field."""
    try:
        version = kubernetes_version(await client.request("GET", "/version"))
    except ApiError:
        version = None
    try:
        keda_tolerance: bool | None = crd_has_tolerance(await client.request("GET", SCALED_OBJECT_CRD))
    except ApiError:
        keda_tolerance = None
    return ClusterSupport(version, keda_tolerance)


def _read(filename: str) -> tuple[str, str]:
    """The text of ``filename`` (``-``: stdin) and how messages name it."""
    if filename == "-":
        return sys.stdin.read(), "stdin"
    try:
        return Path(filename).read_text(), filename
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {filename}: {exc}") from None


def from_file(filename: str, name: str | None, namespace: str | None) -> dict[str, Any]:
    """The PredictiveScaler in a YAML file as the API server would hold it: ``name`` picks one when the
    file holds several; ``namespace`` replaces its metadata.namespace, and is needed without one."""
    text, source = _read(filename)
    try:
        scalers = manifests.of_kind(manifests.documents(text, source), PREDICTIVE_SCALER.name)
    except manifests.ManifestError as exc:
        raise CommandError(str(exc)) from None
    names = [_metadata(scaler).get("name") for scaler in scalers]
    if name is not None:
        scalers = [scaler for scaler, found in zip(scalers, names, strict=True) if found == name]
    if not scalers:
        wanted = "" if name is None else f" named {name!r}"
        held = f" (it holds {', '.join(map(repr, names))})" if names else ""
        raise CommandError(f"{source} holds no PredictiveScaler{wanted}{held}")
    if len(scalers) > 1:
        raise CommandError(
            f"{source} holds {len(scalers)} PredictiveScalers ({', '.join(map(repr, names))}): name the one to render"
        )
    scaler = scalers[0]
    metadata = _metadata(scaler)
    if scaler.get("apiVersion") != API_VERSION:
        raise CommandError(
            f"{source}: the PredictiveScaler's apiVersion is {scaler.get('apiVersion')!r}, not {API_VERSION}"
        )
    if not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise CommandError(f"{source}: the PredictiveScaler has no metadata.name")
    namespace = namespace or metadata.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise CommandError(
            f"{source}: PredictiveScaler {metadata['name']!r} has no metadata.namespace: pass -n NAMESPACE"
        )
    return {**scaler, "metadata": {**metadata, "namespace": namespace}}


def _metadata(scaler: dict[str, Any]) -> dict[str, Any]:
    metadata = scaler.get("metadata")
    return metadata if isinstance(metadata, dict) else {}

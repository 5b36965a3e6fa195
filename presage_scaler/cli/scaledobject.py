"""``presage scaledobject``: read a PredictiveScaler from the cluster, or from a file or stdin without
one (a GitOps pipeline: Argo CD, Flux), and print its KEDA ScaledObject. From the cluster it also reads
what decides the HPA tolerance: the API server's version and KEDA's ScaledObject CRD."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from presage_scaler.api import manifests
from presage_scaler.api.types import API_VERSION, PREDICTIVE_SCALER
from presage_scaler.cli.scaledobject import (
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_SCALER_ADDRESS,
    ClusterSupport,
    ScaledObjectError,
    ScaledObjectOptions,
    crd_has_tolerance,
    kubernetes_version,
    render,
    to_yaml,
    validate_options,
)
from presage_scaler.clients.kube import config as kube_config
from presage_scaler.clients.kube.client import JSON, ApiError, KubeClient
from presage_scaler.clients.kube.scaler_lookup import CommandError, read_scaler

PROG = "presage scaledobject"
SCALED_OBJECT_CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/scaledobjects.keda.sh"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", nargs="?", help="the PredictiveScaler's name (with -f: which one, when the file holds several)"
    )
    parser.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="render the PredictiveScaler in this YAML file (- for stdin) without a cluster, e.g. in a GitOps "
        "pipeline; its status is not read, so nothing that needs it is checked",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        help="its namespace (default: the kubeconfig context's namespace; with -f, the file's metadata.namespace)",
    )
    kube_config.add_kubeconfig_arguments(parser)
    parser.add_argument(
        "--scaler-address",
        default=DEFAULT_SCALER_ADDRESS,
        help=f"host:port of presage's gRPC service as KEDA reaches it (default: {DEFAULT_SCALER_ADDRESS})",
    )
    parser.add_argument("--scaled-object-name", help="name of the ScaledObject (default: the PredictiveScaler's)")
    parser.add_argument(
        "--polling-interval", type=int, help="KEDA pollingInterval, seconds (default: half the scaler's interval, 5-30)"
    )
    parser.add_argument(
        "--hpa-tolerance",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="set the HPA's tolerance to 0 so that small changes (10 -> 11 replicas) are applied; needs Kubernetes "
        "HPAConfigurableTolerance (on by default from 1.35, a feature gate in 1.33 and 1.34) and KEDA 2.18 or "
        "later (default: set where the cluster's /version and KEDA's CRD show both; left out with -f)",
    )
    parser.add_argument(
        "--fallback-failure-threshold",
        type=int,
        default=DEFAULT_FAILURE_THRESHOLD,
        help="KEDA falls back once more than this many consecutive requests to presage fail "
        f"(default: {DEFAULT_FAILURE_THRESHOLD})",
    )
    parser.add_argument(
        "--fallback-replicas",
        type=int,
        help="least replicas to hold while presage fails; KEDA keeps the current count if higher "
        "(default: max(minReplicas, 1), i.e. hold the current count)",
    )
    parser.add_argument("--tls", action="store_true", help="KEDA dials presage over TLS (enableTLS)")
    parser.add_argument(
        "--tls-secret",
        help="Secret in the namespace whose ca.crt signed presage's certificate; also prints a "
        "TriggerAuthentication passing it as caCert (implies --tls)",
    )
    parser.add_argument(
        "--tls-client-cert",
        action="store_true",
        help="mutual TLS: KEDA also presents tls.crt/tls.key from --tls-secret (tlsClientCert/tlsClientKey)",
    )


def options_from(args: argparse.Namespace) -> ScaledObjectOptions:
    return ScaledObjectOptions(
        scaler_address=args.scaler_address,
        name=args.scaled_object_name,
        polling_interval=args.polling_interval,
        hpa_tolerance=args.hpa_tolerance,
        fallback_failure_threshold=args.fallback_failure_threshold,
        fallback_replicas=args.fallback_replicas,
        tls=args.tls,
        tls_secret=args.tls_secret,
        tls_client_cert=args.tls_client_cert,
    )


async def _fetch(args: argparse.Namespace) -> tuple[JSON, ClusterSupport]:
    """The PredictiveScaler, and what the cluster takes as far as it can be read (an answer it cannot
    read leaves that part unknown: the tolerance is then left out, and the command says so)."""
    try:
        config = kube_config.load(args.kubeconfig, args.context)
    except kube_config.KubeConfigError as exc:
        raise CommandError(str(exc)) from None
    async with KubeClient(config, user_agent="presage-scaledobject") as client:
        scaler = await read_scaler(client, args.namespace or config.namespace, args.name)
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


def run(args: argparse.Namespace) -> int:
    """Print the manifests on stdout, warnings and notes on stderr; exit 1 with a message on any failure."""
    if args.name is None and args.filename is None:
        print(f"{PROG}: error: give the PredictiveScaler's name (read from the cluster) or -f FILE", file=sys.stderr)
        return 2
    try:
        options = options_from(args)
        validate_options(options)
        if args.filename is None:
            scaler, support = asyncio.run(_fetch(args))
            rendered = render(scaler, options, support=support)
        else:
            rendered = render(from_file(args.filename, args.name, args.namespace), options, from_cluster=False)
    except (CommandError, ScaledObjectError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    for warning in rendered.warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    if rendered.unchecked is not None:
        print(f"{PROG}: note: {rendered.unchecked}", file=sys.stderr)
    sys.stdout.write(to_yaml(rendered))
    return 0

"""``presage scaledobject``: read a PredictiveScaler from the cluster, print its KEDA ScaledObject."""

from __future__ import annotations

import argparse
import asyncio
import sys

from presage_scaler.cli.scaledobject import (
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_SCALER_ADDRESS,
    ScaledObjectError,
    ScaledObjectOptions,
    render,
    to_yaml,
    validate_options,
)
from presage_scaler.clients.kube import config as kube_config
from presage_scaler.clients.kube.client import JSON, KubeClient
from presage_scaler.controller.scaler_lookup import CommandError, read_scaler

PROG = "presage scaledobject"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the PredictiveScaler's name")
    parser.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's namespace)")
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
        default=True,
        help="set the HPA's tolerance to 0 so that small changes (10 -> 11 replicas) are applied; needs Kubernetes "
        "HPAConfigurableTolerance (on by default from 1.34) and a KEDA that knows the field (default: on)",
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


async def _fetch(args: argparse.Namespace) -> JSON:
    try:
        config = kube_config.load(args.kubeconfig, args.context)
    except kube_config.KubeConfigError as exc:
        raise CommandError(str(exc)) from None
    async with KubeClient(config, user_agent="presage-scaledobject") as client:
        return await read_scaler(client, args.namespace or config.namespace, args.name)


def run(args: argparse.Namespace) -> int:
    """Print the manifests on stdout and warnings on stderr; exit 1 with a message on any failure."""
    try:
        options = options_from(args)
        validate_options(options)
        rendered = render(asyncio.run(_fetch(args)), options)
    except (CommandError, ScaledObjectError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    for warning in rendered.warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    sys.stdout.write(to_yaml(rendered))
    return 0

"""``presage scaledobject``: its flags, and printing the KEDA ScaledObject of a PredictiveScaler read
from the cluster or, without one, from a file or stdin (:mod:`presage_scaler.scaledobject`)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from presage_scaler.cli.kube_flags import add_kubeconfig_arguments
from presage_scaler.clients.kube.scaler_lookup import CommandError
from presage_scaler.scaledobject.render import (
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_SCALER_ADDRESS,
    ScaledObjectError,
    ScaledObjectOptions,
    render,
    to_yaml,
    validate_options,
)
from presage_scaler.scaledobject.sources import from_cluster, from_file

NAME = "scaledobject"
HELP = "print the KEDA ScaledObject that hands a PredictiveScaler's workload to presage"
DESCRIPTION = """\
Print the KEDA ScaledObject that hands a PredictiveScaler's workload to presage: an external trigger
on presage's gRPC service (--scaler-address), with KEDA's fallback to hold the replicas while presage
cannot answer. It reads the PredictiveScaler from the cluster (NAME, -n), or with -f from a YAML
file or stdin without a cluster (a GitOps pipeline). Apply what it prints with kubectl apply -f -.
"""
PROG = "presage scaledobject"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scaledobject subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
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
    add_kubeconfig_arguments(parser)
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
    """The rendering options the flags give."""
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


def run(args: argparse.Namespace) -> int:
    """Print the manifests on stdout, warnings and notes on stderr; exit 1 with a message on any failure."""
    if args.name is None and args.filename is None:
        print(f"{PROG}: error: give the PredictiveScaler's name (read from the cluster) or -f FILE", file=sys.stderr)
        return 2
    try:
        options = options_from(args)
        validate_options(options)
        if args.filename is None:
            scaler, support = asyncio.run(from_cluster(args.kubeconfig, args.context, args.namespace, args.name))
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

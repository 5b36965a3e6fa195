"""``presage run``: its flags, read into :class:`~presage_scaler.controller.app.ControllerOptions`, and the
scaler process run until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import timedelta
from pathlib import Path

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.cli.kube_flags import add_kubeconfig_arguments
from presage_scaler.controller.app import ControllerOptions, run_until_signalled
from presage_scaler.serving.grpc_server import TLSConfig
from presage_scaler.serving.http_server import TLSFiles

NAME = "run"
HELP = "run the scaler: watch PredictiveScalers, evaluate them, serve KEDA (gRPC) and Agones (HTTP)"
DESCRIPTION = """\
Run the scaler process: watch PredictiveScalers and ForecastBackends, evaluate each scaler every
spec.interval, and write its status, conditions and Events. It serves KEDA's external scaler over
gRPC (--grpc-port, 9090), the Agones FleetAutoscaler webhook and /metrics over HTTP (--http-port,
8080), and /healthz, /readyz and /metrics for probes on --health-port (8081).

It needs the Kubernetes API, through --kubeconfig, else $KUBECONFIG, else the service account of
the pod it runs in (the Helm chart grants what it needs), else ~/.kube/config. Replicas elect a leader
with a Lease (in --lease-namespace; default: the pod's namespace, or the kubeconfig context's), and
only the leader evaluates; --no-leader-elect runs one replica without a Lease. It runs until SIGTERM
or SIGINT (exit 0). See docs/controller.md.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_kubeconfig_arguments(parser)
    parser.add_argument(
        "--namespaces", default="", help="comma-separated namespaces to watch (default: all namespaces)"
    )
    parser.add_argument("--grpc-port", type=int, default=9090, help="KEDA external scaler port (default: 9090)")
    parser.add_argument("--grpc-tls-cert", type=Path, help="PEM server certificate for gRPC TLS")
    parser.add_argument("--grpc-tls-key", type=Path, help="PEM private key for gRPC TLS")
    parser.add_argument("--grpc-client-ca", type=Path, help="PEM CA that client certificates must chain to (mTLS)")
    parser.add_argument(
        "--http-port", type=int, default=8080, help="Agones webhook, /metrics, /healthz, /readyz (default: 8080)"
    )
    parser.add_argument(
        "--health-port",
        type=int,
        default=8081,
        help="/healthz, /readyz and /metrics on a listener of their own, plain HTTP, for the kubelet's probes "
        "and Prometheus (default: 8081)",
    )
    parser.add_argument("--http-tls-cert", type=Path, help="PEM certificate for HTTPS (for a FleetAutoscaler caBundle)")
    parser.add_argument("--http-tls-key", type=Path, help="PEM private key for HTTPS")
    parser.add_argument(
        "--leader-elect", action=argparse.BooleanOptionalAction, default=True, help="campaign for a Lease"
    )
    parser.add_argument("--lease-namespace", help="namespace of the Lease (default: the pod's namespace)")
    parser.add_argument("--lease-name", default="presage-scaler", help="name of the Lease (default: presage-scaler)")
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="split the scalers into this many shards, one Lease each (<lease-name>-shard-<i>), so that "
        "replicas share the evaluations; 1 (default): one leader evaluates every scaler",
    )
    parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default: 15)")
    parser.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (default: 10)")
    parser.add_argument("--retry-period", type=float, default=2.0, help="seconds (default: 2)")
    parser.add_argument("--identity", help="leader election identity (default: hostname plus a random suffix)")
    parser.add_argument("--concurrency", type=int, default=32, help="evaluations in flight at once (default: 32)")
    parser.add_argument(
        "--watch-targets",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read Deployments', StatefulSets' and ReplicaSets' replica counts from a watch of each kind "
        "(needs list/watch on them) instead of a scale subresource GET per evaluation (default: on)",
    )
    parser.add_argument("--probe-period", type=float, default=30.0, help="ForecastBackend probe period, seconds")
    default = StalenessBound()
    parser.add_argument(
        "--staleness-factor",
        type=float,
        default=default.factor,
        help="KEDA gets UNAVAILABLE for a recommendation older than max(factor x the scaler's interval, floor) "
        f"(default: {default.factor:g})",
    )
    parser.add_argument(
        "--staleness-floor",
        type=float,
        default=default.floor.total_seconds(),
        help=f"seconds; see --staleness-factor (default: {default.floor.total_seconds():g})",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default: INFO)")


def options_from(args: argparse.Namespace) -> ControllerOptions:
    tls = None
    if args.grpc_tls_cert or args.grpc_tls_key:
        if not (args.grpc_tls_cert and args.grpc_tls_key):
            raise SystemExit("presage run: --grpc-tls-cert and --grpc-tls-key go together")
        tls = TLSConfig.from_files(args.grpc_tls_cert, args.grpc_tls_key, args.grpc_client_ca)
    elif args.grpc_client_ca:
        raise SystemExit("presage run: --grpc-client-ca needs --grpc-tls-cert and --grpc-tls-key")
    if bool(args.http_tls_cert) != bool(args.http_tls_key):
        raise SystemExit("presage run: --http-tls-cert and --http-tls-key go together")
    http_tls = TLSFiles(args.http_tls_cert, args.http_tls_key) if args.http_tls_cert else None
    if not (args.staleness_factor > 0 and args.staleness_floor >= 0):
        raise SystemExit("presage run: --staleness-factor must be above 0 and --staleness-floor at least 0")
    if args.shards < 1:
        raise SystemExit("presage run: --shards must be at least 1")
    if args.shards > 1 and not args.leader_elect:
        raise SystemExit("presage run: --shards above 1 needs leader election (the shards are Leases)")
    extra = {"identity": args.identity} if args.identity else {}
    return ControllerOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=tuple(n.strip() for n in args.namespaces.split(",") if n.strip()),
        grpc_port=args.grpc_port,
        grpc_tls=tls,
        http_port=args.http_port,
        http_tls=http_tls,
        health_port=args.health_port,
        leader_elect=args.leader_elect,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        shards=args.shards,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        concurrency=args.concurrency,
        watch_targets=args.watch_targets,
        probe_period=args.probe_period,
        staleness=StalenessBound(args.staleness_factor, timedelta(seconds=args.staleness_floor)),
        **extra,
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
    )
    return asyncio.run(run_until_signalled(options_from(args)))

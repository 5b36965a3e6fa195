"""The flags ``presage backtest`` and ``presage tune`` share (``presage advise`` shares the memory budget
and how its history is split), declared once: where the trace comes from and where the results go,
the capacity and lead time a spec is built with, the seasonal trigger, the memory budget, and reading
the trace from a Prometheus behind headers, basic auth or TLS. Each command calls them in the order
its ``--help`` lists them; :func:`trace_request` reads the trace's flags back as typed values.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

from presage_scaler.backtest import extra
from presage_scaler.backtest.baselines import DEFAULT_TRIGGER_UTILIZATION
from presage_scaler.backtest.config import DEFAULT_WARMUP, parse_per_replica
from presage_scaler.backtest.connection import PASSWORD_ENVIRONMENT, ConnectionOptions
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET, parse_size
from presage_scaler.backtest.request import TraceRequest
from presage_scaler.cli.flag_types import DURATION, typed


def parse_utilization(text: str) -> float:
    """A target utilization in percent, above 0 and at most 100 (``75%``, ``60``), as a fraction."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if not 0.0 < value <= 100.0:
        raise ValueError(f"{text!r} is not a target utilization above 0 and at most 100 %, such as 75%")
    return value / 100.0


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    """TRACE, ``--out`` and ``--resample``: the trace file, where the results go, and the grid an
    irregular trace is put on."""
    parser.add_argument("trace", nargs="?", type=Path, help="CSV with a header timestamp,value (or ts,value)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results (created if missing)")
    parser.add_argument(
        "--resample",
        type=DURATION,
        metavar="STEP",
        help="for a TRACE whose timestamps are not on a regular grid: move each row to the nearest multiple of "
        "STEP (e.g. 5m: :00, :05, ...) and average the rows that meet there",
    )


def add_capacity_arguments(parser: argparse.ArgumentParser) -> None:
    """``--per-replica`` and ``--lead-time``: what a spec built from flags needs."""
    parser.add_argument(
        "--per-replica", type=typed(parse_per_replica), help="units of demand one replica serves (spec.capacity)"
    )
    parser.add_argument("--lead-time", type=DURATION, help="how long a new pod takes to become ready, e.g. 5m")


def add_max_replicas_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-replicas``."""
    parser.add_argument("--max-replicas", type=int, help="override policy.maxReplicas (default: 10x the oracle's peak)")


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``."""
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (drawn only when stderr is a TTY)")


def add_trigger_argument(parser: argparse.ArgumentParser) -> None:
    """``--trigger-utilization``, the seasonal trigger's target utilization
    (:class:`presage_scaler.backtest.baselines.SeasonalTriggerPolicy`)."""
    parser.add_argument(
        "--trigger-utilization",
        type=typed(parse_utilization),
        default=DEFAULT_TRIGGER_UTILIZATION,
        metavar="PERCENT",
        help="the seasonal trigger's target utilization, the hand-written KEDA trigger on last week's demand that "
        f"presage is compared with, e.g. 60%% (default: {100 * DEFAULT_TRIGGER_UTILIZATION:g}%%)",
    )


def add_memory_argument(parser: argparse.ArgumentParser) -> None:
    """``--memory-budget``, the bytes a run may take (:mod:`presage_scaler.backtest.memory`)."""
    parser.add_argument(
        "--memory-budget",
        type=typed(parse_size),
        default=DEFAULT_MEMORY_BUDGET,
        help="most memory the run may take at its peak, e.g. 1536Mi or 4Gi; a run estimated to need more is "
        "refused before it reads or forecasts (default: 1536Mi, which fits the chart's advise pod)",
    )


def add_split_arguments(parser: argparse.ArgumentParser, history: str) -> None:
    """``--warmup`` and ``--holdout``: how ``history`` is cut into the warm-up, the part chosen on and
    the part held out (:mod:`presage_scaler.tune.split`); ``presage tune`` and ``presage advise`` share them."""
    parser.add_argument(
        "--warmup",
        type=DURATION,
        default=DEFAULT_WARMUP,
        help=f"leading time of {history} counted in neither part, e.g. 7d (default: 7d)",
    )
    parser.add_argument(
        "--holdout",
        type=DURATION,
        help=f"how much of the end of {history} to hold out (default: 7d, less when it is short)",
    )


def add_prometheus_arguments(parser: argparse.ArgumentParser) -> None:
    """The group that reads the trace from a Prometheus instead of a file: the query, its range and
    step, and how to reach a Prometheus behind a tenant header, basic auth or (mutual) TLS."""
    source = parser.add_argument_group("reading the trace from Prometheus instead of a file")
    source.add_argument("--prometheus", metavar="URL", help="base URL of a Prometheus-compatible query API")
    source.add_argument("--query", help="PromQL returning exactly one series")
    source.add_argument("--start", help="ISO-8601 or Unix seconds")
    source.add_argument("--end", help="ISO-8601 or Unix seconds")
    source.add_argument("--step", type=DURATION, default=timedelta(minutes=1), help="default: 1m")
    add_connection_arguments(source)


def add_connection_arguments(group: argparse._ArgumentGroup) -> None:
    """How to reach a Prometheus behind a tenant header, basic auth or (mutual) TLS, beside ``--prometheus``
    (read back by :func:`connection_options`)."""
    group.add_argument(
        "--header",
        action="append",
        metavar="NAME=VALUE",
        help="a header sent with every query, e.g. X-Scope-OrgID=team-a for a Mimir, Cortex or Thanos tenant; "
        "repeat for several",
    )
    group.add_argument("--basic-auth", metavar="USER", help="basic authentication as USER")
    group.add_argument(
        "--basic-auth-password-file",
        type=Path,
        metavar="FILE",
        help=f"the file holding --basic-auth's password (default: the {PASSWORD_ENVIRONMENT} environment variable)",
    )
    group.add_argument("--ca-file", type=Path, metavar="FILE", help="PEM CA bundle that verifies the server")
    group.add_argument("--cert-file", type=Path, metavar="FILE", help="PEM client certificate, for mutual TLS")
    group.add_argument("--key-file", type=Path, metavar="FILE", help="the client certificate's unencrypted PEM key")
    group.add_argument(
        "--insecure-skip-verify", action="store_true", help="do not verify the server's certificate (testing only)"
    )


def connection_options(args: argparse.Namespace) -> ConnectionOptions:
    """The connection flags :func:`add_connection_arguments` declares, as given."""
    return ConnectionOptions(
        header=tuple(args.header or ()),
        basic_auth=args.basic_auth,
        basic_auth_password_file=args.basic_auth_password_file,
        ca_file=args.ca_file,
        cert_file=args.cert_file,
        key_file=args.key_file,
        insecure_skip_verify=args.insecure_skip_verify,
    )


def trace_request(args: argparse.Namespace) -> TraceRequest:
    """Where the flags say the trace comes from (:func:`add_trace_arguments`, :func:`add_prometheus_arguments`)."""
    return TraceRequest(
        file=args.trace,
        resample=args.resample,
        prometheus=args.prometheus,
        query=args.query,
        start=args.start,
        end=args.end,
        step=args.step,
        connection=connection_options(args),
    )


def backtest_extra_missing(command: str) -> bool:
    """Whether the backtest extra (pandas, plotly) is missing, said on stderr as ``presage COMMAND: ...``
    so the command can exit 2 before importing what needs it."""
    try:
        extra.require()
    except BacktestError as err:
        print(f"presage {command}: {err}", file=sys.stderr)
        return True
    return False

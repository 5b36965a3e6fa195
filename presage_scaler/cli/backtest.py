"""``presage backtest``: its flags, and the check for the backtest extra before the run (:mod:`.from_flags`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from presage_scaler.api.quantities import parse_amount, parse_duration, parse_quantile
from presage_scaler.backtest import extra
from presage_scaler.backtest.baselines import DEFAULT_TRIGGER_UTILIZATION
from presage_scaler.backtest.config import DEFAULT_WARMUP, parse_per_replica
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET, parse_size

DESCRIPTION = """\
Replay a demand trace through presage's own evaluator, backend and policy on a simulated clock, and
compare it with a reactive HPA, an HPA with its headroom raised until it costs as much as presage,
the seasonal trigger a KEDA user writes by hand (last week's demand, at --trigger-utilization; also
cost-matched), a static count and an oracle that knows the future. Writes summary.json,
decisions.csv and report.html to --out.

Without --spec the scaler is the API's defaults with the flags' capacity and lead time. With --spec
(a PredictiveScaler, or just its spec) the file is validated like the cluster would, and --lead-time
is the pods' real boot delay (default: the spec's lead time). The trace step is the signal's
resolution unless the spec's resolution is a multiple of it (then the trace is averaged to it).
"""


def _typed(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type that reports the parser's own message."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


def parse_flag_duration(text: str) -> timedelta:
    """A duration flag's value. A negative one is refused with the positive duration it most likely
    meant, since no duration flag takes a negative (``main``'s parser hands ``--lead-time -5m`` to
    the flag rather than reading ``-5m`` as another flag)."""
    if text.startswith("-"):
        magnitude = text.removeprefix("-")
        try:
            parse_duration(magnitude)
        except ValueError:
            magnitude = "5m"
        raise ValueError(f"must be a positive duration such as {magnitude}; got {text!r}")
    return parse_duration(text)


DURATION = _typed(parse_flag_duration)
"""The argparse type of every duration flag."""


def out_problem(out: Path) -> str | None:
    """Why ``--out`` cannot be the directory the results go into (created if missing), or None: a file
    where the directory or one above it would be, or a directory the user may not write in."""
    try:
        existing = next(path for path in (out, *out.parents) if path.exists())
    except OSError as err:
        return f"--out {out}: cannot look at {err.filename} ({err.strerror}); give a directory you can write to"
    if not existing.is_dir():
        if existing == out:
            return f"--out {out} is a file; give a directory (it is created if missing)"
        return f"--out {out}: {existing} is a file, not a directory; give a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out}: no permission to write in {existing}; give a directory you can write to"
    return None


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that cannot hold the results before the run spends any time."""
    problem = out_problem(out)
    if problem is not None:
        raise BacktestError(problem)


@contextmanager
def writing_into(out: Path) -> Iterator[None]:
    """Create ``--out`` and write into it; a failure to do either is a :class:`BacktestError` naming
    the flag and the path (never a bare ``[Errno 17] File exists``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        yield
    except OSError as err:
        reason = "no permission" if isinstance(err, PermissionError) else err.strerror
        raise BacktestError(
            out_problem(out)
            or f"--out {out}: cannot write {err.filename or out} ({reason}); give a directory you can write to"
        ) from None


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


def add_trigger_argument(parser: argparse.ArgumentParser) -> None:
    """``--trigger-utilization``, the seasonal trigger's target utilization
    (:class:`presage_scaler.backtest.baselines.SeasonalTriggerPolicy`); ``presage backtest`` and
    ``presage tune`` share it."""
    parser.add_argument(
        "--trigger-utilization",
        type=_typed(parse_utilization),
        default=DEFAULT_TRIGGER_UTILIZATION,
        metavar="PERCENT",
        help="the seasonal trigger's target utilization, the hand-written KEDA trigger on last week's demand that "
        f"presage is compared with, e.g. 60%% (default: {100 * DEFAULT_TRIGGER_UTILIZATION:g}%%)",
    )


PASSWORD_ENVIRONMENT = "PRESAGE_PROMETHEUS_PASSWORD"
"""Where ``--basic-auth``'s password is read from when no ``--basic-auth-password-file`` is given."""


def add_connection_arguments(group: argparse._ArgumentGroup) -> None:
    """How to reach a Prometheus behind a tenant header, basic auth or (mutual) TLS, beside ``--prometheus``;
    ``presage backtest`` and ``presage tune`` share them (read by
    :func:`presage_scaler.backtest.from_flags.connection_from_flags`)."""
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


def add_memory_argument(parser: argparse.ArgumentParser) -> None:
    """``--memory-budget``, the bytes a run may take (:mod:`presage_scaler.backtest.memory`)."""
    parser.add_argument(
        "--memory-budget",
        type=_typed(parse_size),
        default=DEFAULT_MEMORY_BUDGET,
        help="most memory the run may take at its peak, e.g. 1536Mi or 4Gi; a run estimated to need more is "
        "refused before it reads or forecasts (default: 1536Mi, which fits the chart's advise pod)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The backtest subcommand's flags."""
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("trace", nargs="?", type=Path, help="CSV with a header timestamp,value (or ts,value)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results (created if missing)")
    parser.add_argument(
        "--resample",
        type=DURATION,
        metavar="STEP",
        help="for a TRACE whose timestamps are not on a regular grid: move each row to the nearest multiple of "
        "STEP (e.g. 5m: :00, :05, ...) and average the rows that meet there",
    )
    parser.add_argument(
        "--per-replica", type=_typed(parse_per_replica), help="units of demand one replica serves (spec.capacity)"
    )
    parser.add_argument("--lead-time", type=DURATION, help="how long a new pod takes to become ready, e.g. 5m")
    parser.add_argument(
        "--interval",
        type=DURATION,
        help="time between decisions (default: 1m, or the trace step if coarser; rounded up to whole steps)",
    )
    parser.add_argument(
        "--warmup",
        type=DURATION,
        default=DEFAULT_WARMUP,
        help="leading time not counted in the metrics, e.g. 7d or 36h (default: 7d)",
    )
    parser.add_argument("--spec", type=Path, help="PredictiveScaler YAML (whole object or just its spec)")
    parser.add_argument("--backend-spec", type=Path, help="ForecastBackend YAML (default: SeasonalNaive)")
    parser.add_argument("--target-quantile", type=_typed(parse_quantile), help="override policy.targetQuantile")
    parser.add_argument("--headroom", help='override policy.headroom, e.g. "10%%" or 5')
    parser.add_argument(
        "--reactive-headroom", type=_typed(parse_amount), help="the reactive HPA's headroom (default: policy.headroom)"
    )
    parser.add_argument("--max-replicas", type=int, help="override policy.maxReplicas (default: 10x the oracle's peak)")
    parser.add_argument("--season", type=DURATION, help="SeasonalNaive season, e.g. 24h or 7d")
    parser.add_argument("--cycles", type=int, help="SeasonalNaive cycles")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (drawn only when stderr is a TTY)")
    add_trigger_argument(parser)
    add_memory_argument(parser)
    source = parser.add_argument_group("reading the trace from Prometheus instead of a file")
    source.add_argument("--prometheus", metavar="URL", help="base URL of a Prometheus-compatible query API")
    source.add_argument("--query", help="PromQL returning exactly one series")
    source.add_argument("--start", help="ISO-8601 or Unix seconds")
    source.add_argument("--end", help="ISO-8601 or Unix seconds")
    source.add_argument("--step", type=DURATION, default=timedelta(minutes=1), help="default: 1m")
    add_connection_arguments(source)


def run(args: argparse.Namespace) -> int:
    """Run the backtest the flags describe; 2 with one line on stderr when it cannot run."""
    try:
        extra.require()
    except BacktestError as err:
        print(f"presage backtest: {err}", file=sys.stderr)
        return 2
    # Imported only now: it reads traces with pandas and draws with plotly, from the backtest extra.
    from presage_scaler.backtest.from_flags import run_from_flags

    return run_from_flags(args)

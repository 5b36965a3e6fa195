"""The ``presage`` command line."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import NoReturn

from presage_scaler.api.generated import PACKAGE, checkout_of, stale_generated, write_generated
from presage_scaler.backtest import command as backtest_command
from presage_scaler.backtest.command import out_problem
from presage_scaler.cli import scaledobject_command
from presage_scaler.controller import command as run_command
from presage_scaler.tune import advise_command
from presage_scaler.tune import command as tune_command


def _cmd_crds(args: argparse.Namespace) -> int:
    root = args.out or checkout_of(PACKAGE)
    if root is None:
        print(
            f"presage crds: presage runs from {PACKAGE}, not from a checkout of its source: pass --out DIR "
            "(the checkout, or where the generated files should go)",
            file=sys.stderr,
        )
        return 2
    if args.check:
        stale = stale_generated(root)
        for path in stale:
            print(f"stale: {root / path} (run `presage crds` to regenerate)", file=sys.stderr)
        return 1 if stale else 0
    if args.out is not None and (problem := out_problem(args.out)) is not None:
        print(f"presage crds: {problem}", file=sys.stderr)
        return 2
    try:
        written = write_generated(root)
    except OSError as err:
        print(f"presage crds: cannot write {err.filename} ({err.strerror})", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {root / path}")
    return 0


def _cmd_backtest(args: argparse.Namespace) -> int:
    return backtest_command.run(args)


DISTRIBUTION = "presage-scaler"
"""The name presage is installed under (pyproject.toml's ``project.name``)."""


def version() -> str:
    """The installed version, from the package metadata; in a source checkout that was never installed,
    pyproject.toml's version, said to be so."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        root = checkout_of(PACKAGE)
        if root is None:
            return "unknown (not installed as a package)"
        with (root / "pyproject.toml").open("rb") as handle:
            return f"{tomllib.load(handle)['project']['version']} (source checkout {root}, not installed)"


class _Parser(argparse.ArgumentParser):
    """Bad flags are refused in one line that names the command and the flag, exit 2.

    A flag's value may start with a dash (``--lead-time -5m``, ``--query -rate(x)``): argparse alone
    would take it for another flag and answer "expected one argument", which hides the real mistake.
    Such a value is attached to its flag (``--lead-time=-5m``), so the flag's own check says what is
    wrong with it. A value is attached only where it cannot be a flag of this command: it starts with
    one dash, is not ``-`` (stdin), and does not begin with one of the command's short flags.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._attach_dash_values(given), namespace)

    def _attach_dash_values(self, args: list[str]) -> list[str]:
        attached: list[str] = []
        index = 0
        while index < len(args):
            token = args[index]
            if token == "--":  # everything after it is positional
                return attached + args[index:]
            action = self._option_string_actions.get(token)
            takes_one_value = action is not None and action.nargs is None
            if takes_one_value and index + 1 < len(args) and self._is_dash_value(args[index + 1]):
                attached.append(f"{token}={args[index + 1]}")
                index += 2
            else:
                attached.append(token)
                index += 1
        return attached

    def _is_dash_value(self, token: str) -> bool:
        return (
            len(token) > 1
            and token.startswith("-")
            and not token.startswith("--")
            and token[:2] not in self._option_string_actions
        )


SCALEDOBJECT_DESCRIPTION = """\
Print the KEDA ScaledObject that hands a PredictiveScaler's workload to presage: an external trigger
on presage's gRPC service (--scaler-address), with KEDA's fallback to hold the replicas while presage
cannot answer. It reads the PredictiveScaler from the cluster (NAME, -n), or with -f from a YAML
file or stdin without a cluster (a GitOps pipeline). Apply what it prints with kubectl apply -f -.
"""


def build_parser() -> argparse.ArgumentParser:
    """The commands a user runs first, in the order they meet them; the developers' ``crds`` last."""
    parser = _Parser(prog="presage", description="presage, a predictive autoscaler for Kubernetes")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    backtest = commands.add_parser(
        "backtest", help="replay a demand trace through presage and compare it with reactive scaling and an oracle"
    )
    backtest_command.add_arguments(backtest)
    backtest.set_defaults(func=_cmd_backtest)

    tune = commands.add_parser(
        "tune", help="find the cheapest policy that meets a service level on a demand trace (or a live scaler)"
    )
    tune_command.add_arguments(tune)
    tune.set_defaults(func=tune_command.run)

    advise = commands.add_parser(
        "advise", help="tune every PredictiveScaler with spec.advice on its own history and write status.advice"
    )
    advise_command.add_arguments(advise)
    advise.set_defaults(func=advise_command.run)

    scaledobject = commands.add_parser(
        "scaledobject",
        help="print the KEDA ScaledObject that hands a PredictiveScaler's workload to presage",
        description=SCALEDOBJECT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scaledobject_command.add_arguments(scaledobject)
    scaledobject.set_defaults(func=scaledobject_command.run)

    run = commands.add_parser(
        "run", help="run the scaler: watch PredictiveScalers, evaluate them, serve KEDA (gRPC) and Agones (HTTP)"
    )
    run_command.add_arguments(run)
    run.set_defaults(func=run_command.run)

    crds = commands.add_parser(
        "crds",
        help="(for presage's developers) regenerate the CRDs and docs/api-reference.md from the API declaration",
        description="For presage's developers: generate crds/, charts/presage/templates/crds/ and "
        "docs/api-reference.md from the API declaration in presage_scaler/api/. "
        "They are written into the source checkout presage runs from, or under --out; an installed presage "
        "(not a checkout) needs --out. Users install the CRDs with the Helm chart, or "
        "kubectl apply --server-side -f crds/.",
    )
    crds.add_argument("--out", type=Path, help="directory to write under (default: the checkout presage runs from)")
    crds.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale; write nothing")
    crds.set_defaults(func=_cmd_crds)
    return parser


SIGPIPE_EXIT = 128 + signal.SIGPIPE
"""The status of a command whose reader went away (``presage backtest … | head -1``): what a shell
reports for a Unix tool that SIGPIPE ended, so ``set -o pipefail`` sees it, without the traceback
Python gives instead (it ignores SIGPIPE so that its sockets see EPIPE, and the server must keep doing
so)."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
            code = int(args.func(args))
        finally:  # --help and refusals exit through here too
            sys.stdout.flush()  # here, where a reader that went away can still be answered quietly
    except BrokenPipeError:
        # Whatever is still buffered cannot be written: point stdout at /dev/null so that the flush at
        # interpreter exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_EXIT
    return code


if __name__ == "__main__":
    sys.exit(main())

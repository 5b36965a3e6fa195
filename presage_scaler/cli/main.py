"""The ``presage`` command line: the top-level parser, built from one module per subcommand (each
declares its flags and runs them), and the exit status of a command whose reader went away."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from presage_scaler.api.generated import PACKAGE, checkout_of
from presage_scaler.cli import advise, backtest, crds, run, scaledobject, tune

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


COMMANDS = (backtest, tune, advise, scaledobject, run, crds)
"""The commands a user runs first, in the order they meet them; the developers' ``crds`` last. Each
module has its NAME, its HELP line in ``presage --help``, ``add_arguments`` and ``run``."""


def build_parser() -> argparse.ArgumentParser:
    """``presage`` with ``--version`` and every command of :data:`COMMANDS`."""
    parser = _Parser(prog="presage", description="presage, a predictive autoscaler for Kubernetes")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        subparser = commands.add_parser(command.NAME, help=command.HELP)
        command.add_arguments(subparser)
        subparser.set_defaults(func=command.run)
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

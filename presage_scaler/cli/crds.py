"""``presage crds``, for presage's developers: regenerate, or check, the files generated from the API
declaration (:mod:`presage_scaler.api.generated`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from presage_scaler.api.generated import PACKAGE, checkout_of, stale_generated, write_generated
from presage_scaler.backtest.out_dir import out_problem

NAME = "crds"
HELP = "(for presage's developers) regenerate the CRDs and docs/api-reference.md from the API declaration"
DESCRIPTION = (
    "For presage's developers: generate crds/, charts/presage/templates/crds/ and "
    "docs/api-reference.md from the API declaration in presage_scaler/api/. "
    "They are written into the source checkout presage runs from, or under --out; an installed presage "
    "(not a checkout) needs --out. Users install the CRDs with the Helm chart, or "
    "kubectl apply --server-side -f crds/."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The crds subcommand's flags."""
    parser.description = DESCRIPTION
    parser.add_argument("--out", type=Path, help="directory to write under (default: the checkout presage runs from)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale; write nothing")


def run(args: argparse.Namespace) -> int:
    """Write the generated files (or, with --check, say which are stale); 2 with one line on stderr when
    there is nowhere to write them."""
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

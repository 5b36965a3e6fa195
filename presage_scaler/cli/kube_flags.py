"""``--kubeconfig`` and ``--context``: how every command that talks to a cluster finds it."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_kubeconfig_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--kubeconfig`` and ``--context``, the flags that :func:`presage_scaler.clients.kube.credentials.load` takes."""
    parser.add_argument(
        "--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: its current-context)")

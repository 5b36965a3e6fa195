"""The packages' import direction: each package imports only the packages below it, and never one
that :data:`FORBIDDEN` names; no two modules import each other, directly or in a loop; only the
command line (``cli/``) parses flags.

Read from the source (every ``import`` and ``from ... import``, including those inside functions),
so an upward import anywhere fails here, not in a review.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import presage_scaler

ROOT = Path(presage_scaler.__file__).parent

BELOW: dict[str, set[str]] = {
    # the commands
    "cli": {
        "tune",
        "backtest",
        "scaledobject",
        "controller",
        "serving",
        "observability",
        "engine",
        "clients",
        "backends",
        "api",
    },
    "tune": {"backtest", "engine", "clients", "backends", "series", "api"},
    "backtest": {"engine", "clients", "backends", "series", "api"},
    # what `presage scaledobject` prints: a PredictiveScaler's KEDA ScaledObject, read from a file or the cluster
    "scaledobject": {"engine", "clients", "api"},
    # the service: the controller decides and writes; serving answers KEDA and Agones from the store
    "controller": {"serving", "observability", "engine", "clients", "backends", "series", "api"},
    "serving": {"observability", "api", "proto_gen"},
    "observability": {"api"},
    # the domain and what it reads through
    "engine": {"backends", "series", "api"},
    "clients": {"backends", "series", "api"},
    "backends": {"series", "api"},
    "series": set(),
    "api": set(),
    "proto_gen": set(),
}
"""What each package may import (beside itself)."""

FORBIDDEN: dict[tuple[str, str], str] = {
    ("engine", "clients"): (
        "the engine decides from plain values and reads signals through its SignalSource protocol; "
        "what speaks HTTP or Kubernetes is an edge (clients/, or the controller's prometheus_signals.py)"
    ),
    ("tune", "controller"): (
        "presage tune and presage advise run without the controller; what they share with it "
        "(kinds, read_scaler, Secrets, shard_of) lives below both, in api/ or clients/"
    ),
}
"""Imports that stay out even though the layers would allow them, each with why (as kopf's
forbidden import contracts)."""


def _all_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def _imports(path: Path) -> set[str]:
    return {name for name in _all_imports(path) if name.split(".")[0] == "presage_scaler"}


def _edges() -> dict[tuple[str, str], set[str]]:
    """(importing package, imported package) -> the modules where it happens."""
    edges: dict[tuple[str, str], set[str]] = {}
    for path in ROOT.rglob("*.py"):
        package = path.relative_to(ROOT).parts[0]
        for name in _imports(path):
            parts = name.split(".")
            target = parts[1] if len(parts) > 1 else "presage_scaler"
            if target != package:
                edges.setdefault((package, target), set()).add(str(path.relative_to(ROOT)))
    return edges


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports() -> dict[str, set[str]]:
    """Each module of presage_scaler -> the modules of presage_scaler it imports; ``from package import
    name`` imports the module ``package.name`` where there is one, else ``package`` itself."""
    modules = {_module_name(path): path for path in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    module = f"{node.module}.{alias.name}"
                    imported.add(module if module in modules else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = {module for module in imported if module in modules and module != name}
    return graph


def test_the_allowed_imports_are_layers():
    order = list(TopologicalSorter(BELOW).static_order())  # raises CycleError on a cycle
    assert set(order) == set(BELOW)


def test_every_package_has_its_place_and_the_top_level_holds_only_packages():
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(BELOW)
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py"]


def test_imports_point_downward_only():
    upward = {
        f"{src} -> {dst}": sorted(where) for (src, dst), where in _edges().items() if dst not in BELOW.get(src, set())
    }
    assert upward == {}


def test_forbidden_imports_stay_out():
    edges = _edges()
    for (src, dst), why in FORBIDDEN.items():
        assert dst not in BELOW[src], f"{src} may not import {dst}: {why}"
        assert (src, dst) not in edges, f"{src} imports {dst} in {sorted(edges[(src, dst)])}: {why}"


def test_metrics_and_serving_import_no_domain_code():
    domain = {"engine", "backends", "controller", "clients"}
    edges = _edges()
    assert not [(src, dst) for (src, dst) in edges if src in {"serving", "observability"} and dst in domain]
    assert ("serving", "observability") in edges and ("controller", "engine") in edges  # the walk sees imports


def test_no_two_modules_import_each_other_directly_or_in_a_loop():
    graph = _module_imports()
    assert "presage_scaler.cli.main" in graph and "presage_scaler.cli.backtest" in graph["presage_scaler.cli.main"]
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as err:
        raise AssertionError(f"import loop: {' -> '.join(err.args[1])}") from None


def test_only_the_command_line_parses_flags():
    """Commands declare and read their flags in cli/ and pass typed values down."""
    parsing = sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] != "cli"
        and "argparse" in {name.split(".")[0] for name in _all_imports(path)}
    )
    assert parsing == []

"""The files generated from the API declaration, and the staleness check run by the tests."""

from __future__ import annotations

from pathlib import Path

from presage_scaler.api.crdgen import crd_filename, render_chart_crd, render_crd
from presage_scaler.api.docgen import render_reference
from presage_scaler.api.kinds import KINDS

CHART_CRDS = "charts/presage/templates/crds"
PACKAGE = Path(__file__).resolve().parents[1]
"""The ``presage_scaler`` package this module belongs to."""


def checkout_of(package: Path) -> Path | None:
    """The source checkout ``package`` was imported from (the directory holding ``pyproject.toml``
    beside it), or None when it is installed (from a wheel, into site-packages): the generated files
    belong in the checkout whose declaration they are generated from, never wherever the command
    happens to run."""
    root = package.parent
    return root if (root / "pyproject.toml").is_file() else None


def generated_files() -> dict[str, str]:
    """Repository-relative path → content of every generated file.

    The CRDs are written twice: ``crds/`` for ``kubectl apply``, and as templates of the Helm chart
    (Helm reads only files inside the chart, and upgrades CRDs only from its templates).
    """
    files = {f"crds/{crd_filename(kind)}": render_crd(kind) for kind in KINDS}
    files |= {f"{CHART_CRDS}/{crd_filename(kind)}": render_chart_crd(kind) for kind in KINDS}
    files["docs/api-reference.md"] = render_reference()
    return files


def write_generated(root: Path) -> list[str]:
    """Write every generated file under ``root``; returns the paths that changed."""
    changed = []
    for relative, content in generated_files().items():
        path = root / relative
        if not path.exists() or path.read_text() != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            changed.append(relative)
    return changed


def stale_generated(root: Path) -> list[str]:
    """Paths under ``root`` whose content differs from what the declaration generates."""
    return [
        relative
        for relative, content in generated_files().items()
        if not (root / relative).exists() or (root / relative).read_text() != content
    ]

"""The scaler image's install steps, mirrored in a fresh virtual environment (no Docker here)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def dockerfile_copies(dockerfile: Path) -> list[str]:
    """Source paths of the build stage's ``COPY`` lines (not ``COPY --from``)."""
    sources = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not words[1].startswith("--from"):
            sources += words[1:-1]
    return sources


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding the package installed (non-editable) from only what the Dockerfile copies."""
    root = tmp_path_factory.mktemp("image")
    src = root / "src"
    src.mkdir()
    for source in dockerfile_copies(REPO / "Dockerfile.scaler"):
        origin = REPO / source
        if origin.is_dir():
            shutil.copytree(origin, src / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, src / source)
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(src)], check=True)
    return root / "venv" / "bin"


def test_copies_name_real_paths():
    assert dockerfile_copies(REPO / "Dockerfile.scaler") == ["pyproject.toml", "README.md", "presage_scaler"]


def test_installed_cli_generates_the_committed_crds(installed, tmp_path):
    result = subprocess.run(
        [installed / "presage", "crds", "--check", "--root", str(REPO)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_installed_package_does_not_import_from_the_checkout(installed):
    result = subprocess.run(
        [installed / "python", "-c", "import presage_scaler; print(presage_scaler.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    assert str(REPO) not in result.stdout and "site-packages" in result.stdout
    assert sys.prefix not in result.stdout

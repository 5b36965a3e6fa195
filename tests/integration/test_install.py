"""The scaler image's install steps, mirrored in a fresh virtual environment (no Docker here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.image_install import dockerfile_copies, imported_from, install_image

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile.scaler"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding the package installed (non-editable) from only what the Dockerfile copies."""
    return install_image(DOCKERFILE, tmp_path_factory.mktemp("image"))


def test_copies_name_real_paths():
    assert dockerfile_copies(DOCKERFILE) == [
        (["pyproject.toml", "README.md"], "./"),
        (["presage_scaler"], "./presage_scaler"),
    ]


def test_installed_cli_generates_the_committed_crds(installed, tmp_path):
    result = subprocess.run(
        [installed / "presage", "crds", "--check", "--root", str(REPO)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_installed_package_does_not_import_from_the_checkout(installed):
    where = imported_from(installed, "presage_scaler")
    assert str(REPO) not in where and "site-packages" in where
    assert sys.prefix not in where

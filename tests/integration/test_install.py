"""The scaler image's install steps, mirrored in a fresh virtual environment (no Docker here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.image_install import image_runtime, imported_from, install_image

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile.scaler"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding the package installed (non-editable) from only what the Dockerfile copies."""
    return install_image(DOCKERFILE, tmp_path_factory.mktemp("image"))


def test_every_module_imports_from_what_the_image_copies(installed):
    """A module, package data or dependency the Dockerfile or pyproject forgets fails here."""
    program = (
        "import importlib, pkgutil, presage_scaler\n"
        "names = [m.name for m in pkgutil.walk_packages(presage_scaler.__path__, 'presage_scaler.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(len(names))"
    )
    result = subprocess.run([installed / "python", "-c", program], capture_output=True, text=True, check=False, cwd="/")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 40


@pytest.mark.parametrize("command", [["--help"], ["run", "--help"], ["scaledobject", "--help"], ["backtest", "--help"]])
def test_the_entrypoint_runs_as_the_image_runs_it(installed, command):
    runtime = image_runtime(DOCKERFILE)
    result = subprocess.run(
        runtime.command(installed, *command),
        env=runtime.environment(installed),
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: presage")


def test_installed_cli_generates_the_committed_crds(installed, tmp_path):
    result = subprocess.run(
        [installed / "presage", "crds", "--check", "--root", str(REPO)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_installed_package_does_not_import_from_the_checkout(installed):
    where = imported_from(installed, "presage_scaler")
    assert str(REPO) not in where and "site-packages" in where
    assert sys.prefix not in where

"""The forecaster image's install steps, mirrored in a fresh virtual environment (no Docker here).

The package is installed (non-editable) from only what ``Dockerfile.forecaster`` copies. Its
dependencies (torch: gigabytes) are not downloaded a second time: the fresh venv sees the cached
forecaster venv's site-packages through a ``.pth`` file, so pip still checks that every requirement
is satisfied but installs only the package itself.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.harness.forecaster import ForecasterUnavailable
from tests.harness.image_install import image_runtime, imported_from, install_image
from tests.harness.process import ServerProcess, free_port

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile.forecaster"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(forecaster_python, tmp_path_factory) -> Path:
    return install_image(DOCKERFILE, tmp_path_factory.mktemp("forecaster-image"), dependencies_of=forecaster_python)


def test_the_image_never_reaches_for_the_hub(installed, tmp_path):
    """The image's ENV (HF_HUB_OFFLINE=1) makes an uncached hub id fail at once, saying so."""
    runtime = image_runtime(DOCKERFILE)
    env = {**runtime.environment(installed), "HF_HOME": str(tmp_path / "empty-hub")}
    result = subprocess.run(
        runtime.command(installed, "--model", "google/timesfm-2.5-200m-pytorch", "--port", str(free_port())),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
    )
    assert result.returncode != 0
    assert "offline" in (result.stderr + result.stdout).lower(), result.stderr[-2000:]


def test_installed_package_does_not_import_from_the_checkout(installed):
    where = imported_from(installed, "presage_forecaster")
    assert str(REPO) not in where and "site-packages" in where
    assert sys.prefix not in where


def test_installed_command_serves_a_checkpoint(installed, tiny_checkpoint, tmp_path):
    runtime = image_runtime(DOCKERFILE)
    env = {**runtime.environment(installed), "HF_HOME": str(tmp_path / "hub")}
    port = free_port()
    server = ServerProcess(
        "presage-forecaster",
        runtime.command(installed, "--model", str(tiny_checkpoint), "--host", "127.0.0.1", "--port", str(port)),
        tmp_path / "server.log",
        error=ForecasterUnavailable,
        env=env,
        cwd="/",
    )
    try:
        server.wait_http(f"http://127.0.0.1:{port}/readyz", time.monotonic() + 90)
        model = httpx.get(f"http://127.0.0.1:{port}/v1/model").json()
        assert model["model"] == "presage-testing/timesfm-2.5-tiny-random"
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/forecast", json={"horizon": 3, "series": [{"values": [1.0, 2.0, 3.0]}]}
        )
        assert answer.status_code == 200 and len(answer.json()["series"][0]["point"]) == 3
    finally:
        server.stop()


def test_scaler_side_stays_free_of_torch():
    """The scaler's venv (and image) install the root pyproject only: no torch, no timesfm."""
    import importlib.util
    import tomllib

    with (REPO / "pyproject.toml").open("rb") as f:
        deps = " ".join(tomllib.load(f)["project"]["dependencies"]).lower()
    assert "torch" not in deps and "timesfm" not in deps
    assert importlib.util.find_spec("torch") is None and importlib.util.find_spec("timesfm") is None

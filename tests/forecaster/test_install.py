"""The forecaster image's install steps, mirrored in a fresh virtual environment (no Docker here).

The package is installed (non-editable) from only what ``Dockerfile.forecaster`` copies. Its
dependencies (torch: gigabytes) are not downloaded a second time: the fresh venv sees the cached
forecaster venv's site-packages through a ``.pth`` file, so pip still checks that every requirement
is satisfied but installs only the package itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx
import pytest

from tests.harness.forecaster import forecaster_env, free_port

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile.forecaster"

pytestmark = pytest.mark.integration


def dockerfile_copies(dockerfile: Path) -> list[tuple[list[str], str]]:
    """``(sources, destination)`` of the build stage's ``COPY`` lines (not ``COPY --from``)."""
    copies = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not words[1].startswith("--from"):
            copies.append((words[1:-1], words[-1]))
    return copies


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def installed(forecaster_python, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("forecaster-image")
    src = root / "src"
    src.mkdir()
    for sources, destination in dockerfile_copies(DOCKERFILE):
        for source in sources:
            origin = REPO / source
            target = src / Path(source).name if destination.endswith("/") else src / destination
            if origin.is_dir():
                shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(origin, target)
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    (site_packages(python) / "forecaster-deps.pth").write_text(f"{site_packages(forecaster_python)}\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(src)],
        check=True,
        cwd=root,
    )
    return root / "venv" / "bin"


def test_copies_name_real_paths():
    assert dockerfile_copies(DOCKERFILE) == [
        (["forecaster/pyproject.toml", "forecaster/README.md"], "./"),
        (["forecaster/presage_forecaster"], "./presage_forecaster"),
    ]
    text = DOCKERFILE.read_text()
    assert "USER 65532:65532" in text and "HF_HUB_OFFLINE=1" in text
    assert 'ENTRYPOINT ["presage-forecaster"]' in text


def test_installed_package_does_not_import_from_the_checkout(installed):
    result = subprocess.run(
        [installed / "python", "-c", "import presage_forecaster; print(presage_forecaster.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    assert str(REPO) not in result.stdout and "site-packages" in result.stdout
    assert sys.prefix not in result.stdout


def test_installed_command_serves_a_checkpoint(installed, tiny_checkpoint, tmp_path):
    env = {k: v for k, v in forecaster_env().items() if k != "PYTHONPATH"}
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [installed / "presage-forecaster", "--model", str(tiny_checkpoint), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd="/",
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        model = httpx.get(f"http://127.0.0.1:{port}/v1/model").json()
        assert model["model"] == "presage-testing/timesfm-2.5-tiny-random"
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/forecast", json={"horizon": 3, "series": [{"values": [1.0, 2.0, 3.0]}]}
        )
        assert answer.status_code == 200 and len(answer.json()["series"][0]["point"]) == 3
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def test_scaler_side_stays_free_of_torch():
    """The scaler's venv (and image) install the root pyproject only: no torch, no timesfm."""
    import importlib.util
    import tomllib

    with (REPO / "pyproject.toml").open("rb") as f:
        deps = " ".join(tomllib.load(f)["project"]["dependencies"]).lower()
    assert "torch" not in deps and "timesfm" not in deps
    assert importlib.util.find_spec("torch") is None and importlib.util.find_spec("timesfm") is None

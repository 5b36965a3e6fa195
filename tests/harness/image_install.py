"""A Dockerfile's install steps, mirrored in a fresh virtual environment (no Docker in the tests).

The build stage's ``COPY`` lines are replayed from the build context (the Dockerfile's folder) into
a source directory, and the package is installed from there, non-editable, as the image does: what
the Dockerfile forgets to copy is missing from the install too.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import venv
from dataclasses import dataclass
from pathlib import Path


def dockerfile_copies(dockerfile: Path) -> list[tuple[list[str], str]]:
    """``(sources, destination)`` of the build stage's ``COPY`` lines (not ``COPY --from``)."""
    copies = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not words[1].startswith("--from"):
            copies.append((words[1:-1], words[-1]))
    return copies


def _site_packages(python: Path) -> Path:
    """The ``purelib`` directory of the environment ``python`` runs in."""
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def install_image(dockerfile: Path, root: Path, *, dependencies_of: Path | None = None) -> Path:
    """Install what ``dockerfile`` copies into the venv ``root/venv``, as its ``pip install .`` does (no
    extras); return the venv's ``bin``.

    ``dependencies_of`` is another environment's python whose packages the new venv sees through
    a ``.pth`` file: pip still checks every requirement but downloads none it finds there.
    """
    src = root / "src"
    src.mkdir()
    for sources, destination in dockerfile_copies(dockerfile):
        for source in sources:
            origin = dockerfile.parent / source
            target = src / Path(source).name if destination.endswith("/") else src / destination
            if origin.is_dir():
                shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(origin, target)
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    if dependencies_of is not None:
        (_site_packages(python) / "dependencies.pth").write_text(f"{_site_packages(dependencies_of)}\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(src)],
        check=True,
        cwd=root,
    )
    return python.parent


def imported_from(bin_dir: Path, module: str) -> str:
    """The file the venv of ``bin_dir`` imports ``module`` from, run outside the checkout."""
    result = subprocess.run(
        [str(bin_dir / "python"), "-c", f"import {module}; print({module}.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return result.stdout


@dataclass(frozen=True)
class ImageRuntime:
    """What the final stage runs: its ENTRYPOINT and ENV (``PATH`` aside: the venv stands in for it)."""

    entrypoint: list[str]
    env: dict[str, str]

    def command(self, bin_dir: Path, *args: str) -> list[str]:
        """The entrypoint as the image runs it, resolved in the mirrored venv."""
        return [str(bin_dir / self.entrypoint[0]), *self.entrypoint[1:], *args]

    def environment(self, bin_dir: Path) -> dict[str, str]:
        """The image's ENV over a bare environment, the venv first on PATH."""
        return {**self.env, "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": "/tmp"}


def image_runtime(dockerfile: Path) -> ImageRuntime:
    """The ENTRYPOINT (exec form) and ENV ``k=v`` pairs of the last stage of ``dockerfile``."""
    text = dockerfile.read_text().replace("\\\n", " ")
    final = text.split("\nFROM ")[-1]
    entrypoint: list[str] = []
    env: dict[str, str] = {}
    for line in final.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif keyword == "ENV":
            env.update(pair.split("=", 1) for pair in shlex.split(rest))
    env.pop("PATH", None)
    if not entrypoint:
        raise ValueError(f"{dockerfile}: the final stage has no exec-form ENTRYPOINT")
    return ImageRuntime(entrypoint, env)

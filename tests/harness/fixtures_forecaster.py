"""Pytest fixtures that start the real presage-forecaster over HTTP (see tests/harness/forecaster.py).

Register with ``pytest_plugins = ["tests.harness.fixtures_forecaster"]``. The forecaster's venv is
built on first use (torch and timesfm, about a minute with a warm network) and cached; when it cannot
be built the fixtures fail with pip's output: they never skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from tests.harness.forecaster import (
    ForecasterServer,
    ForecasterUnavailable,
    build_checkpoint,
    ensure_forecaster_venv,
)
from tests.harness.pytest_output import uncaptured


class ForecasterFactory(Protocol):
    def __call__(
        self,
        *options: str,
        model: Path | str | None = None,
        start: bool = True,
        wait_ready: bool = True,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ForecasterServer: ...


@pytest.fixture(scope="session")
def forecaster_python(pytestconfig: pytest.Config) -> Path:
    """The python of the cached forecaster venv (torch + timesfm), built on first use."""
    # The first build downloads a few GB: show its progress live instead of letting pytest hold it.
    with uncaptured(pytestconfig):
        try:
            return ensure_forecaster_venv()
        except ForecasterUnavailable as exc:
            raise pytest.fail.Exception(f"presage-forecaster's venv is unavailable: {exc}", pytrace=False) from None


@pytest.fixture(scope="session")
def tiny_checkpoint(forecaster_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random-weight TimesFM 2.5 checkpoint directory (model.safetensors, config.json)."""
    try:
        return build_checkpoint(forecaster_python, tmp_path_factory.mktemp("timesfm-tiny"))
    except ForecasterUnavailable as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None


def _factory(python: Path, checkpoint: Path, make_dir: Callable[[], Path]) -> Iterator[ForecasterFactory]:
    servers: list[ForecasterServer] = []

    def make(
        *options: str,
        model: Path | str | None = None,
        start: bool = True,
        wait_ready: bool = True,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ForecasterServer:
        server = ForecasterServer(python, model or checkpoint, *options, workdir=make_dir(), env=env, cwd=cwd)
        servers.append(server)
        if start:
            try:
                server.start(wait_ready=wait_ready)
            except ForecasterUnavailable as exc:
                raise pytest.fail.Exception(str(exc), pytrace=False) from None
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def forecaster_factory(
    forecaster_python: Path, tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ForecasterFactory]:
    """Start a forecaster per call (flags as arguments, the tiny checkpoint by default); stopped after the test."""
    yield from _factory(forecaster_python, tiny_checkpoint, lambda: tmp_path_factory.mktemp("forecaster"))


@pytest.fixture(scope="module")
def module_forecaster_factory(
    forecaster_python: Path, tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ForecasterFactory]:
    """Like ``forecaster_factory``, but servers live until the end of the test module."""
    yield from _factory(forecaster_python, tiny_checkpoint, lambda: tmp_path_factory.mktemp("forecaster"))

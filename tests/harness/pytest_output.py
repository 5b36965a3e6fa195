"""Output that pytest must not hold back: a long build's progress, a server's start-up failure."""

from __future__ import annotations

import contextlib

import pytest


def uncaptured(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """While inside, what the test process prints reaches the terminal at once (capture is off)."""
    capture = config.pluginmanager.getplugin("capturemanager")  # absent under -p no:capture
    return capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()

"""presage's commands run with numpy's huge-page advice off unless the environment says otherwise
(presage_scaler/cli/__init__.py): numpy reads the setting once, when first imported, so it is checked in a
fresh interpreter that imports the command line as the ``presage`` script does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SETTING = "NUMPY_MADVISE_HUGEPAGE"
ASK = "import presage_scaler.cli.main, numpy; print(numpy._core.multiarray._get_madvise_hugepage())"


@pytest.mark.parametrize(("outside", "advised"), [(None, "False"), ("1", "True")], ids=["default", "kept"])
def test_the_commands_ask_numpy_for_no_huge_pages_unless_told(outside: str | None, advised: str) -> None:
    env = {name: value for name, value in os.environ.items() if name != SETTING}
    if outside is not None:
        env[SETTING] = outside
    answer = subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == advised

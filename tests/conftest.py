"""Shared pytest setup: the real-server fixtures live in tests/harness.

With pytest-xdist (``tests/run`` runs two workers), the end-to-end tests share one worker, as do
the forecaster's: each group's session stack (KEDA and the HPA on an API server of their own; the
forecaster's environment and model servers) is then started once, while the other worker runs the
rest beside it.

Property-based tests run under a hypothesis profile chosen by ``PRESAGE_FUZZ_PROFILE``: ``default``
(hypothesis' own defaults, seconds per surface, but no per-example deadline: speed is measured in
benchmarks, and a deadline fails an honest example on a machine whose cores are shared) or
``fuzz-long`` (many more examples, for a run opted into on purpose). A fuzz test leaves the number
of examples to the profile.
"""

import os
import sys

# The harness forks server processes (with a preexec_fn) while gRPC servers and channels run in the
# test process; gRPC's fork handlers then occasionally abort the child before it execs (seen as a
# Prometheus "exited with -6 during start-up"). Nothing here needs gRPC in a forked child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.harness.fixtures_prometheus",
    "tests.harness.fixtures_kube",
    "tests.harness.fixtures_forecaster",
]

settings.register_profile("default", deadline=None)
settings.register_profile("fuzz-long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("PRESAGE_FUZZ_PROFILE", "default"))


GROUPED = ("e2e", "forecaster")
"""Test directories whose tests run on one pytest-xdist worker, so their session stack starts once.
Every other test module runs whole on one worker too, so that a module-scoped fixture (a fresh
virtual environment, a tuned trace) is built once rather than once per worker it is spread over."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        if not item.path.is_relative_to(tests):
            continue
        where = item.path.relative_to(tests)
        group = where.parts[0] if where.parts[0] in GROUPED else where.as_posix()
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a pytest-xdist worker with ``--dist loadgroup``, every test must carry its group in its id
    (``…@group``), which is what the scheduler groups by: a pytest/xdist pair that stops renaming
    would otherwise spread the groups silently, and start the end-to-end stack on every worker."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    ungrouped = [item.nodeid for item in session.items if "@" not in item.nodeid]
    if ungrouped:
        message = (
            f"pytest-xdist did not group {len(ungrouped)} tests (e.g. {ungrouped[0]}): "
            "this pytest and pytest-xdist do not work together (see the pin in pyproject.toml)"
        )
        # A worker's exception reaches the terminal only as an INTERNALERROR without this text.
        print(message, file=sys.__stderr__, flush=True)
        raise pytest.UsageError(message)

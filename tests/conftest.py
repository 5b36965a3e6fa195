"""Shared pytest setup: the real-server fixtures live in tests/harness."""

pytest_plugins = [
    "tests.harness.fixtures_prometheus",
    "tests.harness.fixtures_kube",
    "tests.harness.fixtures_forecaster",
]

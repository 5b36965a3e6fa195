"""The scaler image's install steps, mirrored in a fresh virtual environment (no Docker here): a base
``pip install .`` without extras, which runs every command the image runs, ``presage advise`` included,
without pandas or plotly."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from presage_scaler.backtest.extra import PACKAGES
from presage_scaler.tune.in_cluster_advisor import ADVICE_READY
from tests.harness.image_install import image_runtime, imported_from, install_image
from tests.harness.presage_cluster import apply, get, web_demand_scaler
from tests.harness.prometheus import Series
from tests.integration.test_advise_live import events, history

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile.scaler"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding the package installed (non-editable) from only what the Dockerfile copies."""
    return install_image(DOCKERFILE, tmp_path_factory.mktemp("image"))


def test_every_module_imports_from_what_the_image_copies(installed):
    """A module, package data or dependency the Dockerfile or pyproject forgets fails here. The image
    leaves out the backtest extra: modules built on it may miss its packages, never the command line
    (the entrypoint tests below run it) or the backtest command that says how to install them."""
    program = (
        "import importlib, pkgutil, presage_scaler\n"
        "from presage_scaler.backtest.extra import PACKAGES\n"
        "names = [m.name for m in pkgutil.walk_packages(presage_scaler.__path__, 'presage_scaler.')]\n"
        "for name in names:\n"
        "    try: importlib.import_module(name)\n"
        "    except ModuleNotFoundError as err:\n"
        "        if err.name not in PACKAGES: raise\n"
        "        print('needs the extra:', name)\n"
        "print(len(names))"
    )
    result = subprocess.run([installed / "python", "-c", program], capture_output=True, text=True, check=False, cwd="/")
    assert result.returncode == 0, result.stderr
    *needing_extra, count = result.stdout.splitlines()
    assert int(count) > 40
    modules = {line.removeprefix("needs the extra: ") for line in needing_extra}
    assert "presage_scaler.backtest.report" in modules  # the image really is without the extra
    assert not {name for name in modules if name == "presage_scaler.cli" or name.startswith("presage_scaler.cli.")}
    assert "presage_scaler.backtest.extra" not in modules


@pytest.mark.parametrize(
    "command", [["--help"], ["run", "--help"], ["scaledobject", "--help"], ["backtest", "--help"], ["advise", "--help"]]
)
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


def test_installed_cli_prints_its_version(installed):
    """From the installed package's metadata: no checkout (no pyproject.toml) is beside it."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        declared = tomllib.load(handle)["project"]["version"]
    result = subprocess.run([installed / "presage", "--version"], capture_output=True, text=True, check=False, cwd="/")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"presage {declared}\n", "")


def test_installed_cli_generates_the_committed_crds(installed, tmp_path):
    result = subprocess.run(
        [installed / "presage", "crds", "--check", "--out", str(REPO)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_installed_cli_writes_crds_only_where_asked(installed, tmp_path):
    """Installed (not a checkout), ``presage crds`` has no checkout to write into: it asks for --out in
    one line rather than creating crds/, docs/ and charts/ in the directory it runs in."""
    presage = installed / "presage"
    for argv in (["crds"], ["crds", "--check"]):
        result = subprocess.run([presage, *argv], capture_output=True, text=True, check=False, cwd=tmp_path)
        assert result.returncode == 2 and "pass --out DIR" in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []
    written = subprocess.run([presage, "crds", "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "out" / "crds").is_dir() and (tmp_path / "out" / "docs" / "api-reference.md").is_file()


def test_installed_package_does_not_import_from_the_checkout(installed):
    where = imported_from(installed, "presage_scaler")
    assert str(REPO) not in where and "site-packages" in where
    assert sys.prefix not in where


def test_backtest_without_the_extra_says_how_to_install_it(installed, tmp_path):
    """The image carries no pandas or plotly: `presage backtest` says how to get them, in one line."""
    trace = REPO / "examples" / "nab_elb_request_count_5m.csv"
    result = subprocess.run(
        [installed / "presage", "backtest", str(trace), "--per-replica", "20", "--lead-time", "5m", "--out", tmp_path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("presage backtest: pandas and plotly are not installed"), result.stderr
    assert "pip install 'presage-scaler[backtest]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


ADVISE_PATH = (
    "presage_scaler.cli.main",
    "presage_scaler.cli.advise",
    "presage_scaler.tune.in_cluster_advisor",
    "presage_scaler.api.advice_scope",
    "presage_scaler.tune.from_cluster",
    "presage_scaler.tune.tuner",
    "presage_scaler.tune.advice_body",
)
"""What ``presage advise`` runs in the cluster: the command, the advisor and what it reads, tunes and writes
with (each imports the rest of the path)."""


def test_the_in_cluster_advise_path_imports_without_pandas_or_plotly(installed):
    """The base install has neither package (not even importable), and importing every module of the
    advise path, and everything those import, loads neither."""
    program = (
        "import importlib, importlib.util, sys\n"
        f"packages = {list(PACKAGES)!r}\n"
        "print([name for name in packages if importlib.util.find_spec(name) is not None])\n"
        f"for module in {list(ADVISE_PATH)!r}: importlib.import_module(module)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in packages))\n"
        "print(len([name for name in sys.modules if name.startswith('presage_scaler.')]))"
    )
    result = subprocess.run([installed / "python", "-c", program], capture_output=True, text=True, check=False, cwd="/")
    assert result.returncode == 0, result.stderr
    importable, loaded, ours = result.stdout.splitlines()
    assert (importable, loaded) == ("[]", "[]")
    assert int(ours) > 40  # the path really is most of presage


def test_the_installed_advise_advises_a_shadow_scaler_on_a_real_cluster(
    installed, cluster, kube_namespace, backend_name, prometheus_factory
):
    """The base install's ``presage advise``, as the chart's CronJob runs it (the image's entrypoint and
    environment), advises a Shadow scaler without ``spec.advice`` from a real Prometheus and writes its
    ``status.advice`` and AdviceReady Event through a real API server."""
    ns = kube_namespace
    prometheus = prometheus_factory(Series("web_demand", {"job": "web"}, history()))
    scaler = web_demand_scaler("web", prometheus.url, backend_name)
    assert "advice" not in scaler["spec"]
    apply(cluster, scaler, ns)
    runtime = image_runtime(DOCKERFILE)
    result = subprocess.run(
        runtime.command(installed, "advise", "-n", ns, "--warmup", "1d", "--kubeconfig", str(cluster.kubeconfig)),
        env=runtime.environment(installed), capture_output=True, text=True, check=False, timeout=600, cwd="/",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    last = "shard 0 of 1: 1 advised, 0 failed, 0 not due, 0 waiting for history, 0 skipped"
    assert result.stdout.splitlines()[-1] == last, result.stdout
    advice = get(cluster, "predictivescaler", "web", ns)["status"]["advice"]
    assert advice["verdict"] == "Advised" and "error" not in advice, advice
    assert [e["type"] for e in events(cluster, ns, "web") if e["reason"] == ADVICE_READY] == ["Normal"]

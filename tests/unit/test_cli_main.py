"""The ``presage`` command line itself: its version, its help, and how it refuses a flag's value.

Each test calls :func:`presage_scaler.cli.main.main` (or parses with its parser) as the console
script does, and asserts on what a user reads: stdout, the one line on stderr, the exit status.
"""

from __future__ import annotations

import argparse
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from presage_scaler.cli import main as cli
from presage_scaler.cli.main import build_parser, main
from presage_scaler.tune.request import HELD_OUT_FAILED

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "nab_elb_request_count_5m.csv"
USER_COMMANDS = ["backtest", "tune", "advise", "scaledobject", "run"]


def exit_of(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | str | None, str, str]:
    """The status ``presage argv`` ends with, and its stdout and stderr."""
    try:
        code: int | str | None = main(list(argv))
    except SystemExit as exited:  # argparse answers --help, --version and bad flags by exiting
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


# --- version -------------------------------------------------------------------------------------


def test_version_prints_the_installed_version(capsys):
    code, out, err = exit_of(capsys, "--version")
    assert (code, err) == (0, "")
    assert out == f"presage {metadata.version('presage-scaler')}\n"


def test_version_from_a_checkout_that_was_never_installed_says_so(monkeypatch):
    monkeypatch.setattr(cli, "DISTRIBUTION", "presage-scaler-not-installed-under-this-name")
    with (ROOT / "pyproject.toml").open("rb") as handle:
        declared = tomllib.load(handle)["project"]["version"]
    assert cli.version() == f"{declared} (source checkout {ROOT}, not installed)"


# --- help ----------------------------------------------------------------------------------------


def test_user_commands_are_listed_first_and_the_developers_crds_last(capsys):
    code, out, _ = exit_of(capsys, "--help")
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()]
    commands = [name for name in listed if name in subcommands()]
    assert commands == [*USER_COMMANDS, "crds"]
    crds_line = next(line for line in out.splitlines() if line.strip().startswith("crds "))
    assert "developers" in crds_line


@pytest.mark.parametrize("command", [*USER_COMMANDS, "crds"])
def test_every_command_describes_itself_in_its_help(capsys, command):
    description = subcommands()[command].description
    assert description and len(description) > 100, command
    code, out, _ = exit_of(capsys, command, "--help")
    assert code == 0
    assert " ".join(description.split()[:6]) in " ".join(out.split())


def test_run_help_says_what_it_needs_and_serves(capsys):
    _, out, _ = exit_of(capsys, "run", "--help")
    text = " ".join(out.split())
    for needed in ("--kubeconfig, else $KUBECONFIG", "service account", "Lease", "SIGTERM"):
        assert needed in text
    for port in ("--grpc-port, 9090", "--http-port, 8080", "--health-port (8081)"):
        assert port in text


def test_crds_help_is_marked_for_developers(capsys):
    _, out, _ = exit_of(capsys, "crds", "--help")
    assert "For presage's developers" in out


# --- --slo ---------------------------------------------------------------------------------------


def slo_of(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> tuple[float, str]:
    required = [] if flag == "--slo" else ["--slo", "1%"]
    args = build_parser().parse_args(["tune", flag, value, *required, "--out", "x"])
    return getattr(args, flag.removeprefix("--").replace("-", "_")), capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "percent", "meant"), [("0.01", 0.01, "1"), ("0.5", 0.5, "50"), ("0.001", 0.001, "0.1")]
)
def test_a_bare_service_level_below_1_is_a_percentage_with_a_warning(capsys, value, percent, meant):
    slo, err = slo_of(capsys, "--slo", value)
    assert slo == percent
    assert err == (
        f"presage tune: warning: --slo {value} means {value} % (a number without % is a percentage); "
        f"for {meant} % write --slo {meant}%, and write --slo {value}% to keep {value} % without this warning\n"
    )


def test_the_unserved_service_level_warns_the_same_way(capsys):
    slo, err = slo_of(capsys, "--slo-unserved", "0.1")
    assert slo == 0.1
    assert "--slo-unserved 0.1 means 0.1 %" in err and "write --slo-unserved 10%" in err


@pytest.mark.parametrize(("value", "percent"), [("1%", 1.0), ("1", 1.0), ("0.01%", 0.01), ("2.5", 2.5)])
def test_a_service_level_with_a_percent_sign_or_of_1_and_more_is_taken_silently(capsys, value, percent):
    assert slo_of(capsys, "--slo", value) == (percent, "")


def test_tune_help_says_a_bare_number_is_a_percentage(capsys):
    _, out, _ = exit_of(capsys, "tune", "--help")
    assert "a bare number is a percentage too (0.01 is 0.01 %, not 1 %" in " ".join(out.split())


# --- durations whose value starts with a dash ----------------------------------------------------

BACKTEST = ["backtest", str(EXAMPLE), "--per-replica", "20", "--out", "unused"]
TUNE = ["tune", str(EXAMPLE), "--per-replica", "20", "--slo", "1%", "--out", "unused"]
DURATION_FLAGS = [
    (BACKTEST, "--lead-time", "-5m"),
    (BACKTEST, "--warmup", "-1d"),
    (BACKTEST, "--interval", "-1m"),
    (BACKTEST, "--season", "-24h"),
    (BACKTEST, "--resample", "-5m"),
    (BACKTEST, "--step", "-30s"),
    (TUNE, "--lead-time", "-10m"),
    (TUNE, "--warmup", "-7d"),
    (TUNE, "--holdout", "-7d"),
    (TUNE, "--lookback", "-28d"),
    (TUNE, "--step", "-1m"),
    (["advise"], "--deadline", "-10m"),
    (["advise"], "--warmup", "-2d"),
]


@pytest.mark.parametrize(("command", "flag", "value"), DURATION_FLAGS)
@pytest.mark.parametrize("joined", [False, True], ids=["separate", "with="])
def test_a_negative_duration_names_its_flag_and_the_positive_one(capsys, command, flag, value, joined):
    given = [f"{flag}={value}"] if joined else [flag, value]
    code, out, err = exit_of(capsys, *command, *given)
    name = command[0]
    assert (code, out) == (2, "")
    assert err == (
        f"presage {name}: argument {flag}: must be a positive duration such as {value[1:]}; got '{value}' "
        f"(see presage {name} --help)\n"
    )


def test_a_dash_value_that_is_no_duration_still_gets_the_flags_own_refusal(capsys):
    code, _, err = exit_of(capsys, *BACKTEST, "--lead-time", "-soon")
    assert code == 2
    assert "argument --lead-time: must be a positive duration such as 5m; got '-soon'" in err


def test_a_flag_followed_by_another_flag_is_still_missing_its_value(capsys):
    code, _, err = exit_of(capsys, *BACKTEST, "--lead-time", "--no-progress")
    assert code == 2 and "argument --lead-time: expected one argument" in err
    code, _, err = exit_of(capsys, "tune", "--scaler", "-n", "shop", "--slo", "1%", "--out", "x")
    assert code == 2 and "argument --scaler: expected one argument" in err  # -n is tune's own short flag


def test_values_that_start_with_a_dash_reach_their_flags():
    args = build_parser().parse_args([*BACKTEST, "--lead-time", "5m", "--query", "-rate(x[5m])"])
    assert args.query == "-rate(x[5m])"
    assert build_parser().parse_args(["scaledobject", "-f", "-", "web"]).filename == "-"  # stdin
    args = build_parser().parse_args(["backtest", "--out", "o", "--", "-trace.csv"])
    assert (args.out, args.trace) == (Path("o"), Path("-trace.csv"))  # after "--", nothing is attached


# --- --out ---------------------------------------------------------------------------------------

RUNS = {
    "backtest": ["backtest", str(EXAMPLE), "--per-replica", "20", "--lead-time", "5m", "--warmup", "1d"],
    "tune": ["tune", str(EXAMPLE), "--per-replica", "20", "--lead-time", "5m", "--slo", "1%", "--warmup", "1d"],
}


@pytest.mark.parametrize("command", RUNS)
def test_an_out_that_is_a_file_is_refused_before_the_run(capsys, tmp_path, command):
    path = tmp_path / "passwd"
    path.write_text("root:x:0:0\n")
    code, out, err = exit_of(capsys, *RUNS[command], "--no-progress", "--out", str(path))
    assert (code, out) == (2, "")
    assert err == f"presage {command}: --out {path} is a file; give a directory (it is created if missing)\n"
    assert path.read_text() == "root:x:0:0\n"


@pytest.mark.parametrize("command", RUNS)
def test_an_out_under_a_file_is_refused_naming_the_file(capsys, tmp_path, command):
    path = tmp_path / "passwd"
    path.write_text("")
    code, _, err = exit_of(capsys, *RUNS[command], "--no-progress", "--out", str(path / "results"))
    assert code == 2
    assert err == f"presage {command}: --out {path / 'results'}: {path} is a file, not a directory; give a directory\n"


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs sysfs, where nobody may create a directory")
def test_an_out_where_writing_is_not_allowed_says_so(capsys):
    """In sysfs even root may not create a directory: refused up front for a user without write
    permission there, or when the directory cannot be created after the run (root)."""
    out = Path("/sys/presage-test-out/results")
    code, _, err = exit_of(capsys, *RUNS["backtest"], "--no-progress", "--out", str(out))
    assert code == 2
    assert err.startswith(f"presage backtest: --out {out}: ") and err.count("\n") == 1, err
    assert "no permission" in err and err.endswith("give a directory you can write to\n"), err


def test_tune_after_a_backtest_with_the_same_out_overwrites_none_of_its_files(capsys, tmp_path):
    """The README's ELB example: a backtest, then `presage tune` "with the same arguments"."""
    shared = tmp_path / "out-elb"
    flags = ["--per-replica", "20", "--lead-time", "5m", "--warmup", "2d", "--no-progress", "--out", str(shared)]
    assert main(["backtest", str(EXAMPLE), *flags]) == 0
    backtest = {path.name: path.read_bytes() for path in shared.iterdir()}
    assert set(backtest) == {"summary.json", "decisions.csv", "report.html"}
    code, out, _ = exit_of(capsys, "tune", str(EXAMPLE), *flags, "--slo", "1%", "--jobs", "1")
    assert code in (0, HELD_OUT_FAILED)  # whether the choice held up held out is test_tune's matter
    assert {path.name for path in shared.iterdir()} == {*backtest, "spec.yaml", "tune.json", "tune.html"}
    assert {name: (shared / name).read_bytes() for name in backtest} == backtest
    assert f"wrote {shared / 'spec.yaml'}, {shared / 'tune.json'} and {shared / 'tune.html'}" in out


def test_crds_out_that_is_a_file_is_refused(capsys, tmp_path):
    path = tmp_path / "crds.yaml"
    path.write_text("")
    code, out, err = exit_of(capsys, "crds", "--out", str(path))
    assert (code, out) == (2, "")
    assert err == f"presage crds: --out {path} is a file; give a directory (it is created if missing)\n"
    assert path.read_text() == ""

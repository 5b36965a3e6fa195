"""``presage advise``'s flags: ``JOB_COMPLETION_INDEX`` is read only when advise runs, and a value
that is not a shard index is refused there in one line (exit 2) rather than taken as shard 0; every
other command and ``--help`` ignore it. ``--deadline`` is a positive duration."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from presage_scaler.cli.advise import DEFAULT_DEADLINE, INDEX_VARIABLE
from presage_scaler.cli.main import build_parser

ODD_INDEXES = ["²", "٣", "-1", "1.0", " 1", "1 ", "", "x", "0x1", "1" * 10, "9" * 5000, "１"]


@pytest.mark.parametrize("raw", ["0", "7", "123456789"])
def test_an_index_in_ascii_digits_is_the_default_shard(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(INDEX_VARIABLE, raw)
    args = build_parser().parse_args(["advise"])
    assert args.shard == int(raw)


def test_without_the_variable_the_shard_is_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INDEX_VARIABLE, raising=False)
    assert build_parser().parse_args(["advise"]).shard == 0


@pytest.mark.parametrize("raw", ODD_INDEXES)
def test_an_odd_index_is_refused_by_advise_and_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raw: str
) -> None:
    monkeypatch.setenv(INDEX_VARIABLE, raw)
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["advise"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "is not a shard index" in err and INDEX_VARIABLE in err, err
    assert len(err.splitlines()) == 1, err
    # --shard given on the command line wins over the variable.
    assert build_parser().parse_args(["advise", "--shard", "1", "--shards", "2"]).shard == 1


@pytest.mark.parametrize("raw", ["²", "9" * 5000])
@pytest.mark.parametrize(
    "command", [["--help"], ["advise", "--help"], ["tune", "--help"], ["backtest", "--help"], ["crds", "--help"]]
)
def test_an_odd_index_stops_no_help_and_no_other_command(raw: str, command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", *command],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", INDEX_VARIABLE: raw},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "usage: presage" in result.stdout


def test_deadline_is_a_positive_duration(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["advise"]).deadline == DEFAULT_DEADLINE
    assert build_parser().parse_args(["advise", "--deadline", "90s"]).deadline == timedelta(seconds=90)
    for raw in ("0s", "soon", "-5m"):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(["advise", "--deadline", raw])
        assert exited.value.code == 2
        assert "--deadline" in capsys.readouterr().err

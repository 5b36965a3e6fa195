"""What the previous advice says about the next: the spec it advised is read back from its patch exactly,
kept over a new choice the part chosen on cannot tell apart from it, never advised again once it failed
on live demand, and the live record it earned is kept while the same patch is advised."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from presage_scaler.api.advice_patch import patch_digest
from presage_scaler.api.quantities import format_duration
from presage_scaler.tune.advice_body import advice_status, spec_patch
from presage_scaler.tune.held_out import check
from presage_scaler.tune.output import backend_name, forecaster_changed
from presage_scaler.tune.previous_advice import (
    CHOSEN_CAPACITY,
    PreviousAdvice,
    advise_after,
    previous_advice,
    reconsider,
)
from presage_scaler.tune.search import ALIKE, choose
from presage_scaler.tune.tuner import Trial, TuneResult, tune
from presage_scaler.tune.verdict import Verdict, advise
from tests.unit.test_advice_status import NOW, SPEC
from tests.unit.test_tune import _held_up, _week, _with, setup_for
from tests.unit.test_tune_parts import daily_trace


@pytest.fixture(scope="module")
def result() -> TuneResult:
    """A run chosen on a week whose choice held up held out (so that it is advised)."""
    return _week(_held_up(tune(daily_trace(9, seed=3), setup_for(spec=SPEC))))


def stored_advice(result: TuneResult, trial: Trial, verdict: str = "Advised") -> dict[str, object]:
    """``status.advice`` as presage advise writes it when ``trial`` is the choice."""
    chosen = replace(result, chosen=trial)
    patch = json.dumps(spec_patch(chosen, SPEC), separators=(",", ":"), sort_keys=True)
    stored: dict[str, object] = {"verdict": verdict, "patch": patch}
    if forecaster_changed(chosen):
        forecaster = trial.knobs.forecaster
        stored["forecastBackend"] = {
            "name": backend_name(trial.knobs),
            "season": format_duration(forecaster.season),
            "cycles": forecaster.cycles,
        }
    return stored


def cheapest_other(result: TuneResult) -> Trial:
    """A candidate other than the choice and the start that meets the level in-sample."""
    return next(
        t
        for t in sorted(result.trials, key=lambda t: t.in_sample.replica_hours)
        if t.knobs not in (result.chosen.knobs, result.default.knobs) and result.slo.met(t.in_sample)
    )


def test_the_spec_an_advice_advised_is_read_back_from_its_patch(result: TuneResult) -> None:
    trials = [t for t in result.trials if t.knobs != result.default.knobs]
    assert any(forecaster_changed(replace(result, chosen=t)) for t in trials)
    for trial in trials[:: max(1, len(trials) // 60)]:
        previous = previous_advice(stored_advice(result, trial), SPEC, None)
        assert previous is not None and previous.knobs == trial.knobs, trial.knobs
    assert previous_advice({"verdict": "Keep"}, SPEC, None) is None
    assert previous_advice({"verdict": "Advised", "patch": "{"}, SPEC, None) is None
    assert previous_advice({"verdict": "Advised", "patch": '{"spec":{"signal":null}}'}, SPEC, None) is None
    assert previous_advice("not an advice", SPEC, None) is None
    nested = '{"spec":' + '{"a":' * 5000 + "1" + "}" * 5001  # deeper than JSON parses
    assert previous_advice({"verdict": "Advised", "patch": nested}, SPEC, None) is None


def test_the_previous_advice_is_kept_while_the_part_chosen_on_cannot_tell_it_from_the_new_choice(
    result: TuneResult,
) -> None:
    other = cheapest_other(result)
    limit = result.chosen.in_sample.replica_hours * (1 + ALIKE)
    alike = _with(_with(other, "in_sample", replica_hours=limit), "held_out", under_pct=0.5)
    ran = replace(result, trials=tuple(alike if t.knobs == other.knobs else t for t in result.trials))
    previous = PreviousAdvice(knobs=other.knobs, digest="0123456789abcdef", failed_live=False, spec=SPEC)

    kept = reconsider(ran, previous)
    assert kept.result.chosen == alike and kept.note is not None and "is kept" in kept.note
    assert CHOSEN_CAPACITY not in kept.result.held_out_capacity  # the report's, for the replaced choice
    _, advice = advise_after(ran, previous)
    assert advice.message.startswith(kept.note)

    dearer = _with(alike, "held_out", replica_hours=result.default.held_out.replica_hours * 1.01)
    assert check(replace(ran, chosen=dearer)).dearer  # kept, it would be a HeldOutFailed advice
    for changed in (
        _with(alike, "in_sample", replica_hours=limit * 1.001),  # dearer than ALIKE in-sample
        _with(alike, "held_out", under_pct=1.5),  # missed the level held out
        _with(alike, "in_sample", under_pct=50.0),  # missed it in-sample
        dearer,  # cost more held out than the starting spec it claims to save on
    ):
        trials = tuple(changed if t.knobs == other.knobs else t for t in result.trials)
        assert reconsider(replace(result, trials=trials), previous).result.chosen == result.chosen
    assert reconsider(result, None).result is result


def test_an_advice_that_failed_live_is_not_advised_again(result: TuneResult) -> None:
    failed = PreviousAdvice(knobs=result.chosen.knobs, digest="0123456789abcdef", failed_live=True, spec=SPEC)
    again = reconsider(result, failed)
    assert again.result.chosen.knobs != failed.knobs
    rest = [(t.knobs, t.in_sample) for t in result.trials if t.knobs != failed.knobs]
    assert again.result.chosen.knobs == choose(rest, result.default.knobs, result.slo)
    assert again.note is not None and "missed the service level on live demand" in again.note
    _, advice = advise_after(result, failed)
    assert advice.message.startswith(again.note)
    # The starting spec is never left out: it is what the user runs.
    assert reconsider(result, replace(failed, knobs=result.default.knobs)).result is result


def test_a_failed_advice_is_left_out_while_its_record_is_kept_after_an_advice_of_no_change(
    result: TuneResult,
) -> None:
    """After a FailedLive advice the next one advised no change, which keeps the failed live record: the
    advice after that still leaves out the spec the record names, by its patch's digest."""
    stored = stored_advice(result, result.chosen, verdict="FailedLive")
    live = {"verdict": "FailedLive", "patchDigest": patch_digest(str(stored["patch"]))}
    kept = advice_status(
        result, replace(advise(result), verdict=Verdict.KEEP), SPEC, "1%", 5, NOW, {**stored, "live": live}
    )
    assert kept["patch"] is None and "live" not in kept  # the failed record stays as the controller wrote it
    after_keep = {**kept, "live": live}
    previous = previous_advice(after_keep, SPEC, None)
    assert previous is not None and previous.failed_live and previous.knobs is None
    again = reconsider(result, previous)
    assert again.result.chosen.knobs != result.chosen.knobs and again.note is not None
    assert again.result.chosen == reconsider(result, previous_advice(stored, SPEC, None)).result.chosen
    # A record that did not fail, or names no candidate of this run, changes nothing.
    assert previous_advice({**kept, "live": {**live, "verdict": "Proven"}}, SPEC, None) is None
    unknown = previous_advice({**kept, "live": {**live, "patchDigest": "0123456789abcdef"}}, SPEC, None)
    assert unknown is not None and reconsider(result, unknown).result is result


def test_the_same_patch_keeps_the_live_record_and_its_verdict_and_another_resets_it(result: TuneResult) -> None:
    advice = advise(result)
    assert advice.verdict == Verdict.ADVISED
    body = advice_status(result, advice, SPEC, "1%", 4, NOW)
    assert body["live"] is None and "applied" not in body  # the controller's field is never written here
    proven = {**body, "verdict": "Proven", "live": {"verdict": "Proven"}}
    again = advice_status(result, advice, SPEC, "1%", 5, NOW, proven)
    assert "live" not in again and "applied" not in again  # left as the controller has it
    assert (
        again["verdict"] == "Proven"
        and again["message"] == f"Proven on live demand (status.advice.live). {advice.message}"
    )
    proving = advice_status(result, advice, SPEC, "1%", 5, NOW, {**body, "live": {"verdict": "Proving"}})
    assert "live" not in proving and proving["verdict"] == "Advised"
    other = {**proven, "patch": '{"spec":{"policy":{"targetQuantile":"0.5"}}}'}
    reset = advice_status(result, advice, SPEC, "1%", 5, NOW, other)
    assert reset["live"] is None and reset["verdict"] == "Advised"

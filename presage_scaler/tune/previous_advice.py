"""What the previous advice says about the next: a daily re-advice goes on proving the spec it advised
unless the new figures tell it apart, and never advises again a spec that failed on live demand.

The controller proves an advice on the demand that comes (``status.advice.live``), which takes
``spec.advice.proveFor``; a re-advice whose patch differs starts that proof over. So, on a tuning run
(:class:`~presage_scaler.tune.tuner.TuneResult`) and the scaler's previous ``status.advice``
(:class:`PreviousAdvice`, an input like the trace, so a run that reuses earlier work chooses as one that
does not):

* **FailedLive**: the spec it advised (the stored spec with its patch merged in) is left out of the
  choice, which is made again among the other candidates by the same rule
  (:func:`~presage_scaler.tune.search.choose`); the message says the previous advice missed live. An
  advice that then advises no change keeps the failed record (``status.advice.live``, whose
  ``patchDigest`` names the patch), so the advice after it still leaves that spec out: the candidate
  whose patch on the same stored spec has that digest.
* **Otherwise**, the spec it advised is chosen instead of the new choice when it still meets the service
  level in-sample (with its margin for chance) and held out (as measured) and costs at most ALIKE more
  replica-hours than the new choice in-sample: the part chosen on cannot rank candidates that close
  (:mod:`~presage_scaler.tune.search`), and switching between them would restart the proof every day.

A previous advice whose spec is not a candidate of this run (the space moved with the spec or the trace)
changes nothing. The rule reads held-out figures, which the search itself never does: it only decides
between a choice and a spec already advised, both checked held out before they are advised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from presage_scaler.api.advice_patch import advised_wire, patch_digest
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.config import backend_spec
from presage_scaler.tune.advice_body import patch_text, spec_patch
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.held_out import check
from presage_scaler.tune.knobs import Knobs, knobs_of
from presage_scaler.tune.search import ALIKE, choose
from presage_scaler.tune.tuner import Trial, TuneResult
from presage_scaler.tune.verdict import Advice, advise

FAILED_LIVE = "FailedLive"
ADVISING = ("Advised", "Proven", FAILED_LIVE)
"""The verdicts whose advice has a patch."""
CHOSEN_CAPACITY = "chosen"
"""The key of :attr:`TuneResult.held_out_capacity` that holds the chosen spec's (for the report)."""


@dataclass(frozen=True)
class PreviousAdvice:
    """The spec the previous advice advised, and whether it failed on live demand."""

    knobs: Knobs | None
    """None where only the failed record of it is left (``status.advice.live`` FailedLive, kept while the
    advice after it advised no change): ``digest`` then names it among a run's candidates."""
    digest: str
    """The digest of its patch (``status.advice.live.patchDigest``)."""
    failed_live: bool
    spec: dict[str, Any]
    """The stored spec its patch applies to."""


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def previous_advice(advice: object, spec: object, backend: dict[str, Any] | None) -> PreviousAdvice | None:
    """The previous advice of a scaler whose ``status.advice`` is ``advice``, stored spec ``spec`` and
    ForecastBackend spec ``backend`` (all as stored, of any shape); None when it advised no change, or
    its patch no longer makes a spec that can be tuned."""
    status = _mapping(advice)
    patch, forecaster = status.get("patch"), status.get("forecastBackend")
    if not isinstance(spec, dict):
        return None
    if status.get("verdict") not in ADVISING or not isinstance(patch, str):
        return _failed_record(status, spec)
    if isinstance(forecaster, dict):  # the advised SeasonalNaive, which need not exist yet
        backend = {"type": "SeasonalNaive", "seasonalNaive": {k: forecaster.get(k) for k in ("season", "cycles")}}
    try:
        advised = parse(PredictiveScalerSpec, advised_wire(spec, patch), path="spec")
        knobs = knobs_of(advised, backend_spec(backend))
    except (SpecError, TuneError, RecursionError):  # RecursionError: a patch nested past what JSON parses
        return None
    return PreviousAdvice(knobs, patch_digest(patch), status.get("verdict") == FAILED_LIVE, spec)


def _failed_record(status: dict[str, Any], spec: dict[str, Any]) -> PreviousAdvice | None:
    """The failed advice a patchless ``status.advice`` still holds the live record of; None when none."""
    live = _mapping(status.get("live"))
    digest = live.get("patchDigest")
    if live.get("verdict") != FAILED_LIVE or not isinstance(digest, str):
        return None
    return PreviousAdvice(None, digest, True, spec)


def _named(result: TuneResult, previous: PreviousAdvice) -> Knobs | None:
    """The candidate whose advice would have the patch ``previous.digest`` names (on the same stored spec);
    None when none would."""
    for trial in result.trials:
        patch = spec_patch(replace(result, chosen=trial), previous.spec)
        if patch is not None and patch_digest(patch_text(patch)) == previous.digest:
            return trial.knobs
    return None


def _with_choice(result: TuneResult, trial: Trial) -> TuneResult:
    """``result`` with ``trial`` chosen; the report's held-out capacity of the choice it replaces is left
    out (it is not known for the new one)."""
    if trial == result.chosen:
        return result
    capacity = {name: value for name, value in result.held_out_capacity.items() if name != CHOSEN_CAPACITY}
    return replace(result, chosen=trial, held_out_capacity=capacity)


def _previous_trial(result: TuneResult, previous: PreviousAdvice) -> Trial | None:
    if previous.knobs is None:
        return None
    return next((trial for trial in result.trials if trial.knobs == previous.knobs), None)


def without_failed(result: TuneResult, failed: Knobs) -> TuneResult:
    """``result`` chosen again without the candidate ``failed`` (the starting spec always stays)."""
    start = result.default.knobs
    kept = [trial for trial in result.trials if trial.knobs != failed or trial.knobs == start]
    knobs = choose([(trial.knobs, trial.in_sample) for trial in kept], start, result.slo)
    return _with_choice(result, next(trial for trial in kept if trial.knobs == knobs))


def still_alike(result: TuneResult, trial: Trial) -> bool:
    """Whether ``trial`` (the previously advised spec) meets the service level in-sample, passes the
    held-out check as the choice (:func:`~presage_scaler.tune.held_out.check`: met the level there and
    cost no more than the starting spec where it claims to save, so that keeping it is still advice),
    and costs at most ALIKE more than the choice in-sample."""
    limit = result.chosen.in_sample.replica_hours * (1 + ALIKE)
    return (
        result.slo.met(trial.in_sample)
        and not check(replace(result, chosen=trial)).failed
        and trial.in_sample.replica_hours <= limit
    )


@dataclass(frozen=True)
class Reconsidered:
    """A tuning run's result after the previous advice was weighed, and the line that says how."""

    result: TuneResult
    note: str | None
    """What the previous advice changed, to put before the verdict's message; None when nothing."""


def reconsider(result: TuneResult, previous: PreviousAdvice | None) -> Reconsidered:
    """``result`` with the choice the previous advice calls for (module docstring)."""
    if previous is None:
        return Reconsidered(result, None)
    if previous.failed_live:
        failed = previous.knobs if previous.knobs is not None else _named(result, previous)
        if failed is None or failed == result.default.knobs:
            return Reconsidered(result, None)
        note = "The previous advice missed the service level on live demand (FailedLive), so it is not advised again."
        return Reconsidered(without_failed(result, failed), note)
    trial = _previous_trial(result, previous)
    if trial is None or trial == result.chosen or not still_alike(result, trial):
        return Reconsidered(result, None)
    note = (
        f"The previous advice is kept: it still meets the service level in-sample and held out, for at most "
        f"{ALIKE:.0%} more replica-hours in-sample than the new choice, which the part chosen on cannot tell "
        "apart, so its proof on live demand goes on."
    )
    return Reconsidered(_with_choice(result, trial), note)


def advise_after(result: TuneResult, previous: PreviousAdvice | None) -> tuple[TuneResult, Advice]:
    """The verdict (:func:`~presage_scaler.tune.verdict.advise`) on ``result`` reconsidered after the
    previous advice, and that result; the verdict's message says first what the previous advice changed."""
    reconsidered = reconsider(result, previous)
    advice = advise(reconsidered.result)
    if reconsidered.note is not None:
        advice = replace(advice, message=f"{reconsidered.note} {advice.message}")
    return reconsidered.result, advice

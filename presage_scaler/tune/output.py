"""What ``presage tune`` writes: spec.yaml (the chosen spec, and what to do with it), tune.json (every
candidate) and the terminal table."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from presage_scaler.api.kinds import API_VERSION, FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.config import backend_spec
from presage_scaler.backtest.runner import percent
from presage_scaler.tune.held_out import check
from presage_scaler.tune.knobs import Knobs
from presage_scaler.tune.minimal import minimal
from presage_scaler.tune.search import ALIKE, CONFIDENCE, Figures, rate_bound
from presage_scaler.tune.split import RECENT
from presage_scaler.tune.trigger import UTILIZATIONS
from presage_scaler.tune.tuner import Outcome, Trial, TriggerTrial, TuneResult
from presage_scaler.tune.verdict import (
    Advice,
    Verdict,
    advise,
    held_out_line,
    history_line,
    nothing_met_line,
    undecided_line,
)

DEFAULT_NAME = "tuned"
"""The PredictiveScaler's name when the starting spec came without metadata."""


def backend_name(knobs: Knobs) -> str:
    """A ForecastBackend name that says what it is, e.g. ``seasonal-naive-168h-x3``."""
    return f"seasonal-naive-{format_duration(knobs.forecaster.season)}-x{knobs.forecaster.cycles}".lower()


def forecaster_changed(result: TuneResult) -> bool:
    """Whether the chosen spec needs another ForecastBackend than the starting spec's: SeasonalNaive's
    season or cycles differ (the history the signal reads is a field of the scaler)."""
    chosen, start = result.chosen.knobs.forecaster, result.default.knobs.forecaster
    return (chosen.season, chosen.cycles) != (start.season, start.cycles)


def tuned_wire(result: TuneResult, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` (a PredictiveScaler spec's wire form) with the chosen knobs set, pointed at the chosen
    ForecastBackend (:func:`backend_name`) only when :func:`forecaster_changed`."""
    knobs = result.chosen.knobs
    spec = knobs.spec_wire(base)
    if forecaster_changed(result):
        spec.setdefault("forecast", {})["backendRef"] = backend_name(knobs)
    return spec


@dataclass(frozen=True)
class StartingSpec:
    """The starting spec as the user has it, for spec.yaml to say the chosen spec in its terms."""

    spec: dict[str, Any] | None = None
    """Its wire form (``--spec``'s, or the stored object's with ``--scaler``); None when it was made
    from flags, its target and query then placeholders."""
    stored: bool = False
    """Read from the API server, which fills in every default: its fields are not the user's, only its
    spelling of their values is."""


def manifests(result: TuneResult, metadata: dict[str, Any], start: StartingSpec) -> list[dict[str, Any]]:
    """The objects to apply for the chosen spec: the PredictiveScaler in its fewest fields
    (:func:`presage_scaler.tune.minimal.minimal`: the starting spec's own fields, those tuning changed,
    and ``mode``), after a ForecastBackend only when the forecaster changed (the scaler then refers to
    it by name, so ``presage backtest --spec`` on the same file replays the same forecasts)."""
    spec = minimal(
        PredictiveScalerSpec,
        tuned_wire(result, result.base_wire),
        literal=start.spec,
        keep=None if start.stored else start.spec,
        always=(("mode",),),
    )
    scaler_metadata = {key: metadata[key] for key in ("name", "namespace") if key in metadata}
    scaler = {
        "apiVersion": API_VERSION,
        "kind": PREDICTIVE_SCALER.name,
        "metadata": scaler_metadata or {"name": DEFAULT_NAME},
        "spec": spec,
    }
    if not forecaster_changed(result):
        return [scaler]
    knobs = result.chosen.knobs
    backend = {
        "apiVersion": API_VERSION,
        "kind": FORECAST_BACKEND.name,
        "metadata": {"name": backend_name(knobs)},
        "spec": knobs.forecaster.backend_wire(),
    }
    return [backend, scaler]


def judged(figures: Figures) -> str:
    """How the in-sample figures were judged: with the margin their number of spells needs, over the
    whole part and over its last RECENT."""
    confidence = f"what the rate could be with {CONFIDENCE:.0%} confidence"
    if figures.spells:
        text = (
            f"in-sample under-provisioned in {_spells(figures.spells)}: judged at {figures.under_bound_pct:.2f} % "
            f"({figures.margin:.2f}×, {confidence})"
        )
    else:
        text = "never under-provisioned in-sample"
        if figures.under_bound_pct:
            text += f": judged at {figures.under_bound_pct:.2f} % ({rate_bound(0):.1f} one-step spells, {confidence})"
    if (recent := figures.recent) is not None:
        text += f"; over its last {format_duration(RECENT)}: {recent.under_pct:.2f} %" + (
            f" in {_spells(recent.spells)}" if recent.spells else ""
        )
        if recent.under_bound_pct:
            text += f", judged at {recent.under_bound_pct:.2f} %"
    return text


def spread(values: list[float], unit: str, digits: int) -> str:
    """The range of ``values`` and their median, e.g. ``0.69–1.52 % (median 1.17 %)``."""
    low, middle, high = (f"{value:.{digits}f}{unit}" for value in (min(values), median(values), max(values)))
    return f"{low}–{high} (median {middle})"


def alike_line(result: TuneResult) -> str | None:
    """What the candidates nearly as cheap as the chosen one did held out (:attr:`TuneResult.alike`);
    None when no other candidate was."""
    trials = result.alike
    if len(trials) < 2:
        return None
    under = spread([t.held_out.under_pct for t in trials], " %", 2)
    cost = spread([t.held_out.cost_vs_oracle for t in trials], "x", 2)
    others = len(trials) - 1
    return (
        f"{others} other candidate{'s' if others > 1 else ''} met it in-sample for at most {ALIKE:.0%} "
        f"more replica-hours; held out, these and the chosen spec were {under} under-provisioned at {cost} the "
        "oracle"
    )


def _spells(count: int) -> str:
    return f"{count} spell" if count == 1 else f"{count} spells"


def _figures_line(figures: Figures) -> str:
    return (
        f"{figures.under_pct:.2f} % under-provisioned, {figures.unserved_pct:.3f} % unserved, "
        f"{figures.cost_vs_oracle:.2f}x the oracle"
    )


def _wrapped(text: str) -> list[str]:
    return [f"# {line}" for line in textwrap.wrap(text, width=98, break_on_hyphens=False)]


def _what_to_do(result: TuneResult, advice: Advice) -> list[str]:
    """The header's lines that say what to do with the file, by the verdict: apply it only when advised."""
    if advice.verdict == Verdict.ADVISED:
        backend = " (the ForecastBackend is cluster-scoped)" if forecaster_changed(result) else ""
        return [f"# Apply: kubectl apply -f spec.yaml{backend}; mode stays as it was."]
    if advice.verdict == Verdict.KEEP:
        return ["# Nothing to apply: the starting spec is already the choice, and this file is it."]
    return _wrapped(
        "NOT ADVISED, nothing to apply: keep the starting spec. This file holds the chosen candidate only to "
        "read and to replay; do not apply it."
    )


def _replay(result: TuneResult) -> str:
    """How to replay the file: the starting ForecastBackend's file too when the file holds no backend and
    the starting one is not the default SeasonalNaive (which replays without one)."""
    start = result.default.knobs.forecaster
    default = backend_spec(None).seasonal_naive_or_default
    if forecaster_changed(result) or (start.season, start.cycles) == (default.season, default.cycles):
        return "# Replay: presage backtest TRACE --spec spec.yaml"
    return "# Replay: presage backtest TRACE --spec spec.yaml --backend-spec BACKEND (the starting ForecastBackend)"


def write_spec(result: TuneResult, metadata: dict[str, Any], path: Path, start: StartingSpec) -> None:
    """spec.yaml: the chosen objects (:func:`manifests`) under a header that says what they achieved and
    the one thing to do with them, by the verdict (:func:`presage_scaler.tune.verdict.advise`): apply
    them when advised; otherwise nothing to apply, the file holding the starting spec (Keep) or the
    chosen candidate marked not advised, to read and to replay. Written whatever the verdict, so that
    every run leaves the same files and its choice can always be replayed."""
    chosen, advice = result.chosen, advise(result)
    lines = [
        f"# presage tune: the cheapest policy found with {result.slo.describe()}",
        f"# {result.split.describe()}.",
        f"# In-sample: {_figures_line(chosen.in_sample)}.",
        f"# Held out:  {_figures_line(chosen.held_out)}.",
    ]
    if not result.met:
        lines.append("# No candidate met the service level in-sample: this is the least under-provisioned one.")
    lines += _wrapped(advice.message)
    if (failed := check(result).message) is not None and failed not in advice.message:
        lines += _wrapped(failed)
    lines += _what_to_do(result, advice)
    if start.spec is None:
        lines.append("# scaleTargetRef and signal.prometheus are placeholders: set them to your workload and query.")
    lines.append(_replay(result))
    body = yaml.safe_dump_all(manifests(result, metadata, start), sort_keys=False, explicit_start=True)
    path.write_text("\n".join(lines) + "\n" + body)


def utilization(trial: TriggerTrial) -> str:
    """A seasonal trigger's target utilization as a percentage, e.g. ``75%``."""
    return str(percent(trial.utilization))


def trigger_line(result: TuneResult) -> str:
    """What the seasonal trigger tuned on the same in-sample part did held out, beside the chosen spec."""
    trigger, chosen = result.trigger, result.chosen.held_out
    grid = f"{percent(min(UTILIZATIONS))}–{percent(max(UTILIZATIONS))}"
    how = (
        f"the cheapest of {grid} that met the service level in-sample"
        if trigger.met
        else f"the least under-provisioned of {grid} in-sample, where none met the service level"
    )
    held = trigger.chosen.held_out
    return (
        f"seasonal trigger on last week's demand, tuned: {utilization(trigger.chosen)} target utilization (as set: "
        f"{utilization(trigger.asked)}), {how}; held out, {held.under_pct:.2f} % under-provisioned at "
        f"{held.cost_vs_oracle:.2f}x the oracle (the chosen spec: {chosen.under_pct:.2f} % at "
        f"{chosen.cost_vs_oracle:.2f}x)"
    )


def _trigger_trial(trial: TriggerTrial, result: TuneResult) -> dict[str, Any]:
    return {
        "utilization": utilization(trial),
        "meets_slo": result.slo.met(trial.in_sample),
        "in_sample": trial.in_sample.as_dict(),
        "held_out": trial.held_out.as_dict(),
    }


def _trial(trial: Trial, result: TuneResult) -> dict[str, Any]:
    return {
        "knobs": trial.knobs.as_dict(),
        "meets_slo": result.slo.met(trial.in_sample),
        "in_sample": trial.in_sample.as_dict(),
        "held_out": trial.held_out.as_dict(),
    }


def document(result: TuneResult) -> dict[str, Any]:
    """The content of tune.json."""
    plan = result.plan
    return {
        "trace": result.trace.source,
        "parameters": {
            "trace_step": format_duration(result.trace.step),
            "resolution": format_duration(plan.signal.step),
            "interval": format_duration(plan.schedule.every * result.trace.step),
            "lead_time": format_duration(plan.lead.value),
            "boot_delay": format_duration(plan.schedule.lead * result.trace.step),
            "warmup": format_duration(plan.warmup),
            "per_replica": plan.per_replica,
        },
        "slo": {"under_provisioned_pct": result.slo.under_pct, "unserved_pct": result.slo.unserved_pct},
        "split": result.split.as_dict(),
        "met": result.met,
        "held_out_check": check(result).as_dict(),
        "advice": advise(result).as_dict(),
        "default_is_best": result.chosen.knobs == result.default.knobs,
        "alike": {
            "within_pct": 100 * ALIKE,
            "candidates": [trial.knobs.as_dict() for trial in result.alike],
        },
        "chosen": _trial(result.chosen, result),
        "default": _trial(result.default, result),
        "reactive": {"in_sample": result.reactive.in_sample.as_dict(), "held_out": result.reactive.held_out.as_dict()},
        "seasonal_trigger": _trigger_trial(result.trigger.asked, result),
        "seasonal_trigger_tuned": _trigger_trial(result.trigger.chosen, result),
        "seasonal_trigger_candidates": [_trigger_trial(trial, result) for trial in result.trigger.trials],
        "candidates": [_trial(trial, result) for trial in result.trials],
        "forecasts": result.forecasts,
        "runtime_seconds": result.seconds,
    }


def write_document(result: TuneResult, path: Path) -> None:
    path.write_text(json.dumps(document(result), indent=2) + "\n")


def _changes(result: TuneResult) -> str:
    chosen, default = result.chosen.knobs.as_dict(), result.default.knobs.as_dict()
    return ", ".join(
        f"{name} {value}" + ("" if value == default[name] else f" (was {default[name]})")
        for name, value in chosen.items()
    )


def verdict(result: TuneResult) -> str:
    """The one sentence that says what to do."""
    if not result.met:
        return f"{nothing_met_line(result)} spec.yaml holds the least under-provisioned candidate."
    if result.chosen.knobs == result.default.knobs:
        return f"The starting spec already meets {result.slo.describe()} at the least cost found: nothing to change."
    saved = 1.0 - result.chosen.in_sample.replica_hours / result.default.in_sample.replica_hours
    if result.slo.met(result.default.in_sample):
        return f"The chosen spec meets it with {saved:.0%} fewer replica-hours than the starting spec in-sample."
    return "The starting spec does not meet it in-sample; the chosen spec is the cheapest one found that does."


def compared(result: TuneResult) -> list[tuple[str, Outcome]]:
    """The policies the table and the report compare, by name."""
    return [
        ("chosen", result.chosen),
        ("starting spec", result.default),
        ("reactive HPA", result.reactive),
        ("seasonal trigger", result.trigger.asked),
        ("seasonal trigger, tuned", result.trigger.chosen),
    ]


def table(result: TuneResult) -> str:
    """The chosen spec beside the starting spec, the reactive HPA and the seasonal trigger (as set and
    tuned), against the oracle, on both parts."""
    header = f"{'':<24}{'in-sample':^34}{'held out':^34}"
    columns = f"{'policy':<24}" + f"{'under %':>10}{'unserved %':>12}{'vs oracle':>12}" * 2
    rows = compared(result)
    lines = [
        f"presage tune: {result.slo.describe()}",
        f"{result.split.describe()}",
        "",
        header,
        columns,
        "-" * len(columns),
    ]
    for label, trial in rows:
        cells = "".join(
            f"{figures.under_pct:>10.2f}{figures.unserved_pct:>12.3f}{figures.cost_vs_oracle:>11.2f}x"
            for figures in (trial.in_sample, trial.held_out)
        )
        lines.append(f"{label:<24}{cells}")
    lines += [
        "",
        f"chosen: {_changes(result)}",
        judged(result.chosen.in_sample),
        *filter(None, [alike_line(result), undecided_line(result)]),
        verdict(result),
        held_out_line(result),
        *filter(None, [history_line(result)]),
        trigger_line(result),
        f"{len(result.trials)} candidates replayed from {result.forecasts} forecasts in "
        f"{result.seconds['total']:.0f} s",
    ]
    return "\n".join(lines)

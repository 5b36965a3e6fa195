"""The numbers of a backtest: summary.json, decisions.csv and the terminal table."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from presage_scaler.api.quantities import Amount, format_duration
from presage_scaler.backtest import history
from presage_scaler.backtest.baselines import LOOK_AHEAD, WEEK_AGO, CostMatch
from presage_scaler.backtest.explain import constraint_counts, note
from presage_scaler.backtest.runner import POLICIES, BacktestResult, percent

LABELS = {
    "presage": "presage",
    "reactive": "reactive HPA",
    "reactive_cost_matched": "reactive HPA, cost-matched",
    "seasonal_trigger": "seasonal trigger",
    "seasonal_trigger_cost_matched": "seasonal trigger, cost-matched",
    "static": "static (warm-up peak)",
    "oracle": "oracle",
}
METRIC_KEYS = (
    "under_provisioned_pct",
    "unserved_pct",
    "replica_hours",
    "cost_vs_oracle",
    "changes",
    "largest_shortfall",
)


def parameters(result: BacktestResult) -> dict[str, Any]:
    """What was run, in the units a person would write it."""
    plan = result.plan
    trace, spec, schedule = plan.trace, plan.spec, plan.schedule
    identity = plan.backend.identity
    return {
        "trace": trace.source,
        "trace_step": format_duration(trace.step),
        "trace_points": len(trace),
        "gap_steps": int(trace.gaps.sum()),
        "start": trace.start.isoformat(),
        "end": trace.time_at(len(trace)).isoformat(),
        "resolution": format_duration(plan.signal.step),
        "interval": format_duration(schedule.every * trace.step),
        "lead_time": format_duration(plan.lead.value),
        "boot_delay": format_duration(schedule.lead * trace.step),
        "warmup": format_duration(plan.warmup),
        "reported_from": trace.time_at(plan.report_from).isoformat(),
        "reported_steps": len(trace) - plan.report_from,
        "per_replica": plan.per_replica,
        "initial_replicas": plan.initial,
        "target_quantile": spec.policy.target_quantile,
        "scale_down_quantile": spec.policy.scale_down_quantile,
        "headroom": str(spec.policy.headroom),
        "reactive_headroom": str(plan.reactive_headroom),
        "trigger_utilization": str(percent(plan.trigger_utilization)),
        "trigger_week_ago": format_duration(WEEK_AGO),
        "trigger_look_ahead": format_duration(LOOK_AHEAD),
        "backend": identity.backend,
        "model": identity.model,
        "spec": spec.to_wire(),
    }


def policy_summary(result: BacktestResult, name: str) -> dict[str, Any]:
    """The documented metric keys of one policy."""
    policy = result.policies[name]
    metrics = policy.metrics
    entry: dict[str, Any] = {
        "under_provisioned_pct": metrics.under_provisioned_pct,
        "unserved_pct": metrics.unserved_pct,
        "replica_hours": metrics.replica_hours,
        "cost_vs_oracle": result.cost_vs_oracle(name),
        "changes": metrics.changes,
        "largest_shortfall": metrics.largest_shortfall,
    }
    if policy.headroom is not None:
        entry["headroom"] = str(policy.headroom)
    if policy.utilization is not None:
        entry["utilization"] = str(percent(policy.utilization))
    return entry


def _cost_match(match: CostMatch, knob: str, value: object) -> dict[str, Any]:
    """summary.json's account of one cost match: the knob it set and how close it came."""
    return {
        knob: value,
        "replica_hours": match.replica_hours,
        "target_replica_hours": match.target,
        "matched": match.matched,
        "evaluations": match.evaluations,
    }


def setting(result: BacktestResult, name: str) -> str:
    """What a policy's row shows in the table's setting column: a headroom, a trigger's target
    utilization, or "-". A searched percentage shows to a tenth of a point; summary.json keeps it whole."""
    policy = result.policies[name]
    if policy.utilization is not None:
        return f"util {_tenths(percent(policy.utilization))}"
    if policy.headroom is not None:
        return _tenths(policy.headroom)
    return str(result.plan.spec.policy.headroom) if name == "presage" else "-"


def _tenths(amount: Amount) -> str:
    """A percentage amount rounded to a tenth of a point ("108.6%", "75%"); a number as it is."""
    return f"{round(amount.value, 1):g}%" if amount.percent else str(amount)


def summary(result: BacktestResult) -> dict[str, Any]:
    """The content of summary.json."""
    document: dict[str, Any] = {"parameters": parameters(result)}
    for name in POLICIES:
        document[name] = policy_summary(result, name)
    # Which constraint decided presage's count after the warm-up (the steps every metric counts),
    # how often and what share, and a sentence when one constraint dominates.
    document["presage"]["constraints"] = constraint_counts(result.presage, result.plan.report_from)
    document["presage"]["constraint_shares"] = result.constraint_shares
    document["presage"]["note"] = note(result.constraint_shares, result.plan.spec.policy)
    policy, covered = result.plan.spec.policy, result.coverage
    document["calibration"] = {
        "target_quantile": policy.target_quantile,
        "target_coverage": covered.target,
        "scale_down_quantile": policy.scale_down_quantile,
        "scale_down_coverage": covered.scale_down,
        "decisions": covered.decisions,
        "calibrated_share": covered.calibrated,
    }
    document["cost_matched_headroom"] = document["reactive_cost_matched"]["headroom"]
    document["cost_match"] = _cost_match(result.cost_match, "headroom", document["cost_matched_headroom"])
    document["cost_matched_utilization"] = document["seasonal_trigger_cost_matched"]["utilization"]
    document["trigger_cost_match"] = _cost_match(
        result.trigger_cost_match, "utilization", document["cost_matched_utilization"]
    )
    document["runtime_seconds"] = result.seconds
    return document


def write_summary(result: BacktestResult, path: Path) -> None:
    path.write_text(json.dumps(summary(result), indent=2) + "\n")


def write_decisions(result: BacktestResult, path: Path) -> None:
    """presage's desired count at every decision: ``step`` is the index into the trace."""
    trace, record = result.plan.trace, result.presage
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "timestamp", "replicas"])
        for step, replicas in zip(record.steps.tolist(), record.replicas.tolist(), strict=True):
            writer.writerow([step, trace.time_at(step).isoformat(), replicas])


CLEARLY_CHEAPER = 0.15
"""presage must cost at least this share less than the static warm-up peak for the backtest not to
suggest ``presage tune``: a smaller saving is within what a different trace or setting moves."""


def headline(document: dict[str, Any]) -> str:
    """One sentence: presage against the oracle, a static count, a reactive HPA (plain, and with the
    headroom that makes it cost the same) and the seasonal trigger (at its utilization, and at the one
    that makes it cost the same), from a :func:`summary` document."""
    presage, static = document["presage"], document["static"]
    matched, reactive = document["reactive_cost_matched"], document["reactive"]
    trigger, trigger_matched = document["seasonal_trigger"], document["seasonal_trigger_cost_matched"]
    saving = 1 - presage["replica_hours"] / static["replica_hours"]
    return (
        f"presage was under-provisioned {presage['under_provisioned_pct']:.3f} % of the time at "
        f"{presage['cost_vs_oracle']:.2f}x the oracle's replica-hours, {100 * abs(saving):.0f} % "
        f"{'cheaper' if saving >= 0 else 'dearer'} than a static count "
        f"({static['under_provisioned_pct']:.3f} % under-provisioned); a reactive HPA was under-provisioned "
        f"{reactive['under_provisioned_pct']:.3f} % of the time, and {matched['under_provisioned_pct']:.3f} % "
        "with the headroom that makes it cost the same; a seasonal trigger on last week's demand at "
        f"{trigger['utilization']} utilization was under-provisioned {trigger['under_provisioned_pct']:.3f} % at "
        f"{trigger['cost_vs_oracle']:.2f}x, and {trigger_matched['under_provisioned_pct']:.3f} % at presage's cost."
    )


def advice(document: dict[str, Any]) -> str:
    """What to do when presage's policy is not clearly cheaper than a static count, or "" when it is:
    run ``presage tune``, saying what it can do on this trace (:mod:`presage_scaler.backtest.history`)
    when the trace after the warm-up is too short for it to advise."""
    presage, static = document["presage"], document["static"]
    if presage["replica_hours"] <= (1 - CLEARLY_CHEAPER) * static["replica_hours"]:
        return ""
    head = (
        f"This policy is not clearly cheaper than a static count here (less than {100 * CLEARLY_CHEAPER:.0f} % saved)"
    )
    parameters = document["parameters"]
    after = datetime.fromisoformat(parameters["end"]) - datetime.fromisoformat(parameters["reported_from"])
    missing = history.missing_to_advise(after)
    if not missing:
        return (
            f"{head}: run `presage tune` with the same arguments and `--slo 1%` to find the cheapest policy that "
            "meets your service level, judged on days it did not choose on."
        )
    needs = (
        f"{head}. `presage tune` advises a policy only once it was chosen on {format_duration(history.TRUSTED)} "
        f"after the warm-up and checked on the {format_duration(history.HOLDOUT)} after those; this trace has "
        f"{format_duration(after)} after its warm-up, so it needs {history.more_days(missing)} of history"
    )
    if not history.tunable(after):
        least = format_duration(history.MIN_IN_SAMPLE + history.MIN_PART)
        return f"{needs} (and at least {least} after the warm-up to run at all)."
    return (
        f"{needs}. Run it meanwhile with the same arguments and `--slo 1%` to see the candidates it finds; until "
        "then its verdict is to keep the starting spec."
    )


def explanation(result: BacktestResult) -> list[str]:
    """Coverage, what decided presage's count, and the note, as lines for the terminal and the report."""
    policy, covered = result.plan.spec.policy, result.coverage
    counts = constraint_counts(result.presage, result.plan.report_from)
    decisions = sum(counts.values())
    lines = [
        f"calibration after the warm-up: the sizing window's highest demand was at or below the q"
        f"{policy.target_quantile:g} forecast {100 * covered.target:.1f} % of the time and the q"
        f"{policy.scale_down_quantile:g} forecast {100 * covered.scale_down:.1f} % ({covered.decisions} decisions, "
        f"{100 * covered.calibrated:.0f} % calibrated)",
        f"decided by, in the {decisions} decisions after the warm-up: "
        + ", ".join(f"{name} {count} ({100 * count / decisions:.1f} %)" for name, count in counts.items()),
    ]
    if sentence := note(result.constraint_shares, policy):
        lines.append(sentence)
    return lines


def table(result: BacktestResult) -> str:
    """The policies side by side, for the terminal, and where presage's cost goes."""
    header = (
        f"{'policy':<32}{'setting':>14}{'under-prov %':>14}{'unserved %':>12}"
        f"{'replica-h':>12}{'vs oracle':>11}{'changes':>9}{'largest shortfall':>19}"
    )
    lines = [header, "-" * len(header)]
    for name in POLICIES:
        entry = policy_summary(result, name)
        lines.append(
            f"{LABELS[name]:<32}{setting(result, name):>14}{entry['under_provisioned_pct']:>14.3f}"
            f"{entry['unserved_pct']:>12.3f}{entry['replica_hours']:>12.1f}{entry['cost_vs_oracle']:>10.2f}x"
            f"{entry['changes']:>9}{entry['largest_shortfall']:>19.4g}"
        )
    document = summary(result)
    closing = [line for line in (headline(document), advice(document)) if line]
    return "\n".join([*lines, "", *closing, "", *explanation(result)])

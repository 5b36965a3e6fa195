"""report.html: one self-contained page (inline SVG and CSS, nothing fetched) that shows at a glance
how presage, the reactive HPAs and the oracle followed the demand, where each fell short, and the
numbers behind it."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest import svg
from presage_scaler.backtest.metrics import shortfall
from presage_scaler.backtest.output import LABELS, explanation, parameters, summary
from presage_scaler.backtest.runner import POLICIES, BacktestResult

WIDTH = 1100
LEFT, RIGHT = 84, 16
PLOT_HEIGHT = 280
STRIP = 10
COLORS = {
    "presage": "#1f6fb4",
    "reactive": "#e67e22",
    "reactive_cost_matched": "#8e44ad",
    "static": "#7f7f7f",
    "oracle": "#27ae60",
}
STYLES = {
    "presage": f'stroke="{COLORS["presage"]}" stroke-width="1.6"',
    "reactive": f'stroke="{COLORS["reactive"]}" stroke-width="1.1"',
    "reactive_cost_matched": (
        f'stroke="{COLORS["reactive_cost_matched"]}" stroke-opacity="0.6" stroke-width="1" stroke-dasharray="4 2"'
    ),
    "static": f'stroke="{COLORS["static"]}" stroke-width="1" stroke-dasharray="2 3"',
    "oracle": f'stroke="{COLORS["oracle"]}" stroke-width="1"',
}
DEMAND_STYLE = 'stroke="#222" stroke-width="0.9"'
BAND_STYLE = f'fill="{COLORS["presage"]}" fill-opacity="0.2" stroke="none"'
SHORT_COLOR = "#d62728"
SHORT_POLICIES = ("presage", "reactive", "reactive_cost_matched")
STRIP_LABELS = {"presage": "presage", "reactive": "HPA", "reactive_cost_matched": "HPA, =cost"}
ZOOM_SPAN_DAYS = 1
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 32px; }
p.lead { color: #444; max-width: 1100px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.swatch { display: inline-block; width: 14px; height: 4px; margin-right: 6px; vertical-align: middle; }
svg text { font-size: 11px; fill: #333; } svg .grid { stroke: #eee; }
pre { background: #f6f6f6; padding: 10px; font-size: 12px; max-width: 1100px; overflow: auto; }
"""


def _capacity(result: BacktestResult, name: str) -> np.ndarray:
    return result.policies[name].simulation.ready * result.plan.per_replica


def _short(result: BacktestResult, name: str) -> np.ndarray:
    return shortfall(result.plan.trace.values, result.policies[name].simulation.ready, result.plan.per_replica)


def timeline(result: BacktestResult, begin: int, end: int, title: str) -> str:
    """Demand, presage's forecast band, each policy's capacity and strips marking under-provisioning."""
    plan, record = result.plan, result.presage
    trace = plan.trace
    positions = np.arange(len(trace), dtype=np.float64)
    view = slice(begin, end)
    in_view = (record.forecast_steps >= begin) & (record.forecast_steps < end)
    # Scaled to what matters (demand, presage, the oracle); the reactive lines may run off the top.
    peak = max(
        float(trace.values[view].max()),
        *(float(_capacity(result, name)[view].max()) for name in ("presage", "oracle")),
        float(record.upper[in_view].max()) if in_view.any() else 0.0,
    )
    width = WIDTH - LEFT - RIGHT
    frame = svg.Frame(LEFT, 48, width, PLOT_HEIGHT, begin, max(end - 1, begin + 1), 0.0, 1.08 * peak or 1.0)
    parts = []
    if begin < plan.report_from:
        warmup_end = float(frame.x(min(plan.report_from, end - 1)))
        parts.append(
            f'<rect x="{frame.left}" y="{frame.top}" width="{warmup_end - frame.left:.1f}" height="{frame.height}" '
            'fill="#f1f1f1"/>'
        )
    ticks = svg.time_ticks(trace.start, trace.step, frame)
    parts.append(svg.axes(frame, ticks, svg.nice_ticks(frame.y1 / 1.08), "demand / capacity"))
    clip = f"plot-{begin}-{end}"
    parts.append(
        f'<clipPath id="{clip}"><rect x="{frame.left}" y="{frame.top}" width="{frame.width}" '
        f'height="{frame.height}"/></clipPath><g clip-path="url(#{clip})">'
    )
    steps = record.forecast_steps.astype(np.float64)
    parts.append(svg.band(steps, record.lower, record.upper, frame, BAND_STYLE))
    parts.append(svg.line(positions, trace.values, frame, DEMAND_STYLE))
    for name in ("static", "reactive_cost_matched", "reactive", "oracle", "presage"):
        parts.append(svg.line(positions, _capacity(result, name), frame, STYLES[name]))
    parts.append("</g>")
    if begin < plan.report_from:
        parts.append(f'<text x="{frame.left + 6}" y="{frame.top + 14}">warm-up (not counted)</text>')
    top = frame.bottom + 40
    parts.append(f'<text x="{frame.left}" y="{top - 4:.1f}">under-provisioned steps:</text>')
    for row, name in enumerate(SHORT_POLICIES):
        y = top + row * (STRIP + 4)
        label = STRIP_LABELS[name]
        parts.append(f'<text x="{frame.left - 6}" y="{y + STRIP - 1:.1f}" text-anchor="end">{label}</text>')
        parts.append(f'<rect x="{frame.left}" y="{y:.1f}" width="{frame.width}" height="{STRIP}" fill="#fafafa"/>')
        parts.append(svg.marks(positions, _short(result, name) > 0, frame, y, STRIP, SHORT_COLOR))
    policy = plan.spec.policy
    band_swatch = f'stroke="{COLORS["presage"]}" stroke-opacity="0.3" stroke-width="8"'
    band_label = (
        f"presage's calibrated forecast of the sizing window's highest demand, q{policy.scale_down_quantile:g} to "
        f"q{policy.target_quantile:g}"
    )
    parts.append(svg.legend([("demand", DEMAND_STYLE), (band_label, band_swatch)], frame.left, 12))
    parts.append(f'<text x="{frame.left - 6}" y="{32 + 4}" text-anchor="end">capacity:</text>')
    parts.append(svg.legend([(LABELS[name], STYLES[name]) for name in POLICIES], frame.left, 32))
    height = top + len(SHORT_POLICIES) * (STRIP + 4) + 8
    return svg.document(WIDTH, height, "".join(parts), title)


def _zoom_center(result: BacktestResult) -> tuple[int, str]:
    """The step to zoom into, and why: presage's worst shortfall, else the HPA's, else peak demand."""
    start = result.plan.report_from
    for name in ("presage", "reactive_cost_matched"):
        missing = _short(result, name)[start:]
        if missing.max() > 0:
            return start + int(np.argmax(missing)), f"around {LABELS[name]}'s largest shortfall"
    return start + int(np.argmax(result.plan.trace.values[start:])), "around the demand peak"


def per_period(result: BacktestResult) -> tuple[str, str]:
    """A bar chart of under-provisioned time per day (per week for traces over two months)."""
    plan = result.plan
    trace = plan.trace
    reported = len(trace) - plan.report_from
    days = reported * trace.step.total_seconds() / 86400
    period_days = 1 if days <= 62 else 7
    period = max(1, round(period_days * 86400 / trace.step.total_seconds()))
    count = -(-reported // period)
    index = np.arange(reported) // period
    shares = {
        name: 100.0 * np.bincount(index, _short(result, name)[plan.report_from :] > 0, count) / np.bincount(index)
        for name in SHORT_POLICIES
    }
    high = max(1.0, *(float(s.max()) for s in shares.values()))
    frame = svg.Frame(LEFT, 34, WIDTH - LEFT - RIGHT, 180, 0.0, float(count), 0.0, 1.1 * high)
    parts = [svg.axes(frame, [], svg.nice_ticks(high), "% of time under-provisioned")]
    slot = frame.width / count
    bar = slot * 0.8 / len(SHORT_POLICIES)
    for row, name in enumerate(SHORT_POLICIES):
        for i, share in enumerate(shares[name].tolist()):
            if share > 0:
                x = frame.left + i * slot + slot * 0.1 + row * bar
                y = float(frame.y(share))
                parts.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar, 0.5):.1f}" height="{frame.bottom - y:.1f}" '
                    f'fill="{COLORS[name]}"><title>{escape(LABELS[name])}: {share:.2f}%</title></rect>'
                )
    every = max(1, round(count / 12))
    for i in range(0, count, every):
        moment = trace.time_at(plan.report_from + i * period)
        x = frame.left + (i + 0.5) * slot
        parts.append(f'<text x="{x:.1f}" y="{frame.bottom + 16:.1f}" text-anchor="middle">{moment:%b %d}</text>')
    swatches = [(LABELS[n], f'stroke="{COLORS[n]}" stroke-width="6"') for n in SHORT_POLICIES]
    parts.append(svg.legend(swatches, LEFT, 14))
    unit = "day" if period_days == 1 else "week"
    return unit, svg.document(WIDTH, frame.bottom + 26, "".join(parts), f"under-provisioned time per {unit}")


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _summary_table(document: dict[str, Any], result: BacktestResult) -> str:
    rows = []
    for name in POLICIES:
        entry = document[name]
        headroom = entry.get("headroom", str(result.plan.spec.policy.headroom) if name == "presage" else "–")
        swatch = f'<span class="swatch" style="background:{COLORS[name]}"></span>'
        rows.append(
            [
                swatch + escape(LABELS[name]),
                escape(headroom),
                f"{entry['under_provisioned_pct']:.3f}",
                f"{entry['unserved_pct']:.3f}",
                f"{entry['replica_hours']:.1f}",
                f"{entry['cost_vs_oracle']:.2f}×",
                str(entry["changes"]),
                f"{entry['largest_shortfall']:.4g}",
            ]
        )
    header = ["policy", "headroom", "under-provisioned time %", "unserved demand %", "replica-hours"]
    return _table(rows, [*header, "cost vs oracle", "changes", "largest shortfall"])


def _headline(document: dict[str, Any]) -> str:
    presage, matched = document["presage"], document["reactive_cost_matched"]
    return (
        f"presage was under-provisioned {presage['under_provisioned_pct']:.3f}% of the time at "
        f"{presage['cost_vs_oracle']:.2f}× the oracle's cost; a reactive HPA costing the same "
        f"(headroom {escape(matched['headroom'])}) was under-provisioned {matched['under_provisioned_pct']:.3f}% "
        f"of the time."
    )


def render(result: BacktestResult) -> str:
    """The whole report as one HTML string."""
    plan = result.plan
    trace = plan.trace
    document = summary(result)
    params = parameters(result)
    spec_yaml = yaml.safe_dump(params.pop("spec"), sort_keys=False)
    name = escape(Path(trace.source).name)
    overview = timeline(result, 0, len(trace), "the whole trace")
    sections = [
        f"<h1>presage backtest: {name}</h1>",
        f'<p class="lead">{format_duration(len(trace) * trace.step)} of demand at {format_duration(trace.step)} '
        f"steps; pods take {params['boot_delay']} to become ready; one replica serves {plan.per_replica:g}; "
        f"metrics count from {escape(params['reported_from'])} (after a {params['warmup']} warm-up).</p>",
        f'<p class="lead"><b>{_headline(document)}</b></p>',
        _summary_table(document, result),
        "<h2>The whole trace</h2>",
        '<p class="lead">Capacity is ready replicas × per-replica capacity. The shaded band is presage\'s '
        "calibrated forecast of the highest demand in each decision's sizing window (the next step up to lead "
        "time + interval), drawn one lead time after the decision that made it. Long traces keep each pixel "
        "column's minimum and maximum, so short spikes stay visible.</p>",
        overview,
    ]
    if len(trace) * trace.step.total_seconds() > 2 * 86400 * ZOOM_SPAN_DAYS:
        center, why = _zoom_center(result)
        half = round(ZOOM_SPAN_DAYS * 86400 / trace.step.total_seconds() / 2)
        begin = min(max(0, center - half), max(0, len(trace) - 2 * half))
        sections += [f"<h2>Zoom: {ZOOM_SPAN_DAYS} day {why}</h2>", timeline(result, begin, begin + 2 * half, why)]
    unit, bars = per_period(result)
    constraints = [[escape(k), f"{100 * v:.1f} %"] for k, v in result.constraint_shares.items()]
    why = "".join(f'<p class="lead">{escape(line)}</p>' for line in explanation(result))
    sections += [
        f"<h2>Under-provisioned time per {unit}</h2>",
        bars,
        "<h2>Where the cost goes</h2>",
        why,
        '<p class="lead">The binding constraint of each decision after the warm-up (<code>breakdown.constraint'
        "</code>; Forecast: the forecast itself).</p>",
        _table(constraints, ["constraint", "share of decisions"]),
        "<h2>Parameters</h2>",
        _table([[escape(k), escape(str(v))] for k, v in params.items()], ["parameter", "value"]),
        "<h2>The PredictiveScaler spec that was replayed</h2>",
        f"<pre>{escape(spec_yaml)}</pre>",
    ]
    body = "\n".join(sections)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>presage backtest: {name}</title>'
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def write_report(result: BacktestResult, path: Path) -> None:
    path.write_text(render(result))

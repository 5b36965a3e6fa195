"""report.html: one self-contained page (:mod:`presage_scaler.backtest.plots`) whose three plots each
answer one question, with the numbers behind them:

1. how presage's capacity followed the demand over the whole trace, with its calibrated forecast band
   (the other policies' capacity one click away in the legend, hidden at first so that none of them
   covers the demand);
2. where each policy fell short: every under-provisioned step after the warm-up, by how much;
3. what each policy cost over time: its mean replica count per day (per hour or week on short or
   long traces).
"""

from __future__ import annotations

from datetime import timedelta
from html import escape
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import yaml
from plotly.subplots import make_subplots

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest import plots
from presage_scaler.backtest.explain import constraint_counts
from presage_scaler.backtest.output import LABELS, advice, explanation, headline, parameters, setting, summary
from presage_scaler.backtest.runner import POLICIES, BacktestResult
from presage_scaler.backtest.scoring import shortfall
from presage_scaler.backtest.trace import Trace

COLORS = {
    "presage": "#1f77b4",
    "reactive": "#ff7f0e",
    "reactive_cost_matched": "#9467bd",
    "seasonal_trigger": "#8c564b",
    "seasonal_trigger_cost_matched": "#e377c2",
    "static": "#7f7f7f",
    "oracle": "#2ca02c",
}
DEMAND_COLOR = "#222222"
SHORT_COLOR = "#d62728"
WARMUP_FILL = "rgba(0, 0, 0, 0.06)"
SHORT_POLICIES = tuple(name for name in POLICIES if name != "oracle")
"""The policies that can fall short (the oracle never does)."""
HOVER = ".4~g"


def _capacity(result: BacktestResult, name: str) -> np.ndarray:
    return result.policies[name].simulation.ready * result.plan.per_replica


def _short(result: BacktestResult, name: str) -> np.ndarray:
    return shortfall(result.plan.trace.values, result.policies[name].simulation.ready, result.plan.per_replica)


def _counted_shortfalls(result: BacktestResult, name: str) -> np.ndarray:
    """The steps after the warm-up where ``name`` was under-provisioned (those the metrics count)."""
    start = result.plan.report_from
    return start + np.flatnonzero(_short(result, name)[start:])


def _times(trace: Trace, steps: np.ndarray) -> list[str]:
    return [plots.wall_time(trace.time_at(int(step))) for step in steps]


def _whole(trace: Trace) -> list[str]:
    """The x range from the trace's first step to the end of its last."""
    return [plots.wall_time(trace.start), plots.wall_time(trace.time_at(len(trace)))]


def _band(result: BacktestResult) -> tuple[np.ndarray, np.ndarray]:
    """presage's calibrated band per trace step: each decision's values from one lead time after it
    until the next decision's take over (NaN before the first)."""
    record, steps = result.presage, len(result.plan.trace)
    lower, upper = np.full(steps, np.nan), np.full(steps, np.nan)
    inside = record.forecast_steps < steps
    lower[record.forecast_steps[inside]] = record.lower[inside]
    upper[record.forecast_steps[inside]] = record.upper[inside]
    return pd.Series(lower).ffill().to_numpy(), pd.Series(upper).ffill().to_numpy()


def _warmup(figure: go.Figure, result: BacktestResult, label: bool) -> None:
    """Shade the warm-up, whose steps no metric counts."""
    trace, report_from = result.plan.trace, result.plan.report_from
    annotation = {"annotation_text": "warm-up (not counted)", "annotation_position": "top left"} if label else {}
    figure.add_vrect(
        x0=plots.wall_time(trace.start),
        x1=plots.wall_time(trace.time_at(report_from)),
        fillcolor=WARMUP_FILL,
        line_width=0,
        layer="below",
        **annotation,
    )


def capacity_figure(result: BacktestResult) -> go.Figure:
    """Demand, presage's calibrated band and capacity over the whole trace; the other policies'
    capacity is in the legend, hidden until clicked."""
    plan = result.plan
    trace, policy = plan.trace, plan.spec.policy
    start, step = trace.start, trace.step
    lower, upper = _band(result)
    quantiles = f"q{policy.scale_down_quantile:g}–q{policy.target_quantile:g}"
    figure = go.Figure()
    figure.add_scatter(
        name=f"forecast q{policy.scale_down_quantile:g}",
        legendgroup="band",
        showlegend=False,
        line={"width": 0, "shape": "hv"},
        hovertemplate=f"forecast q{policy.scale_down_quantile:g}: %{{y:{HOVER}}}<extra></extra>",
        **plots.on_grid(lower, start, step),
    )
    figure.add_scatter(
        name=f"presage's forecast of the window's highest demand, {quantiles}",
        legendgroup="band",
        fill="tonexty",
        fillcolor="rgba(31, 119, 180, 0.25)",
        line={"width": 0, "shape": "hv"},
        hovertemplate=f"forecast q{policy.target_quantile:g}: %{{y:{HOVER}}}<extra></extra>",
        **plots.on_grid(upper, start, step),
    )
    figure.add_scatter(
        name="demand",
        line={"color": DEMAND_COLOR, "width": 1},
        yhoverformat=HOVER,
        **plots.on_grid(trace.values, start, step),
    )
    figure.add_scatter(
        name="capacity: presage",
        line={"color": COLORS["presage"], "width": 1.6, "shape": "hv"},
        yhoverformat=HOVER,
        **plots.on_grid(_capacity(result, "presage"), start, step),
    )
    for name in [other for other in POLICIES if other != "presage"]:
        figure.add_scatter(
            name=f"capacity: {LABELS[name]}",
            visible="legendonly",
            line={"color": COLORS[name], "width": 1.2, "shape": "hv"},
            yhoverformat=HOVER,
            **plots.on_grid(_capacity(result, name), start, step),
        )
    short = _counted_shortfalls(result, "presage")
    figure.add_scatter(
        name="presage short",
        mode="markers",
        marker={"color": SHORT_COLOR, "size": 6, "symbol": "x-thin", "line": {"width": 2, "color": SHORT_COLOR}},
        x=_times(trace, short),
        y=plots.compact(trace.values[short]),
        yhoverformat=HOVER,
    )
    _warmup(figure, result, label=True)
    figure.update_xaxes(
        range=_whole(trace),
        rangeselector={
            "buttons": [
                {"count": 1, "label": "1 day", "step": "day", "stepmode": "backward"},
                {"count": 7, "label": "1 week", "step": "day", "stepmode": "backward"},
                {"label": "whole trace", "step": "all"},
            ],
            "x": 1,
            "xanchor": "right",
            "y": 1.0,
            "yanchor": "bottom",
        },
    )
    plots.style(
        figure,
        x_title=plots.time_axis_title(trace.start),
        y_title="demand and capacity (the signal's units)",
        height=480,
    )
    figure.update_layout(legend={"y": 1.09}, margin={"t": 90})
    return figure


def shortfall_figure(result: BacktestResult) -> go.Figure:
    """One row per policy: every under-provisioned step after the warm-up and the demand it left
    unserved, on one zoomable time axis."""
    trace = result.plan.trace
    titles = []
    for name in SHORT_POLICIES:
        metrics = result.policies[name].metrics
        titles.append(
            f"{LABELS[name]}: short {metrics.under_provisioned_pct:.2f} % of the time, "
            f"{metrics.unserved_pct:.3f} % of demand unserved"
        )
    figure = make_subplots(
        rows=len(SHORT_POLICIES), cols=1, shared_xaxes=True, vertical_spacing=0.07, subplot_titles=titles
    )
    for row, name in enumerate(SHORT_POLICIES, start=1):
        short = _counted_shortfalls(result, name)
        figure.add_scatter(
            name=LABELS[name],
            mode="markers",
            marker={"color": COLORS[name], "size": 5},
            x=_times(trace, short),
            y=plots.compact(_short(result, name)[short]),
            yhoverformat=HOVER,
            showlegend=False,
            row=row,
            col=1,
        )
        figure.update_yaxes(title_text="unserved", row=row, col=1)
        if short.size == 0:
            figure.add_annotation(
                text="never short", xref="x domain", yref="y domain", x=0.5, y=0.5, showarrow=False, row=row, col=1
            )
    figure.update_xaxes(range=_whole(trace))
    _warmup(figure, result, label=False)
    plots.style(figure, x_title="", y_title="unserved", height=150 * len(SHORT_POLICIES) + 60)
    figure.update_xaxes(title_text=plots.time_axis_title(trace.start), row=len(SHORT_POLICIES), col=1)
    figure.update_layout(hovermode="closest", margin={"t": 40})
    return figure


def cost_period(reported: timedelta) -> tuple[timedelta, str]:
    """The period the cost plot averages over, and its name: an hour over up to two days, a week
    beyond about two months, a day between."""
    if reported <= timedelta(days=2):
        return timedelta(hours=1), "hour"
    if reported <= timedelta(days=62):
        return timedelta(days=1), "day"
    return timedelta(weeks=1), "week"


def _series(trace: Trace, values: np.ndarray, first: int) -> pd.Series:
    """``values`` of steps ``first, first + 1, …`` indexed by the time each step starts."""
    return pd.Series(values, index=pd.date_range(trace.time_at(first), periods=len(values), freq=trace.step))


def cost_figure(result: BacktestResult) -> go.Figure:
    """Each policy's mean replica count (ready and booting, what is paid for) per period after the
    warm-up."""
    plan = result.plan
    trace, report_from = plan.trace, plan.report_from
    length, period = cost_period((len(trace) - report_from) * trace.step)
    figure = go.Figure()
    for name in POLICIES:
        desired = result.policies[name].simulation.desired[report_from:].astype(np.float64)
        # Bins start at midnight, so a day is a calendar day; each point is drawn at its bin's middle.
        means = _series(trace, desired, report_from).resample(length, origin="start_day").mean()
        # A resample of a time-indexed series: its index is a DatetimeIndex (the stubs say Index).
        centres = cast(pd.DatetimeIndex, means.index) + length / 2
        figure.add_scatter(
            name=LABELS[name],
            mode="lines+markers",
            x=[plots.wall_time(moment.to_pydatetime()) for moment in centres],
            y=means.to_numpy(),
            line={"color": COLORS[name], "width": 1.5, "dash": "dash" if name == "oracle" else "solid"},
            marker={"size": 6},
            yhoverformat=".1f",
        )
    plots.style(
        figure,
        x_title=plots.time_axis_title(trace.start),
        y_title=f"replicas paid for (mean per {period})",
        height=380,
    )
    return figure


def _summary_table(document: dict[str, Any], result: BacktestResult) -> str:
    rows = []
    for name in POLICIES:
        entry = document[name]
        swatch = f'<span class="swatch" style="background:{COLORS[name]}"></span>'
        rows.append(
            [
                swatch + escape(LABELS[name]),
                escape(setting(result, name)),
                f"{entry['under_provisioned_pct']:.3f}",
                f"{entry['unserved_pct']:.3f}",
                f"{entry['replica_hours']:.1f}",
                f"{entry['cost_vs_oracle']:.2f}×",
                str(entry["changes"]),
                f"{entry['largest_shortfall']:.4g}",
            ]
        )
    header = ["policy", "setting", "under-provisioned time %", "unserved demand %", "replica-hours"]
    return plots.table(rows, [*header, "cost vs oracle", "changes", "largest shortfall"])


def _constraint_table(result: BacktestResult) -> str:
    counts = constraint_counts(result.presage, result.plan.report_from)
    total = sum(counts.values())
    rows = [[escape(name), str(count), f"{100 * count / total:.1f} %"] for name, count in counts.items()]
    return plots.table(rows, ["constraint", "decisions", "share"])


def baselines_sentence(document: dict[str, Any]) -> str:
    """What the compared policies are, in one paragraph under the table."""
    parameters = document["parameters"]
    return (
        "The reactive HPA scales on the demand it last saw, with the HPA's 10 % tolerance and 300 s scale-down "
        "stabilization; the seasonal trigger is what a KEDA user writes by hand, the same HPA on the higher of that "
        f"demand and the highest demand of the {parameters['trigger_look_ahead']} after this time "
        f"{parameters['trigger_week_ago']} earlier, at {parameters['trigger_utilization']} target utilization (the "
        "current demand alone where that lies before the trace). Each cost-matched variant has its headroom (the "
        "HPA's) or its utilization (the trigger's) set to what makes it cost what presage costs."
    )


def _lead(text: str) -> str:
    return f'<p class="lead">{text}</p>'


def render(result: BacktestResult) -> str:
    """The whole report as one HTML string."""
    plan = result.plan
    trace = plan.trace
    document = summary(result)
    params = parameters(result)
    spec_yaml = yaml.safe_dump(params.pop("spec"), sort_keys=False)
    name = Path(trace.source).name
    _, period = cost_period((len(trace) - plan.report_from) * trace.step)
    body: list[str | go.Figure] = [
        f"<h1>presage backtest: {escape(name)}</h1>",
        _lead(
            f"{format_duration(len(trace) * trace.step)} of demand at {format_duration(trace.step)} steps; pods "
            f"take {params['boot_delay']} to become ready; one replica serves {plan.per_replica:g}; metrics count "
            f"from {escape(params['reported_from'])} (after a {params['warmup']} warm-up)."
        ),
        _lead(f"<b>{escape(headline(document))}</b>"),
        *(_lead(escape(line)) for line in [advice(document)] if line),
        _summary_table(document, result),
        _lead(escape(baselines_sentence(document))),
        "<h2>Did presage's capacity follow the demand?</h2>",
        _lead(
            "Capacity is ready replicas × per-replica capacity. The shaded band is presage's calibrated forecast "
            "of the highest demand in each decision's sizing window (the next step up to lead time + interval), "
            "drawn from one lead time after the decision, when the capacity it sized is ready. Red "
            "crosses mark the steps after the warm-up where demand was above presage's capacity. Drag to zoom, "
            "double-click to see the whole trace again; click a policy in the legend to add its capacity."
        ),
        capacity_figure(result),
        "<h2>Where did each policy fall short?</h2>",
        _lead(
            "Every step after the warm-up whose demand was above the policy's ready capacity, and by how much "
            "(in the signal's units); the grey span is the warm-up, which no metric counts. The oracle is never "
            "short. Zooming one row zooms them all."
        ),
        shortfall_figure(result),
        "<h2>What did each policy cost over time?</h2>",
        _lead(
            f"The replicas each policy paid for (ready and booting), averaged over each {period} after the warm-up. "
            "The cost-matched HPA and seasonal trigger cost what presage costs in total, spread differently."
        ),
        cost_figure(result),
        "<h2>Where presage's cost goes</h2>",
        *(_lead(escape(line)) for line in explanation(result)),
        _lead(
            "The binding constraint of each decision after the warm-up, the same decisions every metric counts "
            "(<code>breakdown.constraint</code>; Forecast: the forecast itself)."
        ),
        _constraint_table(result),
        "<h2>Parameters</h2>",
        plots.table([[escape(k), escape(str(v))] for k, v in params.items()], ["parameter", "value"]),
        "<h2>The PredictiveScaler spec that was replayed</h2>",
        f"<pre>{escape(spec_yaml)}</pre>",
    ]
    return plots.page(f"presage backtest: {name}", body)


def write_report(result: BacktestResult, path: Path) -> None:
    path.write_text(render(result))

"""tune.html for ``presage tune``: one self-contained page (:mod:`presage_scaler.backtest.plots`)
that answers two questions with a plot each, and gives the numbers and the spec behind them:

1. where the chosen spec sits among every candidate tried: cost against under-provisioned time, the
   frontier of the cheapest candidates, the service level, the chosen spec, the starting spec, the
   reactive HPA and the seasonal trigger (as set and tuned), in-sample (what the choice saw) beside
   held out (the check);
2. how the chosen spec followed the demand on the held-out part, beside the starting spec, the
   reactive HPA and the tuned seasonal trigger.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import yaml
from plotly.subplots import make_subplots

from presage_scaler.backtest import plots
from presage_scaler.tune.held_out import check
from presage_scaler.tune.output import StartingSpec, alike_line, compared, judged, manifests, trigger_line, verdict
from presage_scaler.tune.search import ALIKE, Figures
from presage_scaler.tune.tuner import Outcome, Trial, TuneResult
from presage_scaler.tune.verdict import held_out_line, history_line, undecided_line

COLORS = {
    "chosen": "#1f77b4",
    "starting spec": "#7f7f7f",
    "reactive HPA": "#ff7f0e",
    "seasonal trigger": "#8c564b",
    "seasonal trigger, tuned": "#e377c2",
}
MARKERS = {
    "chosen": "star",
    "starting spec": "diamond",
    "reactive HPA": "square",
    "seasonal trigger": "triangle-up",
    "seasonal trigger, tuned": "triangle-down",
}
MEETS_COLOR = "#9ecae1"
MISSES_COLOR = "#d9d9d9"
SLO_COLOR = "#d62728"
DEMAND_COLOR = "#222222"
PARTS = ("in_sample", "held_out")
PART_TITLES = ("in-sample: what the choice saw", "held out: the check")


def _part(outcome: Outcome, part: str) -> Figures:
    figures: Figures = getattr(outcome, part)
    return figures


def _knobs_text(trial: Trial) -> str:
    return "<br>".join(f"{name} {value}" for name, value in trial.knobs.as_dict().items())


def frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The cheapest points for their under-provisioning: those no other point beats on both cost and
    under-provisioned time, by cost."""
    best, found = float("inf"), []
    for cost, under in sorted(points):
        if under < best:
            found.append((cost, under))
            best = under
    return found


def frontier_figure(result: TuneResult) -> go.Figure:
    """Every candidate's cost against its under-provisioned time, in-sample and held out."""
    figure = make_subplots(rows=1, cols=2, subplot_titles=PART_TITLES, horizontal_spacing=0.08)
    marked: dict[str, Outcome] = dict(compared(result))
    for column, part in enumerate(PARTS, start=1):
        first = column == 1
        meets = [result.slo.met(trial.in_sample) for trial in result.trials]
        for label, color, selected in (
            ("candidates meeting the service level in-sample", MEETS_COLOR, True),
            ("other candidates", MISSES_COLOR, False),
        ):
            trials = [t for t, ok in zip(result.trials, meets, strict=True) if ok == selected]
            figure.add_trace(
                go.Scatter(
                    name=label,
                    legendgroup=label,
                    showlegend=first,
                    x=[_part(t, part).cost_vs_oracle for t in trials],
                    y=[_part(t, part).under_pct for t in trials],
                    mode="markers",
                    marker={"color": color, "size": 7, "line": {"width": 0.5, "color": "#555"}},
                    text=[_knobs_text(t) for t in trials],
                    hovertemplate="%{x:.3f}× the oracle, %{y:.3f} % under-provisioned<br>%{text}<extra></extra>",
                ),
                row=1,
                col=column,
            )
        line = frontier([(_part(t, part).cost_vs_oracle, _part(t, part).under_pct) for t in result.trials])
        figure.add_trace(
            go.Scatter(
                name="frontier (cheapest for their under-provisioning)",
                legendgroup="frontier",
                showlegend=first,
                x=[cost for cost, _ in line],
                y=[under for _, under in line],
                mode="lines",
                line={"color": MEETS_COLOR, "shape": "hv", "width": 1.5},
                hoverinfo="skip",
            ),
            row=1,
            col=column,
        )
        for name, trial in marked.items():
            figures = _part(trial, part)
            figure.add_trace(
                go.Scatter(
                    name=name,
                    legendgroup=name,
                    showlegend=first,
                    x=[figures.cost_vs_oracle],
                    y=[figures.under_pct],
                    mode="markers",
                    marker={"color": COLORS[name], "symbol": MARKERS[name], "size": 15, "line": {"width": 1}},
                    hovertemplate=f"{name}: %{{x:.3f}}× the oracle, %{{y:.3f}} % under-provisioned<extra></extra>",
                ),
                row=1,
                col=column,
            )
        figure.add_hline(
            y=result.slo.under_pct,
            line={"color": SLO_COLOR, "dash": "dash", "width": 1},
            annotation_text=f"service level {result.slo.under_pct:g} %",
            annotation_position="top right",
            row=1,
            col=column,
        )
    plots.style(figure, x_title="cost (replica-hours ÷ the oracle's)", y_title="under-provisioned time %", height=500)
    figure.update_xaxes(title_text="cost (replica-hours ÷ the oracle's)")
    # The region that matters: the reactive HPA is usually far above it (double-click twice to see all).
    ours = [_part(trial, part).under_pct for trial in (result.chosen, result.default) for part in PARTS]
    figure.update_yaxes(range=[0, max(3 * result.slo.under_pct, 1.2 * max(ours))])
    # Room above the subplot titles for the legend's two rows.
    figure.update_layout(hovermode="closest", margin={"t": 110}, legend={"y": 1.18})
    return figure


def held_out_figure(result: TuneResult) -> go.Figure:
    """Demand and each policy's ready capacity over the held-out part."""
    parts, trace = result.split, result.trace
    view = slice(parts.held_out_from, parts.end)
    start, step = trace.time_at(parts.held_out_from), trace.step
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            name="demand",
            **plots.on_grid(trace.values[view], start, step),
            line={"color": DEMAND_COLOR, "width": 1},
            hovertemplate="%{y:.4~g}",
        )
    )
    for name, capacity in result.held_out_capacity.items():
        figure.add_trace(
            go.Scatter(
                name=f"{name} capacity",
                **plots.on_grid(capacity, start, step),
                line={"color": COLORS[name], "width": 1.4 if name == "chosen" else 1, "shape": "hv"},
                visible=True if name == "chosen" else "legendonly",
                hovertemplate="%{y:.4~g}",
            )
        )
    return plots.style(figure, x_title=plots.time_axis_title(trace.start), y_title="demand, capacity")


def _figures_rows(result: TuneResult) -> list[list[str]]:
    rows = []
    for name, trial in compared(result):
        swatch = f'<span class="swatch" style="background:{COLORS[name]}"></span>'
        cells = [swatch + escape(name)]
        for part in PARTS:
            figures = _part(trial, part)
            cells += [f"{figures.under_pct:.3f}", f"{figures.unserved_pct:.3f}", f"{figures.cost_vs_oracle:.2f}×"]
        rows.append(cells)
    return rows


def _knobs_rows(result: TuneResult) -> list[list[str]]:
    chosen, default = result.chosen.knobs.as_dict(), result.default.knobs.as_dict()
    return [[escape(name), escape(str(chosen[name])), escape(str(default[name]))] for name in chosen]


def _lead(text: str) -> str:
    return f'<p class="lead">{text}</p>'


def _warning(text: str) -> str:
    """A paragraph that must not be missed: the held-out check failed, or the history is too short."""
    return f'<p class="lead" role="alert" style="color:{SLO_COLOR}"><b>{escape(text)}</b></p>'


def render(result: TuneResult, metadata: dict[str, Any] | None = None, start: StartingSpec | None = None) -> str:
    """The whole report as one HTML string; ``start`` as for :func:`presage_scaler.tune.output.write_spec`."""
    name = Path(result.trace.source).name
    written = manifests(result, metadata or {}, start or StartingSpec())
    spec_yaml = yaml.safe_dump_all(written, sort_keys=False, explicit_start=True)
    columns = ("under-provisioned %", "unserved %", "cost vs oracle")
    header = ["policy"] + [f"{part}: {column}" for part in ("in-sample", "held out") for column in columns]
    body: list[str | go.Figure] = [
        f"<h1>presage tune: {escape(name)}</h1>",
        _lead(f"The cheapest policy found with {escape(result.slo.describe())}. {escape(result.split.describe())}."),
        _lead(f"<b>{escape(verdict(result))}</b>"),
        _warning(held_out_line(result)) if check(result).failed else _lead(escape(held_out_line(result))),
        *([_warning(line)] if (line := history_line(result)) is not None else []),
        _lead(f"The chosen spec, {escape(judged(result.chosen.in_sample))}."),
        *(_lead(f"{escape(line)}.") for line in (alike_line(result), undecided_line(result)) if line),
        plots.table(_figures_rows(result), header),
        _lead(escape(f"The {trigger_line(result)}.")),
        "<h2>Where does the chosen spec sit among the candidates?</h2>",
        _lead(
            f"Each point is one of the {len(result.trials)} candidates replayed (hover for its knobs). The choice "
            "is the cheapest point that meets the service level (the dashed line) in-sample with confidence: "
            "scaled by the margin its spells need, over the whole part and, when that is longer than a week, "
            "over its last week too; the starting spec stays when it meets it for at most "
            f"{ALIKE:.0%} more. The right-hand panel shows the same candidates "
            "on the held-out part, which played no part in the choice. The triangles are the seasonal trigger a "
            "KEDA user writes by hand, as set and with its target utilization tuned on the same part as the chosen "
            "spec. The reactive HPA is usually far above the "
            "service level: double-click a panel twice to see every point."
        ),
        frontier_figure(result),
        "<h2>How did the chosen spec follow the demand on the held-out part?</h2>",
        _lead("Ready capacity (ready replicas × per-replica capacity); click the legend to add the others."),
        held_out_figure(result),
        "<h2>The knobs</h2>",
        plots.table(_knobs_rows(result), ["knob", "chosen", "starting spec"]),
        "<h2>spec.yaml</h2>",
        f"<pre>{escape(spec_yaml)}</pre>",
    ]
    return plots.page(f"presage tune: {name}", body)


def write_report(
    result: TuneResult, path: Path, metadata: dict[str, Any] | None = None, start: StartingSpec | None = None
) -> None:
    path.write_text(render(result, metadata, start))

"""Plotly figures on one self-contained, offline HTML page, in the backtest's common look.

plotly.js is inlined once in the page's head and every figure is a ``<div>`` it draws, so the page
opens from disk with no network and keeps plotly's zoom, pan and hover. Series on a regular time
grid are sent as ``x0``/``dx`` and a binary array of y values (:func:`on_grid`), which keeps a month
of one-minute steps to a few hundred kilobytes per line. plotly comes with the ``backtest`` extra
(:mod:`presage_scaler.backtest.extra`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'
CSS = f"""
body {{ font-family: {FONT}; margin: 24px; color: #222; max-width: 1200px; }}
h1 {{ font-size: 22px; margin-bottom: 4px; }} h2 {{ font-size: 17px; margin-top: 32px; }}
p.lead {{ color: #444; }}
table {{ border-collapse: collapse; margin: 8px 0; font-size: 14px; }}
th, td {{ padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
.swatch {{ display: inline-block; width: 14px; height: 4px; margin-right: 6px; vertical-align: middle; }}
pre {{ background: #f6f6f6; padding: 10px; font-size: 12px; overflow: auto; }}
"""
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def wall_time(moment: datetime) -> str:
    """``moment`` as plotly's date axes take it: the wall-clock time in its own UTC offset (plotly
    has no time zones; the axis title names the offset, :func:`time_axis_title`)."""
    return moment.replace(tzinfo=None).isoformat(sep=" ")


def time_axis_title(moment: datetime) -> str:
    """The time axis title, e.g. "time (UTC+02:00)": the offset the trace's timestamps were written in."""
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"time (UTC{sign}{minutes // 60:02d}:{minutes % 60:02d})"


def compact(values: np.ndarray) -> np.ndarray:
    """float32 when that loses nothing a plot shows (half the bytes in the page), else float64."""
    finite = values[np.isfinite(values)]
    if finite.size and float(np.abs(finite).max()) >= _FLOAT32_MAX:
        return values.astype(np.float64)
    return values.astype(np.float32)


def on_grid(values: np.ndarray, start: datetime, step: timedelta) -> dict[str, Any]:
    """Keyword arguments of a trace whose point ``i`` is at ``start + i·step``."""
    return {"y": compact(values), "x0": wall_time(start), "dx": step / timedelta(milliseconds=1)}


def style(figure: go.Figure, *, x_title: str, y_title: str, height: int = 420) -> go.Figure:
    """The common look: white, both axes titled, the legend in one row above the plot, and hover
    listing every series at the hovered time."""
    figure.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 20, "t": 40, "b": 50},
        font={"family": FONT, "size": 12},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0},
        hovermode="x unified",
        hoverlabel={"namelength": -1},
    )
    figure.update_xaxes(title_text=x_title)
    figure.update_yaxes(title_text=y_title, rangemode="tozero")
    return figure


def figure_div(figure: go.Figure) -> str:
    """One figure as a ``<div>`` and the script that draws it (plotly.js must already be on the page)."""
    height = figure.layout.height
    return pio.to_html(
        figure,
        full_html=False,
        include_plotlyjs=False,
        config=CONFIG,
        default_height=f"{height}px" if height else "100%",
    )


def page(title: str, body: Iterable[str | go.Figure], css: str = "") -> str:
    """A whole HTML page: ``body`` in order, each figure drawn where it stands, HTML strings as
    they are (escape them first)."""
    parts = "\n".join(figure_div(part) if isinstance(part, go.Figure) else part for part in body)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<style>{CSS}{css}</style>\n<script type="text/javascript">{get_plotlyjs()}</script>\n</head><body>\n'
        f"{parts}\n</body></html>\n"
    )


def table(rows: Iterable[Sequence[str]], header: Sequence[str]) -> str:
    """An HTML table in the page's style; cells are HTML (escape text first), the header is text."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"

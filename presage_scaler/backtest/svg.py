"""Just enough SVG plotting for the report: frames, axes, peak-keeping downsampling, lines and bands.

Long traces have far more points than a plot has pixels. Each series is reduced to its minimum and
maximum per pixel column (:func:`envelope`), so a one-step spike still reaches its full height,
which averaging or decimation would hide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

import numpy as np

_TIME_STEPS = tuple(
    timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080, 20160, 43200)
)
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Frame:
    """A plot area in pixels and the data range it shows; x is in trace steps."""

    left: float
    top: float
    width: float
    height: float
    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, values: np.ndarray | float) -> np.ndarray:
        return self.left + (np.asarray(values, dtype=np.float64) - self.x0) / (self.x1 - self.x0) * self.width

    def y(self, values: np.ndarray | float) -> np.ndarray:
        span = (self.y1 - self.y0) or 1.0
        return self.top + self.height - (np.asarray(values, dtype=np.float64) - self.y0) / span * self.height

    @property
    def bottom(self) -> float:
        return self.top + self.height


def _columns(positions: np.ndarray, frame: Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which ``positions`` are inside the frame, and where each pixel column's run of them starts
    (indices into the inside ones) and how long it is. ``positions`` are ascending."""
    inside = (positions >= frame.x0) & (positions <= frame.x1)
    columns = np.floor((positions[inside] - frame.x0) / (frame.x1 - frame.x0) * frame.width).astype(np.int64)
    starts = np.flatnonzero(np.diff(columns, prepend=-1))
    return inside, starts, np.diff(np.append(starts, columns.size))


def envelope(
    positions: np.ndarray, lows: np.ndarray, highs: np.ndarray, frame: Frame
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pixel column: its mean position, the minimum of ``lows`` and the maximum of ``highs``.

    ``positions`` are ascending x values; points outside the frame's x range are dropped.
    """
    inside, starts, counts = _columns(positions, frame)
    if starts.size == 0:
        return np.empty(0), np.empty(0), np.empty(0)
    return (
        np.add.reduceat(positions[inside], starts) / counts,
        np.minimum.reduceat(lows[inside], starts),
        np.maximum.reduceat(highs[inside], starts),
    )


def _points(xs: np.ndarray, ys: np.ndarray) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs.tolist(), ys.tolist(), strict=True))


def line(positions: np.ndarray, values: np.ndarray, frame: Frame, style: str) -> str:
    """A polyline through ``values`` that keeps each pixel column's minimum and maximum."""
    xs, lows, highs = envelope(positions, values, values, frame)
    if xs.size == 0:
        return ""
    # Two points per column: the column's range drawn as a vertical stroke, then on to the next.
    px = np.repeat(frame.x(xs), 2)
    py = np.column_stack([frame.y(lows), frame.y(highs)]).ravel()
    return f'<polyline fill="none" {style} points="{_points(px, py)}"/>'


def band(positions: np.ndarray, lows: np.ndarray, highs: np.ndarray, frame: Frame, style: str) -> str:
    """The area between ``lows`` and ``highs`` (column minimum of one, maximum of the other)."""
    xs, low, high = envelope(positions, lows, highs, frame)
    if xs.size == 0:
        return ""
    px = frame.x(np.concatenate([xs, xs[::-1]]))
    py = frame.y(np.concatenate([high, low[::-1]]))
    return f'<polygon {style} points="{_points(px, py)}"/>'


def marks(positions: np.ndarray, flags: np.ndarray, frame: Frame, top: float, height: float, color: str) -> str:
    """A strip with a rectangle per pixel column where ``flags`` holds, darker the more often it does."""
    inside, starts, counts = _columns(positions, frame)
    if starts.size == 0:
        return ""
    xs = frame.x(np.add.reduceat(positions[inside], starts) / counts)
    share = np.add.reduceat(flags[inside].astype(np.float64), starts) / counts
    width = max(1.0, frame.width / max(1.0, frame.x1 - frame.x0))
    return "".join(
        f'<rect x="{x - width / 2:.1f}" y="{top:.1f}" width="{width:.1f}" height="{height:.1f}" '
        f'fill="{color}" fill-opacity="{0.35 + 0.65 * s:.2f}"/>'
        for x, s in zip(xs.tolist(), share.tolist(), strict=True)
        if s > 0
    )


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 up to ``high``."""
    if high <= 0:
        return [0.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(high / step + 1e-9) + 1)]


def compact(value: float) -> str:
    """``1.2k``, ``3.4M``, ``0.5``."""
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / threshold:.3g}{suffix}"
    return f"{value:.3g}"


def time_ticks(start: datetime, step: timedelta, frame: Frame, count: int = 8) -> list[tuple[float, str]]:
    """Ticks at round local times (the trace's own UTC offset) across the frame: (x in steps, label)."""
    local = start.replace(tzinfo=None)
    span = (frame.x1 - frame.x0) * step
    spacing = next((s for s in _TIME_STEPS if span / s <= count), _TIME_STEPS[-1])
    first = local + frame.x0 * step
    tick = _EPOCH + math.ceil((first - _EPOCH) / spacing) * spacing
    ticks = []
    while (position := (tick - local) / step) <= frame.x1:
        if spacing >= timedelta(days=1):
            label = tick.strftime("%b %d")
        elif not ticks or (tick.hour, tick.minute) == (0, 0):
            label = tick.strftime("%b %d %H:%M")
        else:
            label = tick.strftime("%H:%M")
        ticks.append((position, label))
        tick += spacing
    return ticks


def axes(frame: Frame, x_ticks: Sequence[tuple[float, str]], y_ticks: Sequence[float], y_label: str) -> str:
    """Grid lines, tick labels and the y-axis label."""
    parts = [
        f'<rect x="{frame.left}" y="{frame.top}" width="{frame.width}" height="{frame.height}" '
        'fill="none" stroke="#bbb"/>'
    ]
    for value in y_ticks:
        y = float(frame.y(value))
        right = frame.left + frame.width
        parts.append(f'<line x1="{frame.left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{compact(value)}</text>')
    for position, label in x_ticks:
        x = float(frame.x(position))
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top}" y2="{frame.bottom}" class="grid"/>')
        parts.append(f'<text x="{x:.1f}" y="{frame.bottom + 16:.1f}" text-anchor="middle">{escape(label)}</text>')
    middle = frame.top + frame.height / 2
    parts.append(
        f'<text x="14" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 14 {middle:.1f})">'
        f"{escape(y_label)}</text>"
    )
    return "".join(parts)


def legend(items: Sequence[tuple[str, str]], x: float, y: float) -> str:
    """One row of swatches: (label, SVG style of the swatch line)."""
    parts = []
    for label, style in items:
        parts.append(f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{y:.1f}" y2="{y:.1f}" {style}/>')
        parts.append(f'<text x="{x + 27:.1f}" y="{y + 4:.1f}">{escape(label)}</text>')
        x += 40 + 6 * len(label)
    return "".join(parts)


def document(width: float, height: float, body: str, title: str) -> str:
    """A standalone ``<svg>`` element."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img"><title>{escape(title)}</title>{body}</svg>'
    )

"""The one place where wire-format scalars become typed values.

The API carries durations (``30s``, ``1h30m``), int-or-string amounts (``3`` or ``10%``) and
decimal strings (``"0.9"``) because Kubernetes CRDs have no better types for them. Everything
past parsing works with :class:`datetime.timedelta`, :class:`Amount` and ``float``. Parse errors
are ``ValueError`` whose message quotes the bad value; the caller adds the field path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# Go's time.ParseDuration syntax without a sign: what users already write for Kubernetes.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
_DURATION_RE = re.compile(DURATION_PATTERN)
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")

# A decimal strictly between 0 and 1, written the way a CR carries it ("0.9", ".95").
QUANTILE_PATTERN = r"^0?\.[0-9]*[1-9][0-9]*$"
_QUANTILE_RE = re.compile(QUANTILE_PATTERN)
DECIMAL_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
_DECIMAL_RE = re.compile(DECIMAL_PATTERN)
AMOUNT_PATTERN = r"^[0-9]+(\.[0-9]+)?%?$"
_AMOUNT_RE = re.compile(AMOUNT_PATTERN)


def _quote(raw: object) -> str:
    return f'"{raw}"' if isinstance(raw, str) else repr(raw)


def parse_duration(raw: object) -> timedelta:
    """Parse a Go-style duration (``30s``, ``5m``, ``336h``, ``1h30m``, ``1.5h``)."""
    if isinstance(raw, timedelta):
        return raw
    if not isinstance(raw, str) or not _DURATION_RE.match(raw):
        raise ValueError(f"{_quote(raw)} is not a duration such as 30s, 5m or 1h30m")
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART_RE.findall(raw))
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """Render a duration the way users write it: ``1h30m``, ``5m``, ``30s``, ``0s``."""
    total = value.total_seconds()
    if total <= 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{int(hours)}h")
    if minutes:
        parts.append(f"{int(minutes)}m")
    if seconds:
        parts.append(f"{seconds:g}s")
    return "".join(parts)


@dataclass(frozen=True)
class Amount:
    """An int-or-string quantity: an absolute number, or a percentage of some base."""

    value: float
    percent: bool = False

    def of(self, base: float) -> float:
        """The absolute amount: ``value`` itself, or ``value`` percent of ``base``."""
        return base * self.value / 100.0 if self.percent else self.value

    def __str__(self) -> str:
        number = f"{self.value:g}"
        return f"{number}%" if self.percent else number


def parse_amount(raw: object, *, allow_percent: bool = True) -> Amount:
    """Parse an int-or-string amount: ``3``, ``2.5``, ``"3"`` or (when allowed) ``"10%"``."""
    if isinstance(raw, Amount):
        return raw
    if isinstance(raw, bool):
        raise ValueError(f"{_quote(raw)} is not a number")
    if isinstance(raw, int | float):
        if not math.isfinite(raw) or raw < 0:
            raise ValueError(f"{_quote(raw)} is not a non-negative number")
        return Amount(float(raw))
    if isinstance(raw, str):
        text = raw.strip()
        if text.endswith("%"):
            if not allow_percent:
                raise ValueError(f"{_quote(raw)} is not a number (a percentage is not allowed here)")
            if not _AMOUNT_RE.match(text):
                raise ValueError(f"{_quote(raw)} is not a non-negative percentage")
            return Amount(float(text[:-1]), percent=True)
        if _DECIMAL_RE.match(text):
            return Amount(float(text))
        kind = "a non-negative number or percentage" if allow_percent else "a non-negative number"
        raise ValueError(f"{_quote(raw)} is not {kind}")
    raise ValueError(f"{_quote(raw)} is not a number or percentage")


def parse_quantile(raw: object) -> float:
    """Parse a quantile level carried as a string (``"0.9"``): strictly between 0 and 1."""
    text = f"{raw}" if isinstance(raw, float) else raw
    if not isinstance(text, str) or not _QUANTILE_RE.match(text.strip()):
        raise ValueError(f'{_quote(raw)} is not a quantile strictly between 0 and 1, such as "0.9"')
    return float(text)


def format_quantile(value: float) -> str:
    """The canonical string of a quantile level: ``0.9``, ``0.95``."""
    return f"{value:g}"


def parse_decimal(raw: object) -> float:
    """Parse a non-negative decimal carried as a string (``"0.25"``)."""
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw) and raw >= 0:
        return float(raw)
    if not isinstance(raw, str) or not _DECIMAL_RE.match(raw.strip()):
        raise ValueError(f'{_quote(raw)} is not a non-negative decimal such as "0.25"')
    return float(raw)


def format_decimal(value: float) -> str:
    """A compact, exact-enough decimal string for status fields (at most 4 fraction digits)."""
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text

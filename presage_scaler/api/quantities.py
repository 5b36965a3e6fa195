"""The one place where wire-format scalars become typed values.

The API carries durations (``30s``, ``1h30m``), int-or-string amounts (``3`` or ``10%``) and
decimal strings (``"0.9"``) because Kubernetes CRDs have no better types for them. Everything
past parsing works with :class:`datetime.timedelta`, :class:`Amount` and ``float``. Parse errors
are ``ValueError`` whose message quotes the bad value; the caller adds the field path.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

_NANOS_PER_UNIT = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
    "d": 24 * 3600 * 10**9,
}
# Go's time.ParseDuration syntax without a sign, what users already write for Kubernetes, with the
# digits of each part bounded so that no string within the 32-character limit can exceed Go's
# range (the largest sum is under 10^6 hours against Go's 2562047h): a duration the API server
# accepts is one both Go and Python represent exactly, so no tenant value can overflow either.
_DURATION_PARTS = {"h": 5, "m": 7, "s": 9, "ms": 12, "us": 15, "µs": 15, "ns": 18}
_GO_PART = (
    "(" + "|".join(rf"[0-9]{{1,{digits}}}(\.[0-9]{{1,9}})?{unit}" for unit, digits in _DURATION_PARTS.items()) + ")"
)
# Days, which Go does not know, may lead in whole numbers (``7d``, ``1d12h``): seasons and histories
# are written in days, and the CEL that compares durations (:func:`presage_scaler.api.validation_rules.cel_nanoseconds`)
# counts the one leading part apart and lets Go read the rest. 9999d is 239976h, so the bound
# above still holds with the rest of the 32 characters.
_DAYS_PART = "[0-9]{1,4}d"
DURATION_PATTERN = f"^({_DAYS_PART}{_GO_PART}*|{_GO_PART}+)$"
DURATION_MAX_LENGTH = 32
_DURATION_RE = re.compile(DURATION_PATTERN)
DURATION_ALLOWED = "a duration such as 30s, 5m, 1h30m or 7d (whole days first; at most 9999d or 99999h)"
_DURATION_PART_RE = re.compile(r"([0-9]+)(?:\.([0-9]+))?(ns|us|µs|ms|s|m|h|d)")

# A decimal strictly between 0 and 1, written the way a CR carries it ("0.9", ".95").
QUANTILE_PATTERN = r"^0?\.[0-9]*[1-9][0-9]*$"
_QUANTILE_RE = re.compile(QUANTILE_PATTERN)
DECIMAL_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
_DECIMAL_RE = re.compile(DECIMAL_PATTERN)
AMOUNT_PATTERN = r"^[0-9]+(\.[0-9]+)?%?$"
_AMOUNT_RE = re.compile(AMOUNT_PATTERN)
# What each kind of value may be, in the words both presage and the API server use to refuse one:
# '"<value>" is not <allowed>'. No single quotes: the CRDs carry these inside CEL string literals.
QUANTILE_ALLOWED = 'a quantile strictly between 0 and 1, written as a string such as "0.9"'
DECIMAL_ALLOWED = 'a non-negative decimal written as a string such as "0.25"'
AMOUNT_ALLOWED = 'a non-negative integer, or a string such as "2.5" or "10%"'
NUMBER_ALLOWED = 'a non-negative integer, or a string such as "2.5"'


def quote(raw: object) -> str:
    """A bad value as an error message shows it: a string in double quotes, as in the
    '"<value>" is not <allowed>' messages the API server gives too, anything else as its repr."""
    return f'"{raw}"' if isinstance(raw, str) else repr(raw)


class GoDuration(timedelta):
    """A parsed duration that remembers its exact length in nanoseconds, and the text it was read from.

    ``timedelta`` keeps microseconds; the API server compares durations in nanoseconds. Rules that
    compare durations (``history >= resolution``, ``min <= max``, "at least 1s") use
    :attr:`nanoseconds` so that presage and the API server give the same verdict on ``1500ns``.
    """

    __slots__ = ("nanoseconds", "text")  # one per duration field of every parsed spec: no __dict__ each
    nanoseconds: int
    text: str | None
    """What the duration was parsed from; None when it was computed."""

    def __new__(cls, nanoseconds: int, text: str | None = None) -> GoDuration:
        value = super().__new__(cls, microseconds=nanoseconds // 1000)
        value.nanoseconds = nanoseconds
        value.text = text
        return value

    def __reduce__(self) -> tuple[type[GoDuration], tuple[int, str | None]]:
        # timedelta's own would pass days, seconds and microseconds to __new__ and lose the
        # nanoseconds: a parsed spec copied or sent to another process keeps its exact durations.
        return (GoDuration, (self.nanoseconds, self.text))


def nanoseconds(value: timedelta) -> int:
    """The exact length of a duration in nanoseconds (whole microseconds for a plain timedelta)."""
    if isinstance(value, GoDuration):
        return value.nanoseconds
    return ((value.days * 86400 + value.seconds) * 10**6 + value.microseconds) * 1000


def parse_duration(raw: object) -> timedelta:
    """Parse a Go-style duration (``30s``, ``5m``, ``336h``, ``1h30m``, ``1.5h``), which may start with
    whole days (``7d``, ``1d12h``).

    Computes nanoseconds the way Go's ``time.ParseDuration`` does (integer part times the unit,
    plus the fraction through float64, truncated), so the value is the one the API server's CEL
    rules saw.
    """
    if isinstance(raw, timedelta):
        return raw
    if not isinstance(raw, str) or len(raw) > DURATION_MAX_LENGTH or not _DURATION_RE.fullmatch(raw):
        raise ValueError(f"{quote(raw)} is not {DURATION_ALLOWED}")
    return _duration_of(raw)


@functools.lru_cache(maxsize=4096)
def _duration_of(text: str) -> GoDuration:
    """The duration ``text`` (already validated) spells; one shared value per text, since every
    scaler's spec repeats the same few ("1m", "5m", the defaults) and a GoDuration is immutable."""
    total = 0
    for whole, fraction, unit in _DURATION_PART_RE.findall(text):
        per_unit = _NANOS_PER_UNIT[unit]
        total += int(whole) * per_unit
        if fraction and int(fraction):
            total += int(float(int(fraction)) * (float(per_unit) / 10 ** len(fraction)))
    return GoDuration(total, text)


def format_duration(value: timedelta) -> str:
    """Render a duration the way users write it, exactly: ``1h30m``, ``5m``, ``1.5s``, ``250ms``, ``0s``."""
    total = nanoseconds(value)
    if total <= 0:
        return "0s"
    hours, rest = divmod(total, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds, fraction = divmod(rest, 10**9)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if fraction and not (hours or minutes or seconds):
        for unit, size in (("ms", 10**6), ("us", 10**3)):
            if fraction % size == 0:
                return f"{fraction // size}{unit}"
        return f"{fraction}ns"
    if seconds or fraction:
        parts.append(f"{seconds}.{fraction:09d}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)


def wire_duration(value: timedelta) -> str:
    """A duration as a spec carries it: :func:`format_duration`'s form where the API takes that, else
    the text it was parsed from. Past 99999h the canonical form has more hour digits than the pattern
    allows (``9999d`` is ``239976h``), and no one form of a long sum fits the 32 characters its text
    did; the text read back is the same duration."""
    canonical = format_duration(value)
    text = getattr(value, "text", None)
    if text is None or (len(canonical) <= DURATION_MAX_LENGTH and _DURATION_RE.fullmatch(canonical)):
        return canonical
    return text


AMOUNT_MAX_LENGTH = 32
AMOUNT_MAX_INTEGER = 2**53 - 1
"""The largest integer an int-or-string field takes as a number: the largest a float64 holds exactly."""


def plain_number(value: float) -> str:
    """A finite number written out in full (``12.5``, ``1234567``, ``0.00001``), never in e-notation,
    so that it reads back through the API's decimal pattern."""
    if value.is_integer():
        return str(int(value))
    return format(Decimal(repr(value)), "f")


@dataclass(frozen=True, slots=True)
class Amount:
    """An int-or-string quantity: an absolute number, or a percentage of some base."""

    value: float
    percent: bool = False

    def of(self, base: float) -> float:
        """The absolute amount: ``value`` itself, or ``value`` percent of ``base``."""
        return base * self.value / 100.0 if self.percent else self.value

    def __str__(self) -> str:
        number = plain_number(self.value)
        return f"{number}%" if self.percent else number


WHOLE_NUMBER_MESSAGE = "must be an integer written without a decimal point (3, not 3.0)"


def wire_integer(raw: object, low: int, high: int) -> int:
    """An integer as the API server takes it from JSON: never a bool, a numeric string or a float
    (``3.0`` is refused by the CRD's ``type(self)`` rule). Raises ValueError outside ``[low, high]``."""
    if isinstance(raw, float):
        raise ValueError(f"{quote(raw)} {WHOLE_NUMBER_MESSAGE}")
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{quote(raw)} is not an integer")
    if not low <= raw <= high:
        raise ValueError(f"{quote(raw)} is out of range: must be between {low} and {high}")
    return raw


def parse_amount(raw: object, *, allow_percent: bool = True) -> Amount:
    """Parse an int-or-string amount: ``3``, ``"2.5"``, ``"3"`` or (when allowed) ``"10%"``.

    As on the API server: a number must be an integer (a fraction goes in a string) between 0 and
    :data:`AMOUNT_MAX_INTEGER`, and a string must match the pattern exactly (no spaces).
    """
    if isinstance(raw, Amount):
        return raw
    allowed = AMOUNT_ALLOWED if allow_percent else NUMBER_ALLOWED
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _amount_of(float(wire_integer(raw, 0, AMOUNT_MAX_INTEGER)), False)
    pattern = _AMOUNT_RE if allow_percent else _DECIMAL_RE
    if not isinstance(raw, str) or len(raw) > AMOUNT_MAX_LENGTH or not pattern.fullmatch(raw):
        raise ValueError(f"{quote(raw)} is not {allowed}")
    if raw.endswith("%"):
        return _amount_of(float(raw[:-1]), True)
    return _amount_of(float(raw), False)


@functools.lru_cache(maxsize=4096)
def _amount_of(value: float, percent: bool) -> Amount:
    """One shared (immutable) Amount per value: every scaler's spec repeats the same few."""
    return Amount(value, percent)


QUANTILE_MAX_LENGTH = 16
DECIMAL_MAX_LENGTH = 32


def _in_quotes(raw: object, parse: Callable[[str], float]) -> ValueError | None:
    """The refusal of a bare number where a string is carried (YAML reads an unquoted ``0.95`` as a
    number) when the same number in quotes would be accepted: saying only what is allowed would read
    as if 0.95 were not a quantile."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        return None
    text = plain_number(float(raw))
    try:
        parse(text)
    except ValueError:
        return None
    return ValueError(f'{quote(raw)} must be written in quotes: "{text}"')


def parse_quantile(raw: object) -> float:
    """Parse a quantile level carried as a string (``"0.9"``): strictly between 0 and 1."""
    if not isinstance(raw, str) or len(raw) > QUANTILE_MAX_LENGTH or not _QUANTILE_RE.fullmatch(raw):
        raise _in_quotes(raw, parse_quantile) or ValueError(f"{quote(raw)} is not {QUANTILE_ALLOWED}")
    return float(raw)


def format_quantile(value: float) -> str:
    """The canonical string of a quantile level: ``0.9``, ``0.95``."""
    return plain_number(value)


def parse_decimal(raw: object) -> float:
    """Parse a non-negative decimal carried as a string (``"0.25"``)."""
    if not isinstance(raw, str) or len(raw) > DECIMAL_MAX_LENGTH or not _DECIMAL_RE.fullmatch(raw):
        raise _in_quotes(raw, parse_decimal) or ValueError(f"{quote(raw)} is not {DECIMAL_ALLOWED}")
    return float(raw)


def format_decimal(value: float) -> str:
    """A compact, exact-enough decimal string for status fields (at most 4 fraction digits)."""
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def format_exact(value: float) -> str:
    """``value`` to every digit it has: the shortest plain decimal that reads back as the same float, so
    that a comparison made on the text is the one made on the number (non-finite values as
    :func:`format_decimal` writes them)."""
    return plain_number(value) if math.isfinite(value) else format_decimal(value)


def format_significant(value: float, digits: int = 4) -> str:
    """``value`` as a person reads a figure: ``digits`` significant digits and every digit of its whole
    part, in plain decimal notation, at most 6 fraction digits (274.3, 5.107, 12346, 0.01235)."""
    if not math.isfinite(value) or value == 0:
        return format_decimal(value)
    decimals = min(max(0, digits - 1 - math.floor(math.log10(abs(value)))), 6)
    text = f"{value:.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text

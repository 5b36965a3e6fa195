"""The argparse types the commands share: a value's own parser, its message kept, and durations."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta

from presage_scaler.api.quantities import parse_duration


def typed(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type that reports the parser's own message."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


def parse_flag_duration(text: str) -> timedelta:
    """A duration flag's value. A negative one is refused with the positive duration it most likely
    meant, since no duration flag takes a negative (``main``'s parser hands ``--lead-time -5m`` to
    the flag rather than reading ``-5m`` as another flag)."""
    if text.startswith("-"):
        magnitude = text.removeprefix("-")
        try:
            parse_duration(magnitude)
        except ValueError:
            magnitude = "5m"
        raise ValueError(f"must be a positive duration such as {magnitude}; got {text!r}")
    return parse_duration(text)


DURATION = typed(parse_flag_duration)
"""The argparse type of every duration flag."""

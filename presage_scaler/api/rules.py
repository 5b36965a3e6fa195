"""Validation pieces both kinds' declarations use: the bounds of a URL field, and the CEL guards
and floors for duration fields.
"""

from __future__ import annotations

from presage_scaler.api import quantities
from presage_scaler.api.quantities import nanoseconds
from presage_scaler.api.schema import Rule, cel_matches

URL = {"pattern": r"^https?://", "maxLength": 2048}


def durations_parse(*exprs: str) -> str:
    """A CEL guard: every duration in ``exprs`` is well-formed, so ``duration()`` on it cannot fail
    (a malformed one is reported once, by its own field's rule, not again as a conversion error)."""
    return " && ".join(cel_matches(expr, quantities.DURATION_PATTERN) for expr in exprs)


def at_least(duration_field: str, minimum: str) -> Rule:
    """A period presage divides by or waits on, so it has a floor (``1s``: shorter is a typo, not a
    setting); compared in nanoseconds on both sides, as the API server does."""
    return Rule(
        cel=(
            f"!({durations_parse(f'self.{duration_field}')})"
            f" || duration(self.{duration_field}) >= duration('{minimum}')"
        ),
        message=f"{duration_field} must be at least {minimum}",
        check=lambda obj: (
            nanoseconds(getattr(obj, _snake(duration_field))) >= nanoseconds(quantities.parse_duration(minimum))
        ),
        field_path=f".{duration_field}",
    )


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)

"""Validation pieces both kinds' declarations use: the bounds of a URL field, and the CEL guards
and floors for duration fields.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from presage_scaler.api import quantities
from presage_scaler.api.quantities import nanoseconds
from presage_scaler.api.schema import Rule, cel_matches

# Schema keywords for schema.field(**URL) (typed Any: they fill its **openapi, not its named parameters).
URL: dict[str, Any] = {"pattern": r"^https?://", "maxLength": 2048}
_NANOSECONDS_PER_DAY = nanoseconds(timedelta(days=1))


def durations_parse(*exprs: str) -> str:
    """A CEL guard: every duration in ``exprs`` is well-formed, so ``duration()`` on it cannot fail
    (a malformed one is reported once, by its own field's rule, not again as a conversion error)."""
    return " && ".join(cel_matches(expr, quantities.DURATION_PATTERN) for expr in exprs)


def cel_nanoseconds(expr: str) -> str:
    """A CEL int: the length in nanoseconds of the duration string ``expr`` (already guarded by
    :func:`durations_parse`), the unit presage compares durations in too (:func:`nanoseconds`).

    CEL's ``duration()`` is Go's, which knows no days, so the leading ``<n>d`` part the API allows is
    counted apart and Go reads the rest (``'0s'`` appended, so that nothing left is ``0s``). No string
    is built from a number: the API server could not bound its length, and so the rule's cost."""
    rest = f"{expr}.substring({expr}.indexOf('d') + 1) + '0s'"
    return (
        f"({expr}.contains('d') ? int({expr}.substring(0, {expr}.indexOf('d'))) * {_NANOSECONDS_PER_DAY} : 0)"
        f" + int(duration({rest}))"
    )


def at_least(duration_field: str, minimum: str) -> Rule:
    """A period presage divides by or waits on, so it has a floor (``1s``: shorter is a typo, not a
    setting); compared in nanoseconds on both sides, as the API server does."""
    return Rule(
        cel=(
            f"!({durations_parse(f'self.{duration_field}')})"
            f" || {cel_nanoseconds(f'self.{duration_field}')} >= {nanoseconds(quantities.parse_duration(minimum))}"
        ),
        message=f"{duration_field} must be at least {minimum}",
        check=lambda obj: (
            nanoseconds(getattr(obj, _snake(duration_field))) >= nanoseconds(quantities.parse_duration(minimum))
        ),
        field_path=f".{duration_field}",
    )


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)

"""The machinery behind the API declaration in :mod:`presage_scaler.api.kinds`.

A field is declared once, as a pydantic field with a description, a wire default and OpenAPI
bounds; a cross-field rule is declared once, as CEL for the API server plus the same check in
Python for parsing outside a cluster (``presage backtest --spec``). The CRD generator
(:mod:`crdgen`), the reference generator (:mod:`docgen`) and the parser (:mod:`parse`) all read
these declarations; nothing about a field is written twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator
from pydantic.alias_generators import to_camel

from presage_scaler.api import quantities


@dataclass(frozen=True, eq=False)
class Wire:
    """How a typed value travels in a CR: its OpenAPI schema, its type as the docs name it, and the
    pattern a string form must match (checked by a CEL rule, whose message reads better than the
    regex the API server prints for a ``pattern``)."""

    schema: dict[str, Any]
    doc_type: str
    pattern: str | None = None


def cel_matches(expr: str, pattern: str) -> str:
    """A CEL ``matches`` call; raw string literal so the regex's backslashes survive."""
    return f"{expr}.matches(r'{pattern}')"


def _matching(pattern: str, max_length: int, allowed: str, *, int_or_string: bool = False) -> dict[str, Any]:
    """Schema keywords for a string that must match ``pattern``: the API server's message quotes the
    value and says what is allowed, as presage's own parser does."""
    rule = cel_matches("self", pattern)
    value = "self"
    if int_or_string:
        rule, value = f"type(self) == int || (type(self) == string && {rule})", "string(self)"
    return {
        "maxLength": max_length,
        "x-kubernetes-validations": [
            {
                "rule": rule,
                "message": f"must be {allowed}",
                "messageExpression": f"'\"' + {value} + '\" is not {allowed}'",
            }
        ],
    }


@dataclass(frozen=True)
class Rule:
    """A cross-field validation rule: CEL for the API server, ``check`` for Python parsing.

    ``message`` names the fields involved; ``field_path`` (relative, e.g. ``.minReplicas``) lets
    the API server report the error on that field.
    """

    cel: str
    message: str
    check: Callable[[Any], bool]
    field_path: str | None = None


@dataclass(frozen=True)
class Extra:
    """Per-field facts pydantic does not model: OpenAPI keywords and required-with-default."""

    openapi: dict[str, Any] = dataclass_field(default_factory=dict)
    required: bool = False
    object_default: bool = False


def _serialize_time(value: datetime) -> str:
    """RFC 3339 in UTC, to the second; the year always in four digits (``strftime`` writes the year 453
    as ``453``, which no parser reads back)."""
    return value.astimezone(UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def _parse_time(raw: object) -> datetime:
    """An RFC 3339 timestamp as the API server writes it (``2026-12-01T09:20:00Z``)."""
    if isinstance(raw, datetime):
        return raw
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not an RFC 3339 timestamp")
    return datetime.fromisoformat(raw)


def _parse_measured(raw: object) -> float:
    """A status figure: a number, or a decimal string presage wrote."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError(f"{raw!r} is not a number")
    try:
        return float(raw)
    except OverflowError:
        raise ValueError(f"{raw!r} is out of range") from None


# OpenAPI's "integer" lets 3.0 through, which CEL rules reading the field then fail on; a rule reading
# the value refuses it at once, on every integer field, with a message that says why.
_INTEGER_ONLY = {
    "x-kubernetes-validations": [{"rule": "type(self) == int", "message": quantities.WHOLE_NUMBER_MESSAGE}]
}


def _integer(bits: int) -> Any:
    """An API integer of ``bits`` bits, its range enforced when parsing. int32's bounds are in the CRD
    too; int64's are the API server's own (a bound of 2^63 - 1 would reach it as a float, which it
    refuses as an int64 maximum)."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    bounds = {"minimum": low, "maximum": high} if bits < 64 else {}
    return Annotated[
        int,
        BeforeValidator(lambda raw: quantities.wire_integer(raw, low, high)),
        Wire({"type": "integer", "format": f"int{bits}", **bounds, **_INTEGER_ONLY}, "integer"),
    ]


Duration = Annotated[
    timedelta,
    BeforeValidator(quantities.parse_duration),
    PlainSerializer(quantities.wire_duration, return_type=str),
    Wire(
        {
            "type": "string",
            **_matching(quantities.DURATION_PATTERN, quantities.DURATION_MAX_LENGTH, quantities.DURATION_ALLOWED),
        },
        "string",
        quantities.DURATION_PATTERN,
    ),
]
Quantile = Annotated[
    float,
    BeforeValidator(quantities.parse_quantile),
    PlainSerializer(quantities.format_quantile, return_type=str),
    Wire(
        {
            "type": "string",
            **_matching(quantities.QUANTILE_PATTERN, quantities.QUANTILE_MAX_LENGTH, quantities.QUANTILE_ALLOWED),
        },
        "string",
        quantities.QUANTILE_PATTERN,
    ),
]
DecimalString = Annotated[
    float,
    BeforeValidator(quantities.parse_decimal),
    PlainSerializer(quantities.format_decimal, return_type=str),
    Wire(
        {
            "type": "string",
            **_matching(quantities.DECIMAL_PATTERN, quantities.DECIMAL_MAX_LENGTH, quantities.DECIMAL_ALLOWED),
        },
        "string",
        quantities.DECIMAL_PATTERN,
    ),
]
# A status value that may be negative or fractional (a forecast); written as a decimal string.
MeasuredString = Annotated[
    float,
    BeforeValidator(_parse_measured),
    PlainSerializer(quantities.format_decimal, return_type=str),
    Wire({"type": "string"}, "string"),
]


def _int_or_string(pattern: str, allowed: str) -> Wire:
    schema = {
        "x-kubernetes-int-or-string": True,
        "minimum": 0,
        "maximum": quantities.AMOUNT_MAX_INTEGER,
        **_matching(pattern, quantities.AMOUNT_MAX_LENGTH, allowed, int_or_string=True),
    }
    return Wire(schema, "int-or-string", pattern)


IntOrPercent = Annotated[
    quantities.Amount,
    BeforeValidator(quantities.parse_amount),
    PlainSerializer(str, return_type=str),
    _int_or_string(quantities.AMOUNT_PATTERN, quantities.AMOUNT_ALLOWED),
]
IntOrDecimal = Annotated[
    quantities.Amount,
    BeforeValidator(lambda raw: quantities.parse_amount(raw, allow_percent=False)),
    PlainSerializer(str, return_type=str),
    _int_or_string(quantities.DECIMAL_PATTERN, quantities.NUMBER_ALLOWED),
]
Timestamp = Annotated[
    datetime,
    BeforeValidator(_parse_time),
    PlainSerializer(_serialize_time, return_type=str),
    Wire({"type": "string", "format": "date-time"}, "string"),
]
Int64 = _integer(64)
Int32 = _integer(32)

_UNSET: Any = object()
_PYDANTIC_CONSTRAINTS = {
    "minimum": "ge",
    "maximum": "le",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_length",
    "maxItems": "max_length",
    "pattern": "pattern",
}


def field(
    description: str = "",
    *,
    default: Any = _UNSET,
    default_factory: Callable[[], Any] | None = None,
    required: bool = False,
    alias: str | None = None,
    object_default: bool = False,
    **openapi: Any,
) -> Any:
    """Declare an API field.

    ``default`` is the wire value (``"5m"``, ``"10%"``), parsed like user input, so the CRD, the
    docs and Python agree on it. ``required`` marks a field required even though it has a
    default (the reference's ``ForecastBackend.spec.type``). ``object_default`` gives an optional
    nested object its fully defaulted value as CRD default, so the API server shows its defaults.
    ``openapi`` holds extra schema keywords (``minimum``, ``maxItems``, ...).
    """
    extra = Extra(openapi=openapi, required=required, object_default=object_default)
    # The same bounds the API server enforces, enforced when parsing outside a cluster too.
    constraints = {_PYDANTIC_CONSTRAINTS[k]: v for k, v in openapi.items() if k in _PYDANTIC_CONSTRAINTS}
    kwargs: dict[str, Any] = {
        "description": " ".join(description.split()) or None,
        "json_schema_extra": {"presage": extra},
    }
    kwargs.update(constraints)
    if alias is not None:
        kwargs["alias"] = alias
    if default_factory is not None:
        return Field(default_factory=default_factory, **kwargs)
    if default is not _UNSET:
        return Field(default=default, **kwargs)
    return Field(**kwargs)


def field_extra(info: Any) -> Extra:
    """The :class:`Extra` attached to a pydantic ``FieldInfo`` by :func:`field`."""
    extra = info.json_schema_extra or {}
    return extra.get("presage", Extra()) if isinstance(extra, dict) else Extra()


@functools.cache
def _declared_keys(model: type[BaseModel]) -> frozenset[str]:
    """Every field name and alias of ``model`` (a fixed set per class, so computed once)."""
    return frozenset(key for name, info in model.model_fields.items() for key in (name, info.alias) if key is not None)


class APIModel(BaseModel):
    """Base of every API object and nested type: camelCase on the wire, rules checked on parse."""

    # strict: no lax conversions ("3" to 3, "true" to True) that the API server would refuse.
    model_config = ConfigDict(
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
        extra="forbid",
        frozen=True,
    )
    cel_rules: ClassVar[tuple[Rule, ...]] = ()
    notes: ClassVar[tuple[str, ...]] = ()
    """Paragraphs on how presage uses the type, after its description: the reference prints them under
    the type's heading and the CRDs append them to its description, which ``kubectl explain`` shows."""

    @model_validator(mode="before")
    @classmethod
    def _prune_nulls(cls, data: Any) -> Any:
        """Drop declared fields set to null, as the API server prunes them before defaulting; a null
        under an undeclared key stays, to be refused as an unknown field like the API server does."""
        if not isinstance(data, dict) or not any(value is None for value in data.values()):
            return data  # the common case, on every status read: nothing to prune, no copy
        declared = _declared_keys(cls)
        return {key: value for key, value in data.items() if value is not None or key not in declared}

    @model_validator(mode="after")
    def _check_rules(self) -> APIModel:
        for rule in type(self).cel_rules:
            if not rule.check(self):
                raise ValueError(rule.message)
        return self

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase keys, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

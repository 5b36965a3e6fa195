"""Read the API declaration: one view of each field that both generators (CRDs and docs) share."""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from presage_scaler.api.schema import APIModel, Extra, Wire, field_extra

SCALAR_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
"""Python scalar types and the OpenAPI (and reference) type names they travel as."""


def type_description(model: type[APIModel]) -> str:
    """A model's docstring as one paragraph: the type description the reference prints."""
    return " ".join(inspect.cleandoc(model.__doc__ or "").split())


def noted(description: str, model: type[APIModel] | None) -> str:
    """A description followed by the ``notes`` of the type it describes, a paragraph each."""
    notes = model.notes if model is not None else ()
    return "\n\n".join([description, *(" ".join(note.split()) for note in notes)]) if notes else description


def _strip(tp: Any, metadata: tuple[Any, ...] = ()) -> tuple[Any, tuple[Any, ...]]:
    """Unwrap ``Optional`` and ``Annotated`` down to the base type, collecting metadata."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            metadata = (*metadata, *tp.__metadata__)
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"only X | None unions are supported in the API, got {tp}")
            tp = args[0]
        else:
            return tp, metadata


@dataclass(frozen=True)
class TypeView:
    """A field's type reduced to what the wire format needs."""

    base: Any
    metadata: tuple[Any, ...]

    @property
    def wire(self) -> Wire | None:
        return next((m for m in self.metadata if isinstance(m, Wire)), None)

    @property
    def model(self) -> type[APIModel] | None:
        """The nested API type, for an object field or the items of a list field."""
        tp = self.item.base if self.is_list else self.base
        return tp if isinstance(tp, type) and issubclass(tp, APIModel) else None

    @property
    def is_list(self) -> bool:
        return get_origin(self.base) is list

    @property
    def is_map(self) -> bool:
        return get_origin(self.base) is dict

    @property
    def item(self) -> TypeView:
        """The element type of a list, or the value type of a map."""
        return TypeView(*_strip(get_args(self.base)[-1]))

    @property
    def enum(self) -> tuple[str, ...] | None:
        return get_args(self.base) if get_origin(self.base) is Literal else None


@dataclass(frozen=True)
class FieldView:
    """One declared field: its wire name, type, description, default and extra facts."""

    wire_name: str
    info: FieldInfo
    type: TypeView
    extra: Extra

    @property
    def description(self) -> str:
        return self.info.description or ""

    @property
    def required(self) -> bool:
        return self.info.is_required() or self.extra.required

    @property
    def default(self) -> Any:
        """The wire default, or None when the field has none (or only an object default)."""
        return None if self.info.default is PydanticUndefined else self.info.default


def fields_of(model: type[APIModel]) -> list[FieldView]:
    """The model's fields in the order the reference lists them (by wire name)."""
    hints = typing.get_type_hints(model, include_extras=True)
    views = [
        FieldView(
            wire_name=info.alias or name,
            info=info,
            type=TypeView(*_strip(hints[name], tuple(info.metadata))),
            extra=field_extra(info),
        )
        for name, info in model.model_fields.items()
    ]
    return sorted(views, key=lambda view: view.wire_name)

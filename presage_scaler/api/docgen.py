"""Generate ``docs/api-reference.md`` from the API declaration, as Markdown.

The layout: a ``#`` title, a short table of contents, a ``##`` section per kind (scope, version,
description), then a ``###`` section per object path (depth first, fields by name) with its
description, the type's ``notes`` (how presage uses it) and a table
``Field | Type | Required | Default | Description``. An object-typed
field links to its own section. The text of every section and cell is the seed reference's (see
``tests/fixtures/presage-api-reference.seed.md``), where the default was the trailing
``Default: <value>.`` of a field's description.
"""

from __future__ import annotations

import re

from presage_scaler.api.introspect import SCALAR_TYPES, FieldView, TypeView, fields_of, type_description
from presage_scaler.api.kinds import GROUP, KINDS, VERSION, Kind
from presage_scaler.api.schema import APIModel

COLUMNS = ("Field", "Type", "Required", "Default", "Description")


def doc_type(view: TypeView) -> str:
    """The type as the reference names it: ``string``, ``[]object``, ``Shadow | Enforce``, ..."""
    if view.wire is not None:
        return view.wire.doc_type
    if view.enum is not None:
        return " | ".join(view.enum)
    if view.is_list:
        return f"[]{doc_type(view.item)}"
    if view.is_map or view.model is not None:
        return "object"
    return SCALAR_TYPES[view.base]


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation other than ``-``/``_`` dropped."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _link(text: str, heading: str) -> str:
    return f"[{text}](#{anchor(heading)})"


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _cell(text: str) -> str:
    """A table cell: a ``|`` would end the cell and a newline the row."""
    return text.replace("|", r"\|").replace("\n", "<br>")


def table_row(cells: list[str]) -> str:
    """One row of a Markdown table, its cells escaped."""
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _field_row(path: str, field: FieldView) -> str:
    name = _code(field.wire_name)
    if field.type.model is not None:
        name = _link(name, f"{path}.{field.wire_name}")
    default = "" if field.default is None else _code(f"{field.default}")
    return table_row([name, _code(doc_type(field.type)), "yes" if field.required else "", default, field.description])


def _sections(path: str, model: type[APIModel], description: str) -> list[str]:
    fields = fields_of(model)
    table = "\n".join(
        [table_row(list(COLUMNS)), table_row(["---"] * len(COLUMNS)), *(_field_row(path, f) for f in fields)]
    )
    notes = [" ".join(note.split()) for note in model.notes]
    blocks = [f"### {path}", description, *notes, table]
    for field in fields:
        nested = field.type.model
        if nested is None:
            continue
        # An object section repeats the field's own description; a list's describes its items.
        child = type_description(nested) if field.type.is_list else field.description or type_description(nested)
        blocks += _sections(f"{path}.{field.wire_name}", nested, child)
    return blocks


def _contents(kinds: list[Kind]) -> str:
    """Each kind and its spec and status sections; deeper sections are linked from their fields."""
    lines = []
    for kind in kinds:
        lines.append(f"- {_link(kind.name, kind.name)}")
        lines += [f"  - {_link(f'{kind.name}.{part}', f'{kind.name}.{part}')}" for part in ("spec", "status")]
    return "\n".join(lines)


def render_reference() -> str:
    """The whole API reference document."""
    kinds = sorted(KINDS, key=lambda k: k.name)
    blocks = [
        "<!-- Generated from the API declaration (presage_scaler/api/) by `presage crds`; do not edit. -->",
        "# API reference",
        f"API group: {GROUP}, version {VERSION}.",
        _contents(kinds),
    ]
    for kind in kinds:
        scope = "Namespaced" if kind.namespaced else "Cluster"
        blocks += [f"## {kind.name}", f"Scope: {scope}. Version: {VERSION}.", kind.description]
        blocks += _sections(f"{kind.name}.spec", kind.spec, type_description(kind.spec))
        blocks += _sections(f"{kind.name}.status", kind.status, type_description(kind.status))
    return "\n\n".join(blocks) + "\n"

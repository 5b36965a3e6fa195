"""Generate ``docs/api-reference.md`` from the API declaration, in the seed reference's format.

The format: a section per object path (depth first, fields by name), each with its description
and a tab-separated table ``Field / Type / Required / Description``; a field's description ends
with ``Default: <value>.`` when it has a default; empty trailing cells are dropped.
"""

from __future__ import annotations

from presage_scaler.api.introspect import SCALAR_TYPES, FieldView, TypeView, fields_of, type_description
from presage_scaler.api.schema import APIModel
from presage_scaler.api.types import GROUP, KINDS, VERSION


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


def _row(field: FieldView) -> str:
    description = field.description
    if field.default is not None:
        description = f"{description} Default: {field.default}.".strip()
    cells = [field.wire_name, doc_type(field.type), "yes" if field.required else "", description]
    return "\t".join(cells).rstrip("\t")


def _sections(path: str, model: type[APIModel], description: str) -> list[str]:
    fields = fields_of(model)
    table = "\n".join(["Field\tType\tRequired\tDescription", *(_row(f) for f in fields)])
    blocks = [path, description, table]
    for field in fields:
        nested = field.type.model
        if nested is None:
            continue
        # An object section repeats the field's own description; a list's describes its items.
        child = type_description(nested) if field.type.is_list else field.description or type_description(nested)
        blocks += _sections(f"{path}.{field.wire_name}", nested, child)
    return blocks


def render_reference() -> str:
    """The whole API reference document."""
    blocks = ["api-reference.md", "API reference", f"API group: {GROUP}, version {VERSION}."]
    for kind in sorted(KINDS, key=lambda k: k.name):
        scope = "Namespaced" if kind.namespaced else "Cluster"
        blocks += [kind.name, f"Scope: {scope}. Version: {VERSION}.", kind.description]
        blocks += _sections(f"{kind.name}.spec", kind.spec, type_description(kind.spec))
        blocks += _sections(f"{kind.name}.status", kind.status, type_description(kind.status))
    return "\n\n".join(blocks) + "\n"

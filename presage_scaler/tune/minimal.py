"""The fewest fields that say a spec: what ``presage tune`` writes to spec.yaml, so that a diff of it
against the user's own file shows what tuning changed and nothing else.

A field is left out when the spec parses the same without it (the API server fills in the same
default), unless the user wrote it (``keep``) or it is always written (``always``: ``mode``, so the
file says whether it enforces). A value is written as the user wrote it (``literal``: ``50`` rather
than ``"50"``) when that parses the same. Every step is checked against the parse of the whole, so
the result always parses to the very spec it was made from. Fields come in the order the user wrote
them, new ones after.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.schema import APIModel

FieldPath = tuple[str, ...]

_ABSENT = object()


def _paths(data: dict[str, Any], prefix: FieldPath = ()) -> list[FieldPath]:
    """Every field of ``data``, a mapping's fields before the mapping itself (lists are single values)."""
    found: list[FieldPath] = []
    for key, value in data.items():
        path = (*prefix, key)
        if isinstance(value, dict):
            found += _paths(value, path)
        found.append(path)
    return found


def _get(data: Any, path: FieldPath) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return _ABSENT
        data = data[key]
    return data


def _parent(data: dict[str, Any], path: FieldPath) -> dict[str, Any]:
    for key in path[:-1]:
        data = data[key]
    return data


def minimal(
    model: type[APIModel],
    full: dict[str, Any],
    *,
    literal: dict[str, Any] | None = None,
    keep: dict[str, Any] | None = None,
    always: Collection[FieldPath] = (),
) -> dict[str, Any]:
    """``full`` (a wire form of ``model``) with every field it can do without left out and the user's
    own spelling of each value kept (module docstring)."""
    target = parse(model, full)

    def same(data: dict[str, Any]) -> bool:
        try:
            return parse(model, data) == target
        except SpecError:
            return False

    spelled = copy.deepcopy(full)
    for path in _paths(full):
        value, theirs = _get(spelled, path), _get(literal, path)
        if isinstance(value, dict) or theirs is _ABSENT or theirs == value:
            continue
        _parent(spelled, path)[path[-1]] = theirs
        if not same(spelled):
            _parent(spelled, path)[path[-1]] = value

    result = copy.deepcopy(spelled)
    for path in _paths(spelled):
        value = _get(result, path)
        if path in always or _get(keep, path) is not _ABSENT or (isinstance(value, dict) and value):
            continue  # a mapping still holding a field that could not be left out stays
        trial = copy.deepcopy(result)
        del _parent(trial, path)[path[-1]]
        if same(trial):
            result = trial
        elif isinstance(value, dict):
            # A mapping the spec needs present, all of whose fields are defaults, is written whole
            # rather than as ``{}``.
            _parent(result, path)[path[-1]] = copy.deepcopy(_get(spelled, path))
    return _ordered(result, literal)


def _ordered(data: dict[str, Any], like: Any) -> dict[str, Any]:
    """``data`` with the fields ``like`` has in its order, then the others."""
    order = list(like) if isinstance(like, dict) else []
    keys = [key for key in order if key in data] + [key for key in data if key not in order]
    return {
        key: _ordered(data[key], like.get(key) if isinstance(like, dict) else None)
        if isinstance(data[key], dict)
        else data[key]
        for key in keys
    }

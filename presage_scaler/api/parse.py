"""Turn raw CR data into the typed API, with errors that name the field and the bad value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from presage_scaler.api.quantities import quote
from presage_scaler.api.schema import APIModel

M = TypeVar("M", bound=APIModel)


class SpecError(ValueError):
    """A CR that does not satisfy the API; ``problems`` holds one ``path: message`` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _message(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a field of this API (check the spelling)"
    context = error.get("ctx") or {}
    if kind == "value_error" and "error" in context:
        return str(context["error"])
    return f"{quote(error.get('input'))}: {error['msg'][0].lower()}{error['msg'][1:]}"


def parse(model: type[M], data: object, *, path: str = "spec") -> M:
    """Validate ``data`` (decoded JSON of any shape; None for an empty object) as ``model``; on failure
    raise :class:`SpecError` naming every bad field.

    >>> parse(PolicySpec, {"maxReplicas": 3, "headroom": "-5%"}, path="spec.policy")
    SpecError: spec.policy.headroom: "-5%" is not a non-negative percentage
    """
    try:
        return model.model_validate(data or {})
    except ValidationError as exc:
        raise SpecError([f"{_path(path, tuple(e['loc']))}: {_message(e)}" for e in exc.errors()]) from None
    except RecursionError:
        raise SpecError([f"{path}: nested too deeply to be a {model.__name__}"]) from None

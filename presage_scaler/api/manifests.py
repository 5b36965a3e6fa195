"""API objects as users keep them: YAML documents in a file or on stdin, read with bounds.

One reader for every command that takes a manifest (``presage backtest --spec``, ``presage tune
--spec``, ``presage scaledobject -f``): the same refusals, in one line, whichever reads it. The
objects' content is then validated by :func:`presage_scaler.api.parse.parse`, as the API server would.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_NODES = 100_000
"""A spec has a few hundred values; a file that expands (through YAML aliases) past this is refused."""


class ManifestError(ValueError):
    """Not YAML, or too large once expanded; the message names the source."""


def _nodes(data: Any, limit: int) -> int:
    """How many values ``data`` holds with aliases expanded, counting no further than just past ``limit``."""
    count, stack = 0, [data]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def documents(text: str, source: str) -> list[Any]:
    """The non-empty YAML documents in ``text`` (read from ``source``, which messages name)."""
    try:
        found = [d for d in yaml.safe_load_all(text) if d is not None]
    except (yaml.YAMLError, ValueError) as err:  # ValueError: an integer past Python's digit limit
        raise ManifestError(f"{source}: not valid YAML: {err}") from None
    except RecursionError:
        raise ManifestError(f"{source}: not valid YAML: nested too deeply") from None
    if _nodes(found, MAX_NODES) > MAX_NODES:
        raise ManifestError(f"{source}: more than {MAX_NODES} values once aliases are expanded; not a spec")
    return found


def of_kind(found: list[Any], kind: str) -> list[dict[str, Any]]:
    """The objects of ``kind`` among ``found``."""
    return [d for d in found if isinstance(d, dict) and d.get("kind") == kind]

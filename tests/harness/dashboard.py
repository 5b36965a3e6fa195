"""The Grafana dashboard's PromQL, and the metric names each expression selects."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "presage.json"

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# An identifier not inside a number or a duration (the lookbehind), and not a call (the lookahead).
_NAME = re.compile(r"(?<![\w.:$])[A-Za-z_:][A-Za-z0-9_:]*(?!\s*\(|[A-Za-z0-9_:])")
_KEYWORDS = {"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring"}
_KEYWORDS |= {"group_left", "group_right", "inf", "nan", "atan2"}
_LABEL_VALUES = re.compile(r"^label_values\((?P<expr>.*),\s*(?P<label>\w+)\)$")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    return {name for name in _NAME.findall(text) if name.lower() not in _KEYWORDS}


def panels_of(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from panels_of(panel.get("panels", []))


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def expressions() -> list[str]:
    board = dashboard()
    exprs = [t["expr"] for p in panels_of(board["panels"]) for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["query"]["query"])
            assert match, variable["query"]
            exprs.append(match["expr"])
    return exprs

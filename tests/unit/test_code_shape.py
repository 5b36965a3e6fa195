"""The code's shape: no function longer than 100 lines, no module longer than 800.

A function past that is a sequence of steps waiting for names; a module past that holds more than
one job. Read from the source of ``presage_scaler`` (its generated ``proto_gen`` aside) and of the
forecaster's package. A function's length runs from its ``def`` line to its last line, nested
functions included. And no evidence in the code's prose: a trace named in a docstring or comment
points to the benchmark that checks it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import presage_scaler

SCALER = Path(presage_scaler.__file__).parent
FORECASTER = SCALER.parent / "forecaster" / "presage_forecaster"
GENERATED = SCALER / "proto_gen"
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 800


def _modules() -> list[Path]:
    paths = [*SCALER.rglob("*.py"), *FORECASTER.rglob("*.py")]
    return sorted(p for p in paths if GENERATED not in p.parents)


def _name(path: Path) -> str:
    return str(path.relative_to(SCALER.parent))


def test_the_sources_are_found():
    names = {_name(p) for p in _modules()}
    assert "presage_scaler/controller/app.py" in names
    assert "forecaster/presage_forecaster/app.py" in names
    assert not any(name.startswith("presage_scaler/proto_gen/") for name in names)


def test_no_function_is_longer_than_100_lines():
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{_name(path)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_no_module_is_longer_than_800_lines():
    long = {_name(p): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


# A trace or data set named in a docstring or comment is evidence, which goes stale there: it belongs
# to a benchmark and its generated results, and the code says "checked by benchmarks/<script>.py".
DATASET = re.compile(r"(?<![a-z])(nasa|crane|nab|twitter|taxi|elb|ec2)(?![a-z])|shared traces", re.IGNORECASE)
BENCHMARK_POINTER = re.compile(r"benchmarks/|bench_\w+\.py")


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of every docstring and comment of a module."""
    source = path.read_text()
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            text = node.value.value.splitlines()
            lines += [(node.lineno + offset, line) for offset, line in enumerate(text)]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            lines.append((token.start[0], token.string))
    return lines


def test_no_trace_or_data_set_is_named_in_docstrings_or_comments_but_as_a_benchmark_pointer():
    named = [
        f"{_name(path)}:{number}: {line.strip()}"
        for path in _modules()
        for number, line in _prose(path)
        if DATASET.search(line) and not BENCHMARK_POINTER.search(line)
    ]
    assert named == [], "name the benchmark that checks it, and say why in docs/concepts.md"

"""Hostile JSON request bodies: what a careless or hostile client may POST to a JSON endpoint.

:func:`bodies` mixes arbitrary bytes, JSON documents of any shape, and valid documents (the
endpoint's own examples) changed at one to three places: a value replaced by one of any type, a key
deleted or added, or a value replaced by raw text no JSON encoder writes (nesting thousands deep,
integers of thousands of digits, ``NaN``, lone UTF-16 surrogates escaped or as invalid UTF-8).
Nothing here knows an endpoint: pass its valid documents as ``bases``.

What a hostile *server* answers presage's clients is here too: :func:`gzip_bomb`, a small gzip body
that inflates to a valid JSON document far larger than any bound.
"""

from __future__ import annotations

import copy
import functools
import json
import zlib
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

SURROGATES = ("\ud800", "\udfff", "a\udc00b", "\udbff\ud800")
"""Lone or reversed UTF-16 surrogates: valid in a JSON escape, unencodable as UTF-8."""


def _strings() -> st.SearchStrategy[str]:
    # Long strings repeat one character: as long, and far cheaper to generate than random text.
    long = st.builds(str.__mul__, st.sampled_from(["n", "é", "\U0001f600", "\ud800"]), st.integers(250, 5000))
    return st.one_of(st.text(max_size=30), st.sampled_from(SURROGATES), long)


def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(10**300), max_value=10**300),
        st.floats(),  # NaN and infinities included: Python's encoder writes them
        _strings(),
    )


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value, of any shape, with awkward scalars."""
    return st.recursive(
        _scalars(),
        lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_strings(), inner, max_size=5)),
        max_leaves=20,
    )


def raw_values() -> st.SearchStrategy[str]:
    """Text placed where a JSON value goes that an encoder would not write (or not write this way)."""
    depth = st.integers(min_value=900, max_value=50_000)
    return st.one_of(
        depth.map(lambda n: "[" * n + "]" * n),
        depth.map(lambda n: '{"a":' * n + "0" + "}" * n),
        depth.map(lambda n: "[" * n),  # unterminated
        st.integers(min_value=300, max_value=20_000).map(lambda n: "9" * n),
        st.sampled_from(["-1e999999", "1e-999999", "1" + "0" * 400 + ".5", "-0", "NaN", "-Infinity", "0x10", "01"]),
        st.sampled_from([r'"\ud800"', r'"\udfff\ud800"', r'"\u00"', r'"\x41"', '"\x00"', '"\ud800"']),
    )


def encode(value: Any, ascii_only: bool) -> bytes:
    """JSON bytes; without ``ascii_only`` surrogates are written raw, as the invalid UTF-8 some clients send."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, bases: Sequence[Any]) -> bytes:
    """One of ``bases``, changed at one to three places (paths found by walking the document)."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    raws: list[str] = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        parent: Any = None
        key: Any = None
        node = doc
        # Walk down a random path; stop at a leaf or when the draw says so.
        while isinstance(node, dict | list) and node and (parent is None or draw(st.booleans())):
            parent, key = node, draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
            node = node[key]
        if parent is None:
            return encode(draw(json_values()), draw(st.booleans()))
        action = draw(st.sampled_from(["replace", "delete", "add", "raw"]))
        if action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(_strings())] = draw(json_values())
        elif action == "raw":
            raws.append(draw(raw_values()))
            parent[key] = f"__hostile_{len(raws) - 1}__"
        else:
            parent[key] = draw(json_values())
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    for index, raw in enumerate(raws):
        text = text.replace(f'"__hostile_{index}__"', raw)
    return text.encode("utf-8", "surrogatepass")


def bodies(bases: Sequence[Any]) -> st.SearchStrategy[bytes]:
    """Request bodies: mostly near-valid (where validation bugs hide), some anything at all."""
    return st.one_of(
        mutated(bases),
        mutated(bases),
        st.builds(encode, json_values(), st.booleans()),
        raw_values().map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.binary(max_size=2000),
    )


@functools.cache
def gzip_bomb(prefix: bytes, inflated: int, suffix: bytes = b"", level: int = 1) -> bytes:
    """gzip of ``prefix``, spaces (JSON whitespace), then ``suffix``: ``inflated`` bytes in all.

    Whitespace between JSON tokens is valid, so the inflated body is a valid document, and nothing
    but a bound on inflation can refuse it. Level 1 compresses a space about 230 to 1 (256 MiB take
    1.17 MB on the wire, as a real bomb might); level 9 about 1,000 to 1. Built a MiB at a time,
    never holding the inflated body, and cached: building 256 MiB takes a second or two.
    """
    spaces = inflated - len(prefix) - len(suffix)
    assert spaces >= 0, "the prefix and suffix are longer than the body"
    gzip = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [gzip.compress(prefix)]
    mib = b" " * (1 << 20)
    for _ in range(spaces >> 20):
        out.append(gzip.compress(mib))
    out += [gzip.compress(b" " * (spaces & ((1 << 20) - 1)) + suffix), gzip.flush()]
    return b"".join(out)

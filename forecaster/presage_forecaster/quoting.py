"""How a client's value is quoted back in an error message: recognisable, and bounded.

A request can hold an 8 MB string, a list of a million items or JSON nested hundreds deep, and
the plain ``repr`` of such a value would be as large (or exceed the recursion limit). Error
messages quote at most a few levels and a few dozen characters of it. Like ``repr``, it escapes
lone surrogates (``'\\ud800'``), so an error body is always encodable as UTF-8.
"""

from __future__ import annotations

import reprlib

_REPR = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_REPR.maxlevel = 2
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 6

MAX_QUOTE = 200
"""An upper bound on the length of :func:`quote`'s result."""


def quote(value: object) -> str:
    """``repr(value)``, shortened with ``...`` beyond a few items, levels or characters."""
    return _REPR.repr(value)[:MAX_QUOTE]

"""``status.advice.patch``: the spec it makes of a scaler's spec, and the digest that names it.

The patch is a JSON merge patch of the PredictiveScaler (RFC 7386) whose ``spec`` holds the advised
fields. presage advise writes it; the controller scores the spec it makes on live demand
(``status.advice.live``, whose ``patchDigest`` says which patch was scored) and presage advise reads
it back to weigh the next advice against it. One definition for all of them, below both.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from presage_scaler.api.parse import SpecError

DIGEST_LENGTH = 16


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386) would be by the API server:
    objects merge key by key, a null removes the key, anything else replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


def advised_wire(spec: dict[str, Any], patch: str) -> dict[str, Any]:
    """The spec (wire form) ``spec`` becomes with the spec fields of ``patch`` merged in; not yet parsed.
    :class:`SpecError` when ``patch`` is not JSON or changes no spec field."""
    try:
        changes = json.loads(patch)
    except ValueError as exc:
        raise SpecError([f"status.advice.patch: not JSON: {exc}"]) from exc
    wanted = changes.get("spec") if isinstance(changes, dict) else None
    if not isinstance(wanted, dict):
        raise SpecError(["status.advice.patch: changes no spec field"])
    return merge_patch(spec, wanted)


def patch_digest(patch: str) -> str:
    """What names a patch in ``status.advice.live.patchDigest``: the first :data:`DIGEST_LENGTH` hex digits
    of the SHA-256 of its text."""
    return hashlib.sha256(patch.encode()).hexdigest()[:DIGEST_LENGTH]

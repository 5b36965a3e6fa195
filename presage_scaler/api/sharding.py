"""Which shard a PredictiveScaler belongs to: a stable hash of its namespace/name.

The same in every process and every release (unlike ``hash()``), so the controller's replicas, which
split evaluation by it (:mod:`presage_scaler.controller.shards`), and the pods of ``presage advise``'s
indexed Job, which split the scalers they advise by it, agree on each scaler's shard.
"""

from __future__ import annotations

import hashlib


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard of the scaler ``namespace/name``: stable across processes (unlike ``hash()``)."""
    digest = hashlib.blake2b(f"{namespace}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards

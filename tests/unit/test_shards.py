"""Shard assignment and membership names: stable, spread, valid."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter

from presage_scaler.api.sharding import shard_of
from presage_scaler.controller.shards import member_lease_name

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def test_a_scalers_shard_is_the_same_in_every_process_and_release():
    # Pinned: a changed hash would move every scaler to another shard on upgrade.
    assert [shard_of("shop", f"web-{k}", 4) for k in range(12)] == [1, 3, 2, 1, 2, 0, 0, 2, 0, 2, 0, 3]
    # And not hash(), which is salted per process: another process with another seed agrees.
    program = "from presage_scaler.api.sharding import shard_of; print(shard_of('shop', 'web-1', 4))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"


def test_namespace_and_name_are_not_confused():
    assert (shard_of("a", "bc", 7), shard_of("ab", "c", 7)) == (3, 2)  # "a/bc" and "ab/c" differ


def test_scalers_spread_evenly_over_the_shards():
    counts = Counter(shard_of(f"team-{k % 37}", f"app-{k}", 4) for k in range(10_000))
    assert set(counts) == {0, 1, 2, 3}
    assert all(2300 <= n <= 2700 for n in counts.values()), counts


def test_membership_lease_names_are_valid_and_distinct():
    identities = ["Node_1_ab12cd34", "node-1-ab12cd34", "node_1_AB12CD34", "___", "x" * 300]
    names = [member_lease_name("presage-scaler", identity) for identity in identities]
    for name in names:
        assert DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253, name
        assert name.startswith("presage-scaler-member-")
    assert len(set(names)) == len(names)

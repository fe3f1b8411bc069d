"""Stable 64-bit hashes for tie-breaking: the same on every run, machine and restart."""

from __future__ import annotations

import hashlib

import numpy as np


def stable_hash(text: str) -> int:
    """A 64-bit hash of a string that, unlike hash(), does not change between processes."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def stable_hash_u64(text: str) -> np.uint64:
    return np.uint64(stable_hash(text))

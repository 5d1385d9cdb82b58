"""Deterministic search / held-out assignment and per-instance random generators.

An item belongs to a split by a hash of its identity (its answer, or its record), never by its
position, so ``search`` and ``heldout`` never share an instance whatever ``n`` and ``seed`` are.
"""

from __future__ import annotations

import hashlib
import random

from fitness.errors import FitnessError

SPLITS = ("search", "heldout")


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise FitnessError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    return split


def unit_hash(*parts: object) -> float:
    """A stable number in [0, 1) for ``parts`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(identity: str, heldout_fraction: float = 0.5) -> str:
    """The split that the item with this identity belongs to."""
    return "heldout" if unit_hash("split", identity) < heldout_fraction else "search"


def rng_for(*parts: object) -> random.Random:
    """An independent generator for one instance, seeded from its coordinates."""
    return random.Random(int(unit_hash("rng", *parts) * 2**63))


def partition(identities: list[str], heldout_fraction: float) -> tuple[list[int], list[int]]:
    """``(search indices, heldout indices)`` of items with these identities.

    Items are ordered by a hash of their identity and the first ``1 - heldout_fraction`` of them
    form the search split: exact proportions even for a small file, independent of file order;
    duplicate items stay together, so the two splits never share one.
    """
    if not 0.0 < heldout_fraction < 1.0:
        raise FitnessError(f"heldout_fraction must lie strictly between 0 and 1, got {heldout_fraction}")
    ranked = sorted(range(len(identities)), key=lambda i: (unit_hash("split", identities[i]), i))
    cut = round(len(identities) * (1.0 - heldout_fraction))
    while 0 < cut < len(ranked) and identities[ranked[cut]] == identities[ranked[cut - 1]]:
        cut += 1
    return ranked[:cut], ranked[cut:]


def choose(identities: list[str], split: str, n: int, seed: int, heldout_fraction: float, source: str) -> list[int]:
    """Indices of ``n`` items of ``split``, shuffled by ``seed``."""
    members = partition(identities, heldout_fraction)[0 if split == "search" else 1]
    if n > len(members):
        raise FitnessError(
            f"{source}: asked for {n} {split} instances but its {split} split holds {len(members)} "
            f"of {len(identities)} records (heldout_fraction={heldout_fraction})"
        )
    random.Random(seed).shuffle(members)
    return members[:n]

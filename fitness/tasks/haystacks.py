"""Choosing a needle task's haystack from its parameters: ``haystack_dir`` (the user's own .txt
files) or ``haystack``, one of the built-in ones (``noise``: the repeated sentences, the default;
``prose``: the bundled public-domain books, split-aware)."""

from __future__ import annotations

from fitness.errors import FitnessError
from fitness.tasks.haystack import DirectoryHaystack, Haystack, NoiseHaystack
from fitness.tasks.prose import ProseHaystack

#: The built-in haystacks a task's ``haystack`` parameter names (``haystack_dir`` is the user's own).
HAYSTACKS = ("noise", "prose")


def make_haystack(haystack_dir: str | None, haystack: str = "noise") -> Haystack:
    """The user's directory if given, else the named built-in haystack."""
    if haystack not in HAYSTACKS:
        raise FitnessError(f"unknown haystack {haystack!r}; valid: {', '.join(HAYSTACKS)} "
                           "(or haystack_dir: your own .txt files)")
    if haystack_dir:
        if haystack != "noise":
            raise FitnessError(f"give either haystack_dir or haystack: {haystack}, not both")
        return DirectoryHaystack(haystack_dir)
    if haystack == "prose":
        return ProseHaystack()
    return NoiseHaystack()

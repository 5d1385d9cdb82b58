"""Haystacks for needle tasks: the classic repeated noise sentences, the text files of a
directory (Paul Graham essay style), or the bundled public-domain prose (``prose.py``). A haystack
is a sequence of pieces (noise sentences, or words) that can be cut to any size; needles go in at
sentence boundaries."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from fitness.errors import FitnessDataError

NOISE_SENTENCES = (
    "The grass is green.",
    "The sky is blue.",
    "The sun is yellow.",
    "Here we go.",
    "There and back again.",
)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


class Haystack:
    """``pieces(k)``: the first ``k`` pieces, joined with single spaces to make the text."""

    #: True when every piece is a whole sentence (needles may go before any piece).
    whole_sentences = False

    def pieces(self, k: int, offset: int = 0) -> list[str]:
        raise NotImplementedError

    def contains(self, text: str) -> bool:
        """Whether ``text`` occurs anywhere in the haystack source (case-insensitive)."""
        raise NotImplementedError

    def view(self, split: str) -> "Haystack":
        """The haystack an instance of ``split`` reads. Only the prose haystack keeps the splits'
        text apart; the others serve every split from one source."""
        return self

    def draw_offset(self, rng) -> int:
        """Where an instance's haystack starts, drawn when it is drafted (its split unknown)."""
        return 0

    def resolve(self, offset: int) -> int:
        """The piece index ``pieces`` starts from for a drawn ``offset`` (on the split's view)."""
        return offset

    def insert(self, pieces: list[str], needles: list[tuple[float, str]]) -> str:
        """Join ``pieces`` with each needle inserted at its depth (0 = start, 1 = end), moved to
        the nearest sentence boundary so that no sentence is cut in two."""
        allowed = [i for i in range(len(pieces) + 1)
                   if self.whole_sentences or i == 0 or _SENTENCE_END.search(pieces[i - 1])]
        slots: dict[int, list[str]] = {}
        for depth, text in needles:
            want = round(min(1.0, max(0.0, depth)) * len(pieces))
            at = min(allowed, key=lambda i: (abs(i - want), i))
            slots.setdefault(at, []).append(text)
        out: list[str] = []
        for i in range(len(pieces) + 1):
            out.extend(slots.get(i, ()))
            if i < len(pieces):
                out.append(pieces[i])
        return " ".join(out)


class NoiseHaystack(Haystack):
    """The passkey paper's filler: five short sentences repeated."""

    whole_sentences = True

    def pieces(self, k: int, offset: int = 0) -> list[str]:
        return [NOISE_SENTENCES[(offset + i) % len(NOISE_SENTENCES)] for i in range(k)]

    def contains(self, text: str) -> bool:
        return text.lower() in " ".join(NOISE_SENTENCES).lower()


class DirectoryHaystack(Haystack):
    """The words of every ``.txt`` file of a directory, in file-name order, repeated as needed."""

    def __init__(self, directory: str | Path):
        self.directory = str(directory)
        self.words, self.lowered = _load_directory(self.directory)

    def pieces(self, k: int, offset: int = 0) -> list[str]:
        n = len(self.words)
        return [self.words[(offset + i) % n] for i in range(k)]

    def contains(self, text: str) -> bool:
        return text.lower() in self.lowered

    def sentence_starts(self) -> list[int]:
        """Word indices that begin a sentence (where a haystack may start)."""
        return [0] + [i + 1 for i, w in enumerate(self.words[:-1]) if _SENTENCE_END.search(w)]

    def draw_offset(self, rng) -> int:
        return rng.choice(self.sentence_starts())


@lru_cache(maxsize=8)
def _load_directory(directory: str) -> tuple[list[str], str]:
    path = Path(directory)
    if not path.is_dir():
        raise FitnessDataError("not a directory", file=directory, field="haystack_dir")
    files = sorted(path.glob("*.txt"))
    if not files:
        raise FitnessDataError("holds no .txt files", file=directory, field="haystack_dir")
    words: list[str] = []
    for file in files:
        try:
            words.extend(file.read_text(encoding="utf-8").split())
        except UnicodeDecodeError as err:
            raise FitnessDataError(f"not UTF-8 text (byte {err.start})", file=str(file), field="haystack_dir") from None
    if len(words) < 50:
        raise FitnessDataError(f"only {len(words)} words in all; a haystack needs at least 50", file=directory,
                               field="haystack_dir")
    return words, " ".join(words).lower()

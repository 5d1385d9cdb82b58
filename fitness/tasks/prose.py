"""A haystack of real prose that ships with the package: five public-domain books (``fitness/data/
prose``, see its README for sources and licence), cut into passages of consecutive paragraphs.

Each passage belongs to one split, decided by a hash of its name (``fitness.splits.partition``),
so the held-out split reads text the search never saw: a haystack of the ``search`` view is drawn
only from search passages, one of the ``heldout`` view only from held-out passages. The split of an
*instance* is still decided by its answer, as for every generated task; the instance then reads
its own split's view.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fitness.errors import FitnessDataError
from fitness.splits import check_split, partition
from fitness.tasks.haystack import _SENTENCE_END, Haystack

PROSE_DIR = Path(__file__).resolve().parents[1] / "data" / "prose"
#: A passage closes at the first paragraph end past this many words: long enough that a ~1k-token
#: haystack is mostly one continuous stretch of a book, short enough for ~200 passages to split.
PASSAGE_WORDS = 1200
_MIN_TAIL = 300  # a book's last, shorter passage is kept only from this many words on


@dataclass(frozen=True)
class Passage:
    """``name`` ("book/index"), its ``split`` and its ``words`` (whitespace-separated tokens)."""

    name: str
    split: str
    words: tuple[str, ...]


def _paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a book: blank-line separated, re-flowed onto one line. Titles,
    headings and indented verse are dropped (a haystack should read as running prose), and the
    underscores that mark italics in the source are removed."""
    out = []
    for block in re.split(r"\n\s*\n", text.replace("\r", "")):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines or all(line.startswith("  ") for line in lines):
            continue  # verse and block quotes are indented in these texts
        flat = " ".join(" ".join(lines).replace("_", "").split())
        if flat.startswith("[") or len(flat.split()) < 8 or not re.search(r"[a-z]", flat):
            continue  # the "[Title by Author Year]" line, chapter headings, short upper-case titles
        out.append(flat)
    return out


@lru_cache(maxsize=1)
def load_passages() -> tuple[Passage, ...]:
    """Every passage of the bundled books, in book and reading order (parsed once per process)."""
    files = sorted(PROSE_DIR.glob("*.txt"))
    if not files:
        raise FitnessDataError("holds no .txt files: the package was installed without its data", file=str(PROSE_DIR),
                               field="haystack")
    drafts: list[tuple[str, tuple[str, ...]]] = []
    for file in files:
        current: list[str] = []
        index = 0
        for paragraph in _paragraphs(file.read_text(encoding="utf-8")):
            current.extend(paragraph.split())
            if len(current) >= PASSAGE_WORDS:
                drafts.append((f"{file.stem}/{index}", tuple(current)))
                current, index = [], index + 1
        if len(current) >= _MIN_TAIL:
            drafts.append((f"{file.stem}/{index}", tuple(current)))
    names = [name for name, _ in drafts]
    search, _ = partition(names, 0.5)
    in_search = set(search)
    return tuple(Passage(name, "search" if i in in_search else "heldout", words)
                 for i, (name, words) in enumerate(drafts))


@lru_cache(maxsize=1)
def _lowered_corpus() -> str:
    return " ".join(" ".join(p.words) for p in load_passages()).lower()


@lru_cache(maxsize=3)
def _stream(split: str | None) -> tuple[tuple[str, ...], tuple[int, ...], tuple[tuple[int, str], ...]]:
    """``(words, sentence starts, (first word, passage name) per passage)`` of one split's passages
    joined in reading order (``None``: all passages)."""
    words: list[str] = []
    bounds: list[tuple[int, str]] = []
    for passage in load_passages():
        if split is None or passage.split == split:
            bounds.append((len(words), passage.name))
            words.extend(passage.words)
    starts = [0] + [i + 1 for i, w in enumerate(words[:-1]) if _SENTENCE_END.search(w)]
    return tuple(words), tuple(starts), tuple(bounds)


class ProseHaystack(Haystack):
    """The bundled books as a haystack of words; ``view(split)`` reads one split's passages only.

    ``pieces(k, offset)`` are ``k`` words from word ``offset`` of the (split's) stream, wrapping
    around at its end. ``contains`` searches the whole corpus, both splits, so a needle value that
    passes it occurs nowhere in any haystack this class can build.
    """

    def __init__(self, split: str | None = None):
        self.split = check_split(split) if split is not None else None
        self.words, self.starts, self.bounds = _stream(self.split)

    def view(self, split: str) -> "ProseHaystack":
        return ProseHaystack(split)

    def pieces(self, k: int, offset: int = 0) -> list[str]:
        n = len(self.words)
        return [self.words[(offset + i) % n] for i in range(k)]

    def contains(self, text: str) -> bool:
        return text.lower() in _lowered_corpus()

    def sentence_starts(self) -> list[int]:
        return list(self.starts)

    def draw_offset(self, rng) -> int:
        # The instance's split is not known yet when it is drafted: draw a number that
        # ``resolve`` maps onto a sentence start of whichever split's view the instance reads.
        return rng.randrange(2**31)

    def resolve(self, offset: int) -> int:
        return self.starts[offset % len(self.starts)]

    def passages_at(self, offset: int, k: int) -> list[str]:
        """Names of the passages that words ``offset .. offset + k - 1`` come from, in order."""
        firsts = [first for first, _ in self.bounds]
        names: list[str] = []
        for i in range(offset, offset + k):
            name = self.bounds[bisect.bisect_right(firsts, i % len(self.words)) - 1][1]
            if not names or names[-1] != name:
                names.append(name)
        return names

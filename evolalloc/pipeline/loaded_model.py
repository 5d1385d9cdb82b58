"""The run's model: its weights loaded at most once, its geometry and tokenizer without them.

One ``ModelHandle`` per run, shared by every task of a multi-task run. A start's cheap checks
(search settings, positions, datasets) read the geometry from the model's config and the tokenizer
from its files; only evaluation, curation and training load the weights.
"""

from __future__ import annotations

from functools import cached_property

from evolalloc.core.phases import announce


class ModelHandle:
    """Args:
        spec: the recipe's ``model.spec`` (bundled:<name>, a local HF folder or a .gguf file).
        dtype: weights and cache dtype (``model.dtype``).
        threads: torch threads set before the weights load (``engine.threads``; None: torch's default).
    """

    def __init__(self, spec: str, dtype: str, threads: int | None = None):
        self.spec, self.dtype, self.threads = spec, dtype, threads

    @property
    def is_loaded(self) -> bool:
        return "loaded" in self.__dict__

    @cached_property
    def loaded(self):
        """``runtime.model.LoadedModel``: weights, tokenizer and geometry."""
        import torch

        from evolalloc.runtime.model import load_model

        if self.threads:
            torch.set_num_threads(self.threads)
        announce("loading model")
        return load_model(self.spec, dtype=self.dtype)

    @cached_property
    def geometry(self):
        """The model's geometry; read from its config alone until the weights are loaded (the same values)."""
        if self.is_loaded:
            return self.loaded.geometry
        from evolalloc.runtime.model import model_geometry

        return model_geometry(self.spec, self.dtype)

    @cached_property
    def tokenizer(self):
        """The tokenizer, without the weights: instances are generated (and datasets read) before the model loads."""
        if self.is_loaded:
            return self.loaded.tokenizer
        from evolalloc.runtime.model import load_tokenizer

        return load_tokenizer(self.spec)

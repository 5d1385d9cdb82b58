"""evolalloc: evolutionary KV-cache budget allocation (EvolKV) with its own eviction runtime.

``evolalloc.generate(model, tokenizer, prompts, allocation, ...)`` runs prompts with a budget
profile (see ``evolalloc.runtime.generation``); it is a lazy attribute, so ``import evolalloc``
does not import torch.
"""

__version__ = "0.1.0"

#: The model every default points to: the bundled SmolLM2-135M (docs/architecture.md). Defined once here,
#: torch-free, for the recipe defaults, the runtime and every command line.
DEFAULT_MODEL = "bundled:smollm2-135m-instruct"

_LAZY = {"generate": ("evolalloc.runtime.generation", "generate"),
         "GenerationResult": ("evolalloc.runtime.generation", "GenerationResult")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'evolalloc' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))

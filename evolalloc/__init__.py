"""evolalloc: evolutionary KV-cache budget allocation (EvolKV) with its own eviction runtime."""

__version__ = "0.1.0"

#: The model every default points to: the bundled SmolLM2-135M (see DESIGN.md). Defined once here,
#: torch-free, for the recipe defaults, the runtime and every command line.
DEFAULT_MODEL = "bundled:smollm2-135m-instruct"

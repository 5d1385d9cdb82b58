"""evolalloc: evolutionary KV-cache budget allocation (EvolKV) with its own eviction runtime."""

__version__ = "0.1.0"

"""Benchmarks that print a figure (never timed tests): ``evolalloc bench eval|workers``."""

"""The bottom floor of evolalloc: model geometry, allocations and their file format, the EvolKV
objective, user errors and atomic writes. Imports nothing else from evolalloc and never torch."""

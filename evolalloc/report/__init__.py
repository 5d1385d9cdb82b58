"""Run reports: the comparison table, plots (PNG), ``report.md`` and the ``show`` summary.

Everything here takes plain data (recipe dicts, trial records, allocations, score tables), so it
is testable without a model. Import the modules directly; plotting pulls in matplotlib.
"""

"""Evaluators: score a population of allocations on task instances (local or on Ray)."""

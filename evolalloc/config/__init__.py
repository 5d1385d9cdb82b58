"""Run recipes (YAML sections, defaults, validation in one place) and run folders."""

"""``benchmarks/NAME.py`` imported as a module, for the tests of the benchmark scripts.

``benchmarks/`` is a folder of scripts, not a package: each is loaded from its file. The module is
registered in ``sys.modules`` under its name first, because dataclasses (and pickling) look a class's
module up there while the file runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py``, run as a fresh module."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

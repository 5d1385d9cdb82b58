"""Shared fixtures. The bundled model is loaded once per test session."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def bundled():
    from evolalloc.runtime.model import load_model

    torch.manual_seed(0)
    return load_model("bundled:smollm2-135m-instruct")

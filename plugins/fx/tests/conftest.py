"""Fixtures of the fx plugin's tests: each model exported once per session and shared."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests run with --import-mode=importlib

from fx_support import Exported, export  # noqa: E402


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(name)``: the model (preset or hard case) exported through fx with default options."""
    cache: dict[str, Exported] = {}
    directory = tmp_path_factory.mktemp("fx_models")

    def get(name: str) -> Exported:
        if name not in cache:
            cache[name] = export(name, directory)
        return cache[name]

    return get

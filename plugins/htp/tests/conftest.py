"""Fixtures of the htp tests: each model exported once per session and mode, and shared."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests run with --import-mode=importlib

from htp_support import Measured, measure  # noqa: E402


@pytest.fixture(scope="session")
def measured(tmp_path_factory):
    """``measured(name, dynamic=True, exporter="torchscript")``: htp's export of a model, compared with PyTorch's."""
    cache: dict[tuple, Measured] = {}
    directory = tmp_path_factory.mktemp("htp_models")

    def get(name: str, dynamic: bool = True, exporter: str = "torchscript") -> Measured:
        key = (name, dynamic, exporter)
        if key not in cache:
            cache[key] = measure(name, directory, dynamic, exporter)
        return cache[key]

    return get

"""Fixtures of the usage_based tests: each model exported once per session and shared."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from usage_based_support import Measured, measure_dynamo, measure_export  # noqa: E402


def _memoised(measure, directory):
    """``get(name)`` measuring each model once per session."""
    cache: dict[str, Measured] = {}

    def get(name: str) -> Measured:
        if name not in cache:
            cache[name] = measure(name, directory)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(name)``: usage_based's TorchScript export of a model, measured against PyTorch's records."""
    return _memoised(measure_export, tmp_path_factory.mktemp("usage_based_exports"))


@pytest.fixture(scope="session")
def dynamo_tagged(tmp_path_factory):
    """``dynamo_tagged(name)``: a dynamo export of a model tagged by ``tag_onnx``, measured against its metadata."""
    return _memoised(measure_dynamo, tmp_path_factory.mktemp("usage_based_dynamo"))

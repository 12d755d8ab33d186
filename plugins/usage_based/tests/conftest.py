"""Fixtures of the usage_based tests: each model exported once per session (the core's test kit) and shared."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def exported(modelexport_measured):
    """``exported(name)``: usage_based's TorchScript export of a model, measured against PyTorch's records."""
    return lambda name: modelexport_measured("usage_based", name)


@pytest.fixture(scope="session")
def dynamo_tagged(modelexport_measured):
    """``dynamo_tagged(name)``: a dynamo export of a model tagged by ``tag_onnx``, measured against its metadata."""
    return lambda name: modelexport_measured("usage_based", name, retag_dynamo=True)

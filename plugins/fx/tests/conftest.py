"""Fixtures of the fx plugin's tests: each model exported once per session (the core's test kit) and shared."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def exported(modelexport_measured):
    """``exported(name)``: the model (preset or hard case) exported through fx with default options."""
    return lambda name: modelexport_measured("fx", name)

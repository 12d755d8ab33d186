"""Shared fixtures: tiny models exported once per session."""

from __future__ import annotations

import os
import warnings

# nothing downloads in tests: a model id that is not local fails at once instead of retrying the hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest


@pytest.fixture(autouse=True)
def _quiet_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield

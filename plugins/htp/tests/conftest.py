"""Fixtures of the htp tests: each model exported once per session and mode (the core's test kit) and shared."""

from __future__ import annotations

import pytest
from htp_support import BUILDERS


@pytest.fixture(scope="session")
def measured(modelexport_measured):
    """``measured(name, dynamic=True, exporter="torchscript")``: htp's export of a model, compared with PyTorch's."""

    def get(name: str, dynamic: bool = True, exporter: str = "torchscript"):
        return modelexport_measured("htp", name, builders=BUILDERS, dynamic=dynamic, options={"exporter": exporter})

    return get

"""The test kit as a pytest plugin (registered through the ``pytest11`` entry point when the core is installed).

Fixture ``modelexport_measured``, one per session: ``modelexport_measured("htp", "bert")`` exports a model
once with a strategy and returns its :class:`~modelexport_core.testing.Measured`; the same call again returns
the cached one. Keywords: ``builders=`` (your own ``name -> (model, inputs)`` makers), ``retag_dynamo=True``
(tag a dynamo export with ``tag_onnx`` instead), and anything ``make_context`` takes (``dynamic=False``,
``options={...}``).
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def modelexport_measured(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from modelexport_core.testing.kit import ExportCache

    return ExportCache(tmp_path_factory.mktemp("modelexport_measured"))

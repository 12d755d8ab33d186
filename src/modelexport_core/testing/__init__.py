"""The test kit for strategy authors: hard-case models, building a test model by name, measuring a strategy's tags
against PyTorch's own records, and a pytest fixture that exports each model once per session.

Install the core and the ``modelexport_measured`` fixture is there (``modelexport_core.testing.pytest_plugin``).
"""

from __future__ import annotations

from modelexport_core.measure.agreement import sibling_contamination
from modelexport_core.testing.cases import (
    HARD_CASES,
    reused_module,
    routed_heads,
    same_class_siblings,
    stacked_blocks,
    tied_weights,
)
from modelexport_core.testing.kit import (
    ExportCache,
    Measured,
    assert_every_recorded_node,
    build_case,
    measure_export,
    measure_tagging,
    strategy_instance,
)

__all__ = [
    "HARD_CASES",
    "ExportCache",
    "Measured",
    "assert_every_recorded_node",
    "build_case",
    "measure_export",
    "measure_tagging",
    "reused_module",
    "routed_heads",
    "same_class_siblings",
    "sibling_contamination",
    "stacked_blocks",
    "strategy_instance",
    "tied_weights",
]

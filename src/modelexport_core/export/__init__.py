"""The export pipeline: strategies tried in turn, the winner's file tagged, checked, verified and written atomically.

``modelexport_core.export.export_model`` and ``ExportOptions`` stay importable from here as before the layout
had subpackages; their home is :mod:`modelexport_core.export.pipeline`, and the package top re-exports them.
"""

from __future__ import annotations

from typing import Any

_MOVED = {"export_model", "ExportOptions", "ExportReport", "tag_existing"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from modelexport_core.export import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

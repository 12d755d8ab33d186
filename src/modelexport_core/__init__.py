"""modelexport core: export a PyTorch model to ONNX with every node tagged by its module."""

from __future__ import annotations

from .api import export_module
from .context import make_context
from .errors import ModelExportError
from .hookspecs import hookimpl, hookspec
from .plugins import StrategyInfo, get_strategies, get_strategy, make_plugin_manager
from .strategy import (
    ExportContext,
    StrategyFailed,
    StrategyOption,
    StrategyUnavailable,
    TaggingResult,
    TaggingStrategy,
)
from .tags import HierarchyTags
from .version import __version__

__all__ = [
    "ExportContext",
    "HierarchyTags",
    "ModelExportError",
    "StrategyFailed",
    "StrategyInfo",
    "StrategyOption",
    "StrategyUnavailable",
    "TaggingResult",
    "TaggingStrategy",
    "__version__",
    "export_module",
    "get_strategies",
    "get_strategy",
    "hookimpl",
    "hookspec",
    "make_context",
    "make_plugin_manager",
]

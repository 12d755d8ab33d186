"""modelexport core: export a PyTorch model to ONNX with every node tagged by its module.

The public API is the names below; the plugin SDK is :mod:`modelexport_core.sdk`. The layers, one subpackage
each: ``plugin`` (the strategy interface and discovery), ``format`` (tags and the tagged-file format),
``prepare`` (loading a model and its inputs), ``export`` (the pipeline), ``tools`` (over tagged files, no
torch), ``measure`` (against PyTorch's own records) and ``testing`` (the test kit for strategy authors).
"""

from __future__ import annotations

from modelexport_core.api import export_module
from modelexport_core.errors import ModelExportError
from modelexport_core.export.pipeline import ExportOptions, ExportReport, export_model, tag_existing
from modelexport_core.format.tags import HierarchyTags
from modelexport_core.plugin.discovery import StrategyInfo, get_strategies, get_strategy, make_plugin_manager
from modelexport_core.plugin.hookspecs import hookimpl, hookspec
from modelexport_core.plugin.strategy import (
    ExportContext,
    StrategyFailed,
    StrategyOption,
    StrategyUnavailable,
    TaggingResult,
    TaggingStrategy,
)
from modelexport_core.prepare.context import make_context
from modelexport_core.prepare.models import LoadedModel, load_model
from modelexport_core.version import __version__

__all__ = [
    "ExportContext",
    "ExportOptions",
    "ExportReport",
    "HierarchyTags",
    "LoadedModel",
    "ModelExportError",
    "StrategyFailed",
    "StrategyInfo",
    "StrategyOption",
    "StrategyUnavailable",
    "TaggingResult",
    "TaggingStrategy",
    "__version__",
    "export_model",
    "export_module",
    "get_strategies",
    "get_strategy",
    "hookimpl",
    "hookspec",
    "load_model",
    "make_context",
    "make_plugin_manager",
    "tag_existing",
]

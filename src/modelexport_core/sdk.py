"""The plugin SDK: every name a tagging-strategy plugin builds on, from one module.

In-tree plugins import from here only (a rule in tests/test_rules.py); a third-party plugin can rely on
these names staying put. The rest of ``modelexport_core`` is the product's own and may change.

- the interface: ``TaggingStrategy``, ``TaggingResult``, ``ExportContext``, ``StrategyOption``, ``EXPORTER_OPTION``, ``hookimpl``,
  and the errors a strategy raises (``StrategyUnavailable``, ``StrategyFailed``, ``ModelMismatchError``);
- module names: ``is_ancestor``, ``parent_qualname``, ``common_ancestor``, ``in_sibling_elements``;
- graphs: ``GraphIndex``, ``node_key``, ``fill_missing_modules``, ``hold_call_containment``, ``hold_causality``, ``hold_lineage`` (and their
  ``EVIDENCE_KIND``), ``hold_call_boundaries`` (and ``BOUNDARY_KIND``,
  ``recording_calls`` and its ``CallEvent``s: the calls an exporter's run of the model made),
  ``tensors_in`` (the tensors in a call's arguments or outputs); files: ``load_graph``, ``tensor_value``, ``stub_file``, ``save_with_initializers``,
  ``StreamedTensor``, ``StreamedModel``; values: ``value_checksum``, ``value_fingerprint``, ``ExactValues``,
  ``intermediate_values`` (every node output of a file, computed by onnxruntime), ``ValueIndex`` with ``informative``, ``one_number_within_tolerance``, ``faded``,
  ``identical``, ``same_values``, ``measure``, ``transposed_measure``, ``may_be_same``, ``summary``, ``scale`` (finding
  values equal up to two runtimes' rounding), ``TINY`` (float32's smallest normal number);
- exporting: ``as_exported`` (a model run the way an exporter runs it), ``export_torchscript``, ``export_dynamo``, ``export_in_turn``, ``takes_keywords``, ``fixed_keywords``, ``WRAPPER_ATTRIBUTE``,
  ``recorded_output_names`` (the output names a capture's run recorded, where the model had not run before);
- messages: ``first_line``.
"""

from __future__ import annotations

from modelexport_core.errors import ModelMismatchError, first_line
from modelexport_core.export.boundaries import EVIDENCE_KIND as BOUNDARY_KIND
from modelexport_core.export.boundaries import Event as CallEvent
from modelexport_core.export.boundaries import hold_call_boundaries, recording_calls, tensors_in
from modelexport_core.export.containment import EVIDENCE_KIND, hold_call_containment, hold_causality, hold_lineage
from modelexport_core.export.exporters import as_exported, export_dynamo, export_torchscript
from modelexport_core.format.checksum import ExactValues, value_checksum, value_fingerprint
from modelexport_core.format.graph import SHAPE_OPS, GraphIndex, fill_missing_modules, node_key
from modelexport_core.format.intermediate import intermediate_values
from modelexport_core.format.onnx_file import (
    StreamedModel,
    StreamedTensor,
    load_graph,
    save_with_initializers,
    stub_file,
    tensor_value,
)
from modelexport_core.format.tags import common_ancestor, in_sibling_elements, is_ancestor, parent_qualname
from modelexport_core.format.value_index import (
    TINY,
    ValueIndex,
    faded,
    identical,
    informative,
    may_be_same,
    measure,
    one_number_within_tolerance,
    same_values,
    scale,
    summary,
    transposed_measure,
)
from modelexport_core.plugin.hookspecs import hookimpl
from modelexport_core.plugin.strategy import (
    EXPORTER_OPTION,
    WRAPPER_ATTRIBUTE,
    ExportContext,
    StrategyFailed,
    StrategyOption,
    StrategyUnavailable,
    TaggingResult,
    TaggingStrategy,
    export_in_turn,
)
from modelexport_core.prepare.context import recorded_output_names, takes_keywords
from modelexport_core.prepare.wrapper import fixed_keywords

__all__ = [
    "BOUNDARY_KIND",
    "CallEvent",
    "EVIDENCE_KIND",
    "EXPORTER_OPTION",
    "ExactValues",
    "WRAPPER_ATTRIBUTE",
    "ExportContext",
    "GraphIndex",
    "ModelMismatchError",
    "SHAPE_OPS",
    "StrategyFailed",
    "StrategyOption",
    "StrategyUnavailable",
    "StreamedModel",
    "StreamedTensor",
    "TaggingResult",
    "TaggingStrategy",
    "export_in_turn",
    "as_exported",
    "intermediate_values",
    "informative",
    "one_number_within_tolerance",
    "faded",
    "TINY",
    "identical",
    "may_be_same",
    "measure",
    "same_values",
    "scale",
    "summary",
    "transposed_measure",
    "ValueIndex",
    "common_ancestor",
    "export_dynamo",
    "export_torchscript",
    "fill_missing_modules",
    "first_line",
    "fixed_keywords",
    "hold_call_boundaries",
    "hold_call_containment",
    "hold_causality",
    "hold_lineage",
    "hookimpl",
    "in_sibling_elements",
    "is_ancestor",
    "load_graph",
    "node_key",
    "parent_qualname",
    "recorded_output_names",
    "recording_calls",
    "save_with_initializers",
    "stub_file",
    "takes_keywords",
    "tensors_in",
    "tensor_value",
    "value_checksum",
    "value_fingerprint",
]

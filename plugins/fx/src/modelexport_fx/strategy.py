"""The ``fx`` strategy: each ONNX node's module read from the model's explicit FX graph.

torch.export (non-strict) captures the model as an FX graph whose nodes record the
module calls they sit in (``nn_module_stack``); the dynamo ONNX exporter translates
that graph and records on every ONNX node the FX node it came from. Joining the two
gives each ONNX node its module from the structure, not from a guess over execution.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from modelexport_core.sdk import (
    ExportContext,
    StrategyFailed,
    StrategyOption,
    StrategyUnavailable,
    TaggingResult,
    TaggingStrategy,
    recorded_output_names,
)

from .capture import CAPTURE_METHODS, DRAFT_EXPORT, NON_STRICT
from .reasons import one_line_reason
from .to_onnx import MIN_OPSET

if TYPE_CHECKING:
    from .capture import Capture

DEFAULT_OPSET = MIN_OPSET


def resolve_opset(ctx: ExportContext) -> int:
    """The opset to export at: the user's ``--opset``, else the strategy option; refused below 18."""
    opset = ctx.opset if ctx.opset is not None else int(ctx.options.get("opset", DEFAULT_OPSET))
    if opset < MIN_OPSET:
        raise StrategyFailed(
            f"opset {opset} is below {MIN_OPSET}: the dynamo ONNX exporter drops the per-node metadata "
            f"(fx_node, name_scopes) this strategy reads when it converts below opset {MIN_OPSET}; "
            f"use --opset {MIN_OPSET} or higher"
        )
    return opset


class FxStrategy(TaggingStrategy):
    """Capture with torch.export, convert with the dynamo exporter, map nodes through the FX graph."""

    name = "fx"
    priority = 300
    description = (
        "torch.export (non-strict, then strict, draft_export, symbolic_trace) captures an FX graph whose nodes record their module stack; the dynamo "
        "exporter converts it and each ONNX node takes its FX node's module (neighbours' for optimizer-made nodes)"
    )
    requires = (
        "a model one of its capture methods can capture (torch.export non-strict, strict, draft_export, or a "
        "torch.fx.symbolic_trace graph), onnxscript and opset >= 18"
    )
    options = (
        StrategyOption(
            "optimize", bool, True,
            "run the ONNX exporter's optimizer (constant folding, dead-code removal); nodes it creates are "
            "tagged from their neighbours",
        ),
        StrategyOption(
            "opset", int, DEFAULT_OPSET,
            f"ONNX opset when --opset is not given; must be >= {MIN_OPSET} (the dynamo exporter drops node "
            "metadata below it)",
        ),
        StrategyOption(
            "capture", str, ",".join(CAPTURE_METHODS),
            "capture methods to try, in order, comma-separated: non_strict (torch.export, the model's Python on "
            "fake tensors), strict (TorchDynamo), draft_export (data-dependent questions answered from the "
            "example), symbolic_trace (a torch.fx.symbolic_trace graph; plain models only)",
        ),
        StrategyOption(
            "math_sdpa", bool, True,
            "pin scaled-dot-product kernels to the math one while capturing and converting, so torch.export "
            "and the exporter's decomposition agree on strides (avoids 'Cannot view a tensor' failures)",
        ),
    )

    def check(self, ctx: ExportContext) -> None:
        import torch

        if not hasattr(torch, "export") or not hasattr(torch.export, "Dim"):
            raise StrategyUnavailable(f"torch {torch.__version__} has no torch.export with Dim; need torch >= 2.6")
        if importlib.util.find_spec("onnxscript") is None:
            raise StrategyUnavailable("the dynamo ONNX exporter needs onnxscript: pip install onnxscript")

    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        from modelexport_core.sdk import load_graph

        from .attribution import attribute_nodes, fx_node_modules, known_module_names
        from .capture import math_sdpa
        from .custom_ops import decompose_custom_ops
        from .gaps import reflected_subtractions
        from .shapes import dynamic_symbols, specialized_axes
        from .to_onnx import program_to_onnx, streamed_model

        opset = resolve_opset(ctx)
        optimize = bool(ctx.options.get("optimize", True))
        captured_ctx = ctx
        with math_sdpa(bool(ctx.options.get("math_sdpa", True))):
            capture = self._capture(ctx)
            pinned = specialized_axes(capture.program, ctx) if ctx.dynamic_axes else {}
            if pinned:
                # the model's code fixes these sizes: capture again with them static, and say so
                captured_ctx = ctx.with_static_axes(pinned, "torch.export found that the model's code fixes this size")
                capture = self._capture(captured_ctx)
            symbols = dynamic_symbols(capture.program, captured_ctx) if captured_ctx.dynamic_axes else {}
            ctx = captured_ctx
            if not ctx.output_names:  # the model had not run: the capture's run named them, the exporter uses them
                ctx = replace(ctx, output_names=recorded_output_names(ctx))
            program = decompose_custom_ops(capture.program)
            rewritten = reflected_subtractions(program)
            try:
                onnx_program, renames = program_to_onnx(program, ctx, opset, optimize)
            except Exception as error:
                raise StrategyFailed(f"the dynamo ONNX exporter failed: {one_line_reason(error)}") from error
        known = known_module_names(ctx.module)
        fx_modules = fx_node_modules(onnx_program.exported_program, known)
        front_end, method, capture_failures = capture.front_end, capture.method, capture.failures
        if method == DRAFT_EXPORT:
            captured_ctx = replace(captured_ctx, notes=captured_ctx.notes + (
                "fx captured the model with torch.export.draft_export: questions its code asks of tensor values "
                f"were answered from the example's values ({capture_failures.get(NON_STRICT, 'non-strict failed')[:200]})",))
            ctx = captured_ctx
        del capture, program  # the programs hold graphs and tensors the file does not need
        # where the core allows, it tags the graph and then writes the file once, each weight from its
        # tensor; otherwise the file is written here (over 2 GB by the exporter, as external data) and its
        # graph read back without the weights
        unwritten = streamed_model(onnx_program)
        if unwritten is None:
            onnx_program.save(str(onnx_path))
        elif not ctx.may_leave_unwritten:
            unwritten.write(Path(onnx_path))
            unwritten = None
        del onnx_program
        onnx_model = unwritten.model if unwritten is not None else load_graph(Path(onnx_path))
        attribution = attribute_nodes(onnx_model, fx_modules, ctx, known)
        return TaggingResult(
            node_modules=attribution.node_modules,
            evidence=attribution.evidence,
            unwritten=unwritten,
            exporter="dynamo",
            value_dependent=method == DRAFT_EXPORT,
            context=captured_ctx if pinned or method == DRAFT_EXPORT else None,
            details={
                "front_end": front_end,
                "capture_method": method,
                "capture_failures": capture_failures,
                "rewrites": {"reflected_subtractions": rewritten},
                "opset": opset,
                "optimize": optimize,
                "dynamic_shapes": {
                    name: {str(axis): renames.get(symbol, symbol) for axis, symbol in axes.items()}
                    for name, axes in symbols.items()
                },
                "nodes": len(attribution.node_modules),
                "nodes_from_fx": attribution.sources["fx"],
                "nodes_from_name_scopes": attribution.sources["name_scopes"],
                "nodes_from_neighbours": attribution.sources["neighbours"],
            },
        )

    def _capture(self, ctx: ExportContext) -> "Capture":
        """The model's FX program from the first capture method that makes one."""
        from .capture import CaptureFailed, capture_program

        methods = tuple(m.strip() for m in str(ctx.options.get("capture", ",".join(CAPTURE_METHODS))).split(",")
                        if m.strip())
        unknown = [m for m in methods if m not in CAPTURE_METHODS]
        if unknown or not methods:
            raise StrategyFailed(f"unknown capture method {unknown[0] if unknown else ''!r}; "
                                 f"choose from {', '.join(CAPTURE_METHODS)}")
        try:
            return capture_program(ctx, methods)
        except CaptureFailed as error:
            first, reason = next(iter(error.failures.items()))
            others = [m for m in error.failures if m != first]
            tried = f" (also tried: {', '.join(others)})" if others else ""
            raise StrategyFailed(f"torch.export could not capture the model: {reason}{tried}") from error

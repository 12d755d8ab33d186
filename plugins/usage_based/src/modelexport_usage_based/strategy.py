"""The ``usage_based`` strategy: parameter ownership, then propagation bounded by the module tree.

It reads nothing of the exporter's scope records: only the graph, the model's
parameters and buffers, and its module tree. So it tags an ONNX file exported
elsewhere as well as its own export.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from modelexport_core.sdk import (
    BOUNDARY_KIND,
    EXPORTER_OPTION,
    ExportContext,
    GraphIndex,
    ModelMismatchError,
    StrategyUnavailable,
    TaggingResult,
    TaggingStrategy,
    export_in_turn,
    export_torchscript,
    fill_missing_modules,
    hold_call_boundaries,
    hold_call_containment,
    hold_causality,
    hold_lineage,
    recording_calls,
)
from modelexport_core.sdk import EVIDENCE_KIND as CONTAINMENT

if TYPE_CHECKING:  # the passes load when a model is tagged, not when the strategies are listed
    import numpy as np
    import onnx
    import torch

    from modelexport_core.sdk import CallEvent, StreamedModel

    from .graph_values import ArrayReader

MIN_WEIGHTS_FOUND = 0.5
"""Share of the model's non-constant weight tensors a graph must hold to be tagged as that model."""


class UsageBasedStrategy(TaggingStrategy):
    """Tag the nodes that use a parameter with its owner, then spread tags within module bounds."""

    name = "usage_based"
    priority = 50
    description = (
        "Nodes reading a parameter get its owning module; the others take tags through the graph, "
        "never outside the deepest module that holds parameter nodes on both sides of them"
    )
    requires = "the model's parameters and an ONNX graph of it (its own TorchScript export, or any file)"
    options = (EXPORTER_OPTION,)
    exporters = ("torchscript", "dynamo")

    def check(self, ctx: ExportContext) -> None:
        exporter = ctx.options.get("exporter", "auto")
        if exporter not in (*self.exporters, "auto"):
            raise StrategyUnavailable(f"usage_based.exporter must be torchscript, dynamo or auto, not {exporter!r}")

    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        self.check(ctx)
        exports = {"torchscript": self._export_torchscript, "dynamo": self._export_dynamo}
        return export_in_turn(self.exporters, ctx.options.get("exporter", "auto"),
                              lambda exporter: exports[exporter](ctx, onnx_path))

    def _export_dynamo(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        """A plain dynamo export, tagged as any file made elsewhere is (weights read from it as they are compared)."""
        from modelexport_core.sdk import export_dynamo, load_graph, tensor_value

        export_dynamo(ctx, onnx_path)
        folder = Path(onnx_path).parent
        result = self._tag(ctx, load_graph(Path(onnx_path)), lambda tensor: tensor_value(tensor, folder),
                           weights=Path(onnx_path))
        result.exporter = "dynamo"
        return result

    def _export_torchscript(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        from modelexport_core.sdk import load_graph, tensor_value

        from .helper_sizes import counting_calls

        # the exporter's trace runs the model once: its calls are counted, and the values crossing them recorded
        with counting_calls(ctx.model) as calls, recording_calls(ctx.model) as events:
            # equal values two calls computed stay two nodes, each where its call wrote it: one node serving
            # two calls has no one module, and the records would name it after the first
            unwritten = export_torchscript(ctx, onnx_path, in_memory=ctx.may_leave_unwritten, keep_repeats=True)
        folder = Path(onnx_path).parent
        # the graph only: each weight is read from where the exporter put it when it is compared, then let go
        if unwritten is not None:
            result = self._tag(ctx, unwritten.model, unwritten.value, calls, weights=unwritten, events=events)
            result.unwritten = unwritten
        else:
            result = self._tag(ctx, load_graph(Path(onnx_path)), lambda tensor: tensor_value(tensor, folder), calls,
                               weights=Path(onnx_path), events=events)
        result.exporter = "torchscript"
        return result

    def tag_onnx(self, ctx: ExportContext, onnx_model: "onnx.ModelProto") -> TaggingResult:
        return self._tag(ctx, onnx_model, None)

    def _tag(self, ctx: ExportContext, onnx_model: "onnx.ModelProto", read: "ArrayReader | None",
             counted: tuple[dict[str, int], dict[str, int]] | None = None,
             weights: "Path | StreamedModel | None" = None, events: "list[CallEvent] | None" = None) -> TaggingResult:
        """Tag ``onnx_model``; ``counted``: each module's call count and first call in one run, where known;
        ``weights``: where the weights of a graph loaded without them are (for onnxruntime); ``events``: the
        calls recorded as the exporter ran the model, where known."""
        from modelexport_core.sdk import intermediate_values

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="usage-based-onnxruntime") as pool:
            # the file's values, for the call boundaries, come from onnxruntime in a second thread while this one
            # works out owners, propagation and order (onnxruntime computes without the interpreter's lock); a
            # graph holding its weights (``weights`` None) is run after, as onnxruntime's copy is made in place
            running = pool.submit(intermediate_values, onnx_model, ctx.input_names, ctx.args, weights) \
                if weights is not None else None
            return self._passes(ctx, onnx_model, read, counted, weights, events, running, started)

    def _passes(self, ctx: ExportContext, onnx_model: "onnx.ModelProto", read: "ArrayReader | None",
                counted: tuple[dict[str, int], dict[str, int]] | None, weights: "Path | StreamedModel | None",
                events: "list[CallEvent] | None", running: "Future[dict[str, np.ndarray]] | None",
                started: float) -> TaggingResult:
        from .data_flow import DataGraph, classify_nodes, value_shapes_and_types
        from .helper_sizes import helper_exports, module_calls
        from .module_tree import ModuleTree
        from .order import reused_modules
        from .ownership import resolve_owners, run_order
        from .parameters import ParameterIndex
        from .propagation import State, propagate
        from .seeds import call_numbers, find_parameter_users, resolved_folds

        graph = onnx_model.graph
        index = GraphIndex.of(graph)
        tree = ModuleTree.of(ctx.model)
        parameters = ParameterIndex(ctx.model)
        users = find_parameter_users(graph, parameters, read)
        if not users.candidates and next(ctx.model.parameters(), None) is not None:
            raise ModelMismatchError(
                "no tensor of the graph equals a parameter of the model (another model, other weights or dtype?)"
            )
        call_counts, first_call = counted if counted and counted[0] else module_calls(ctx.model, lambda: ctx.module(*ctx.args))
        # a weight of a module the run never called is in no graph of it (a tower these inputs do not reach)
        distinctive = parameters.distinctive_values() if not call_counts else frozenset().union(
            *(digests for module, digests in parameters.own_values().items() if call_counts.get(module)))
        found = users.covered & distinctive
        if distinctive and len(found) < MIN_WEIGHTS_FOUND * len(distinctive):
            raise ModelMismatchError(
                f"only {len(found)} of the {len(distinctive)} weight tensors of {type(ctx.model).__name__} appear in "
                "the graph: it was exported from another model or other weights"
            )
        kinds = classify_nodes(graph, users.static_values, set(users.candidates))
        data = DataGraph.of(graph, index, kinds, users.static_values)
        readers_of = [index.node_consumers(graph, i) for i in range(len(graph.node))]
        seeds = resolve_owners(users, data, readers_of, run_order(tree.names, first_call), tree.torch_classes)
        calls = call_numbers(users, seeds, data)
        shapes, types = value_shapes_and_types(onnx_model)
        propagation = propagate(State(
            graph, index, kinds, data, tree, users.static_values, shapes, types, seeds, calls,
            helpers=helper_exports(ctx.model, tree, _opset_of(onnx_model), call_counts),
            folded=resolved_folds(users, seeds),
        ))
        tagged = {index.keys[i]: module for i, module in propagation.modules.items()}
        reused = reused_modules(seeds, calls) | {name for name, count in call_counts.items() if count > 1}
        held = hold_call_containment(graph, fill_missing_modules(graph, tagged), reused, called_modules(ctx.model),
                                     index=index)
        anchored = [index.keys[i] for i, module in seeds.items() if index.keys[i] not in held.moved]
        node_modules = held.node_modules
        for order_check in (hold_causality, hold_lineage):  # when calls ran: readers, makers, then whole lineages
            timely = order_check(graph, node_modules, first_call, reused, anchored, index=index)
            held.moved.update({k: v for k, v in timely.moved.items() if k not in held.moved})
            node_modules = timely.node_modules
        try:
            values = running.result() if running is not None else None  # None: the boundaries compute them
        except Exception:  # noqa: BLE001 - onnxruntime cannot run the file: without its values the tags stand
            bounded: dict[str, str] = {}
        else:
            # (the nodes reading a weight of one module alone: a call runs none of another line's)
            owned = {index.keys[i]: next(iter(owners.modules)) for i, owners in users.candidates.items()
                     if len(owners.modules) == 1}
            bounded = hold_call_boundaries(ctx, onnx_model, node_modules, _exporter_of(onnx_model), weights,
                                           values=values, events=events, index=index, owned=owned,
                                           weighing={index.keys[i]: frozenset(owners.modules)
                                                     for i, owners in users.candidates.items()})
        node_modules.update(bounded)
        evidence = {key: "neighbours" for key in node_modules if key not in tagged}
        evidence.update({index.keys[i]: "parameter" if seeds.get(i) == module else "propagation"
                         for i, module in propagation.modules.items()})
        evidence.update(dict.fromkeys(held.moved, CONTAINMENT))
        evidence.update(dict.fromkeys(bounded, BOUNDARY_KIND))
        return TaggingResult(
            node_modules=node_modules,
            evidence=evidence,
            exporter=_exporter_of(onnx_model),
            also={index.keys[i]: others for i, others in propagation.also.items()},
            details={
                "seeded_nodes": len(seeds),
                "ambiguous_seeds": sum(1 for owners in users.candidates.values() if len(owners.modules) > 1),
                "filled_nodes": len(node_modules) - len(tagged),
                "containment_moved": len(held.moved),
                "boundary_moved": len(bounded),
                "seconds": round(time.perf_counter() - started, 3),
            },
        )


def called_modules(model: "torch.nn.Module") -> set[str]:
    """The modules that can run: every one with a forward of its own (a list or dict of layers has none)."""
    import torch

    return {name for name, module in model.named_modules() if type(module).forward is not torch.nn.Module.forward}


def _opset_of(onnx_model: "onnx.ModelProto") -> int:
    """The default-domain opset a graph was written for (the one a helper's probe export uses)."""
    return next((o.version for o in onnx_model.opset_import if o.domain in ("", "ai.onnx")), 17)


def _exporter_of(onnx_model: "onnx.ModelProto") -> str:
    """Which exporter wrote a graph, from how it names nodes (the dynamo exporter: ``node_<op>``)."""
    named = [node.name for node in onnx_model.graph.node if node.name]
    if named and sum(name.startswith("node_") for name in named) * 2 > len(named):
        return "dynamo"
    return "torchscript"

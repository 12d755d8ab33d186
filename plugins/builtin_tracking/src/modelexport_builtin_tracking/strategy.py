"""The ``builtin_tracking`` strategy: PyTorch's own module scopes from the TorchScript tracer."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from modelexport_core.sdk import (
    ExportContext,
    TaggingResult,
    TaggingStrategy,
    export_torchscript,
    fill_missing_modules,
    node_key,
)

from .scopes import recording_scopes

if TYPE_CHECKING:
    import onnx

def parameter_owner(name: str, parameter_names: set[str]) -> str | None:
    """The module owning parameter or buffer ``name`` (in the exported module), if it is one."""
    if name in parameter_names:
        return name.rpartition(".")[0]
    return None


class BuiltinTrackingStrategy(TaggingStrategy):
    """Every node gets the module whose forward was running when the tracer recorded its op."""

    name = "builtin_tracking"
    priority = 200
    description = (
        "PyTorch's own module tracking in the TorchScript exporter: the tracer's scope for every node; "
        "initializer Identity nodes get the parameter's owner"
    )
    requires = "a model the TorchScript tracer can trace (torch.onnx.export with dynamo=False)"

    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        from modelexport_core.sdk import load_graph

        with recording_scopes() as scopes:
            unwritten = export_torchscript(ctx, onnx_path, in_memory=ctx.may_leave_unwritten)
        # node names and inputs are all it reads: the weights stay where the exporter put them
        model = unwritten.model if unwritten is not None else load_graph(onnx_path)
        result = self.tag_from_scopes(ctx, model, scopes)
        result.unwritten = unwritten
        return result

    def tag_from_scopes(
        self, ctx: ExportContext, model: "onnx.ModelProto", scopes: dict[str, str | None]
    ) -> TaggingResult:
        """Module of each node: its tracer scope, else its parameter's owner, else its neighbours'."""
        parameter_names = {name for name, _ in ctx.module.named_parameters(remove_duplicate=False)}
        parameter_names |= {name for name, _ in ctx.module.named_buffers(remove_duplicate=False)}
        node_modules: dict[str, str] = {}
        scoped_keys: set[str] = set()
        sources: Counter[str] = Counter()
        for i, node in enumerate(model.graph.node):
            key = node_key(node, i)
            scoped = scopes.get(node.name)
            if scoped is not None:
                node_modules[key] = ctx.model_qualname(scoped)
                scoped_keys.add(key)
                sources["tracer_scope"] += 1
                continue
            owners = [
                owner
                for value in list(node.output) + list(node.input)
                if (owner := parameter_owner(value, parameter_names)) is not None
            ]
            if owners:
                node_modules[key] = ctx.model_qualname(owners[0])
                sources["parameter_owner"] += 1
        filled = fill_missing_modules(model.graph, node_modules)
        sources["neighbours"] = len(filled) - len(node_modules)
        evidence = {key: "neighbours" for key in filled if key not in node_modules}
        evidence.update({key: "record" if key in scoped_keys else "parameter" for key in node_modules})
        return TaggingResult(
            node_modules=filled,
            evidence=evidence,
            exporter="torchscript",
            details={"node_sources": dict(sources)},
        )

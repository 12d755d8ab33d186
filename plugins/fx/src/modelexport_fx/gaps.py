"""Rewrites of a captured program around known gaps of the dynamo ONNX exporter, for any model.

``number - tensor`` (``1.0 - mask``) is captured as ``aten.rsub.Scalar``; the exporter's
decompositions turn it into ``aten.sub`` with the number first, and its type-promotion pass
then finds no overload for that ("Expected a value of type 'Tensor' for argument 'self' but
instead found type 'float'"). The same value is ``tensor * -alpha + number``, which every
pass takes; the new nodes keep the original's metadata (its module stack, so tags do not move).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def reflected_subtractions(program: "torch.export.ExportedProgram") -> int:
    """Rewrite every ``number - tensor`` of ``program`` in place as ``tensor * -alpha + number``; returns how many."""
    import torch

    graph = program.graph_module.graph
    rsub, sub = torch.ops.aten.rsub.Scalar, torch.ops.aten.sub.Tensor
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is rsub and len(node.args) >= 2 and _is_number(node.args[1]):
            tensor, number = node.args[0], node.args[1]
            alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
        elif node.target is sub and len(node.args) >= 2 and _is_number(node.args[0]) \
                and isinstance(node.args[1], torch.fx.Node):
            number, tensor = node.args[0], node.args[1]
            alpha = node.kwargs.get("alpha", 1)
        else:
            continue
        if not isinstance(tensor, torch.fx.Node) or not isinstance(tensor.meta.get("val"), torch.Tensor):
            continue
        with graph.inserting_before(node):
            negated = graph.call_function(torch.ops.aten.mul.Tensor, (tensor, -alpha))
            added = graph.call_function(torch.ops.aten.add.Tensor, (negated, number))
        negated.meta = dict(node.meta)
        negated.meta["val"] = tensor.meta["val"] * -alpha
        added.meta = dict(node.meta)
        node.replace_all_uses_with(added)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        program.graph_module.recompile()
    return rewritten

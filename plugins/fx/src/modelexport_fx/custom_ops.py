"""Custom ops with a PyTorch implementation but no ONNX function, decomposed before conversion.

A library can hide a computation behind a custom op (``torch.library.custom_op``) so that
compilers treat it as opaque; torch.export keeps it as one node, and the dynamo exporter
then fails on it ("No ONNX function found"). Where the op's own Python implementation
can be traced, the program is decomposed through it, so the op's body is exported as
ordinary ops (each keeps the module stack of the call). Ops that are opaque for a
reason (data-dependent loops) still fail, with a line naming them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from modelexport_core.sdk import StrategyFailed

from .reasons import one_line_reason

if TYPE_CHECKING:
    import torch

_BUILT_IN_NAMESPACES = {"aten", "prims", "_operator", "higher_order"}


def _registry() -> Any:
    from torch.onnx._internal.exporter._registration import ONNXRegistry

    return ONNXRegistry.from_torchlib()


def custom_ops_without_onnx(program: "torch.export.ExportedProgram") -> list["torch._ops.OpOverload"]:
    """The custom ops the program calls that the dynamo exporter has no ONNX function for."""
    import torch

    ops = {node.target for node in program.graph.nodes if node.op == "call_function"
           and isinstance(node.target, torch._ops.OpOverload) and node.target.namespace not in _BUILT_IN_NAMESPACES}
    if not ops:
        return []
    registry = _registry()
    return sorted((op for op in ops if not registry.is_registered(op)), key=str)


def python_implementation(op: "torch._ops.OpOverload") -> Callable[..., Any] | None:
    """The Python function a ``torch.library.custom_op`` was defined with, if it was."""
    from torch._library.custom_ops import OPDEFS

    definition = OPDEFS.get(f"{op.namespace}::{op._opname}")
    return getattr(definition, "_init_fn", None)


def decompose_custom_ops(program: "torch.export.ExportedProgram") -> "torch.export.ExportedProgram":
    """``program`` with every custom op lacking an ONNX function replaced by its traced implementation."""
    missing = custom_ops_without_onnx(program)
    if not missing:
        return program
    table = {}
    for op in missing:
        implementation = python_implementation(op)
        if implementation is None:
            raise StrategyFailed(f"custom op {op} has no ONNX function and no Python implementation to decompose")
        table[op] = implementation
    try:
        return program.run_decompositions(table)
    except Exception as error:
        names = ", ".join(str(op) for op in missing)
        raise StrategyFailed(
            f"custom op {names} has no ONNX function and its Python implementation cannot be traced "
            f"({one_line_reason(error)})"
        ) from error

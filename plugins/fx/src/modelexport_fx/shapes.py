"""Dynamic batch and sequence dimensions: from the core's ``dynamic_axes`` to torch.export and back.

torch.export gets ``Dim.AUTO`` for every axis the user wants dynamic, so it can infer
ranges (a sequence bounded by a position table) and equalities (an ids tensor and its
mask share the sequence) without constraint errors. The core widens example axes of size
0 or 1 before capture (torch.export would specialise them); an axis the model's own code
still pins is exported static, and the user is told which and why. In the ONNX file the symbols torch.export invented (``s85``) are renamed to
the user's axis names; two different symbols the user gave one name (the source and
target lengths of a sequence-to-sequence model) keep distinct names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from modelexport_core.sdk import ExportContext, StrategyFailed

if TYPE_CHECKING:
    import torch


def export_dynamic_shapes(ctx: ExportContext, varargs: bool) -> tuple[Any, ...] | None:
    """The ``dynamic_shapes`` argument of torch.export for the context's inputs; None when static.

    ``varargs`` says the exported forward takes its tensors as ``*tensors`` (the core's
    wrapper), whose specs torch.export expects nested in one tuple.
    """
    from torch.export import Dim

    if not ctx.dynamic_axes:
        return None
    specs = tuple(
        {axis: Dim.AUTO for axis in ctx.dynamic_axes.get(name, {})} or None for name in ctx.input_names
    )
    if all(spec is None for spec in specs):
        return None
    return (specs,) if varargs else specs


def _user_input_values(program: "torch.export.ExportedProgram") -> list[Any]:
    names = list(program.graph_signature.user_inputs)
    by_name = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    return [by_name[name].meta.get("val") for name in names if name in by_name]


def specialized_axes(program: "torch.export.ExportedProgram", ctx: ExportContext) -> dict[str, set[int]]:
    """The requested dynamic axes that torch.export made constant: the model's code fixes their size."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    pinned: dict[str, set[int]] = {}
    for name, value in zip(ctx.input_names, _user_input_values(program)):
        for axis in ctx.dynamic_axes.get(name, {}):
            size = value.shape[axis] if value is not None and axis < value.dim() else None
            if size is None or is_concrete_int(size):
                pinned.setdefault(name, set()).add(axis)
    return pinned


def dynamic_symbols(program: "torch.export.ExportedProgram", ctx: ExportContext) -> dict[str, dict[int, str]]:
    """Input -> {axis: symbol} for every requested dynamic axis; raises if torch.export fixed one."""
    pinned = specialized_axes(program, ctx)
    if pinned:
        name = sorted(pinned)[0]
        axis = sorted(pinned[name])[0]
        raise StrategyFailed(
            f"the model fixes input {name!r} axis {axis} ({ctx.dynamic_axes[name][axis]!r}) to its example size; "
            "export with --static or with other example sizes"
        )
    symbols: dict[str, dict[int, str]] = {}
    for name, value in zip(ctx.input_names, _user_input_values(program)):
        for axis in ctx.dynamic_axes.get(name, {}):
            symbols.setdefault(name, {})[axis] = str(value.shape[axis])
    return symbols


def axis_renames(
    input_shapes: Sequence[Sequence[Any]], ctx: ExportContext
) -> dict[str, str]:
    """Map the ONNX inputs' symbolic dims (``s85``) to the user's axis names.

    ``input_shapes`` are the ONNX graph inputs' shapes in ``ctx.input_names`` order, each
    dim a name (str) or a size (int). A symbol the user named twice keeps the first name;
    a second symbol under a name already taken gets ``<name>_<input>`` unless both example
    sizes are equal (then the user declared them one axis and they share the name).
    """
    renames: dict[str, str] = {}
    owner: dict[str, tuple[str, int]] = {}  # axis name -> (symbol, example size)
    for name, shape, example in zip(ctx.input_names, input_shapes, ctx.args):
        for axis, axis_name in sorted(ctx.dynamic_axes.get(name, {}).items()):
            if axis >= len(shape) or not isinstance(shape[axis], str) or shape[axis] in renames:
                continue
            symbol, size = shape[axis], int(example.shape[axis])
            taken = owner.get(axis_name)
            if taken is None:
                owner[axis_name] = (symbol, size)
                renames[symbol] = axis_name
            elif taken[1] == size:
                renames[symbol] = axis_name
            else:
                renames[symbol] = f"{axis_name}_{name}"
    return renames

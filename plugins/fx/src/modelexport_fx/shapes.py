"""Dynamic batch and sequence dimensions: from the core's ``dynamic_axes`` to torch.export and back.

torch.export gets ``Dim.AUTO`` for every axis the user wants dynamic, so it can infer
ranges (a sequence bounded by a position table) and equalities (an ids tensor and its
mask share the sequence) without constraint errors. An axis the model pins to its
example size is then refused with a clear reason instead of being exported static in
silence. In the ONNX file the symbols torch.export invented (``s85``) are renamed to
the user's axis names; two different symbols the user gave one name (the source and
target lengths of a sequence-to-sequence model) keep distinct names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from modelexport_core import ExportContext, StrategyFailed

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


def require_dynamic_axes(program: "torch.export.ExportedProgram", ctx: ExportContext) -> dict[str, dict[int, str]]:
    """Check every requested dynamic axis stayed symbolic; returns input -> {axis: symbol}.

    Raises :class:`StrategyFailed` naming the first axis the model fixed to its example size.
    """
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    symbols: dict[str, dict[int, str]] = {}
    values = _user_input_values(program)
    for name, value in zip(ctx.input_names, values):
        for axis, axis_name in ctx.dynamic_axes.get(name, {}).items():
            size = value.shape[axis] if value is not None and axis < value.dim() else None
            if size is not None and not is_concrete_int(size):
                symbols.setdefault(name, {})[axis] = str(size)
                continue
            size = int(size) if size is not None else None
            hint = " (torch.export fixes sizes 0 and 1; give example inputs of size >= 2)" if size in (0, 1) else ""
            raise StrategyFailed(
                f"the model fixes input {name!r} axis {axis} ({axis_name!r}) to its example size {size}{hint}; "
                "export with --static or with other example sizes"
            )
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

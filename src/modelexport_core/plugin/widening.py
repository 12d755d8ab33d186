"""Capturing at a size the exporters keep dynamic: example axes of size 0 or 1 widened to 2.

torch.export specialises every example axis of size 0 or 1, and a trace at batch 1 can
bake the 1 into the graph; yet a user's example almost always has batch 1. So the
strategies capture with an example whose dynamic axes of size 0 or 1 are widened to 2
(a size-1 axis repeated, a size-0 one filled with zeros), while verification still runs
the user's own example. An axis the model cannot take at size 2 stays at the user's
size and is exported static, with a note that names it and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from modelexport_core.errors import first_line

if TYPE_CHECKING:
    import torch

    from modelexport_core.plugin.strategy import ExportContext

CAPTURE_SIZE = 2
"""The smallest size torch.export keeps symbolic."""


def _widen_tensor(tensor: "torch.Tensor", axes: Sequence[int]) -> "torch.Tensor":
    import torch

    for axis in axes:
        size = tensor.shape[axis]
        if size >= CAPTURE_SIZE:
            continue
        if size == 0:
            shape = list(tensor.shape)
            shape[axis] = CAPTURE_SIZE
            tensor = torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
        else:
            tensor = torch.cat([tensor] * CAPTURE_SIZE, dim=axis)
    return tensor


def widen(
    args: Sequence["torch.Tensor"], input_names: Sequence[str], dynamic_axes: Mapping[str, Mapping[int, str]]
) -> tuple["torch.Tensor", ...]:
    """``args`` with every dynamic axis of size 0 or 1 grown to :data:`CAPTURE_SIZE`."""
    return tuple(
        _widen_tensor(tensor, sorted(dynamic_axes.get(name, {}))) for name, tensor in zip(input_names, args)
    )


def narrow_axes(
    args: Sequence["torch.Tensor"], input_names: Sequence[str], dynamic_axes: Mapping[str, Mapping[int, str]]
) -> dict[str, set[str]]:
    """The dim names (``batch``, ``sequence``) that need widening, with the inputs that carry them."""
    groups: dict[str, set[str]] = {}
    for name, tensor in zip(input_names, args):
        for axis, dim in dynamic_axes.get(name, {}).items():
            if axis < tensor.dim() and tensor.shape[axis] < CAPTURE_SIZE:
                groups.setdefault(dim, set()).add(name)
    return groups


def static_axes_note(ctx: "ExportContext", name: str, axis: int, reason: str) -> str:
    """One line saying an axis is exported static, at which size, and why."""
    size = ctx.user_args[ctx.input_names.index(name)].shape[axis]
    dim = ctx.dynamic_axes.get(name, {}).get(axis, "")
    return f"input {name!r} axis {axis} ({dim!r}) is exported static at size {size}: {reason}"


def widen_for_model(
    run: Callable[[tuple["torch.Tensor", ...]], object],
    args: tuple["torch.Tensor", ...],
    input_names: list[str],
    dynamic_axes: dict[str, dict[int, str]],
) -> tuple[tuple["torch.Tensor", ...], dict[str, dict[int, str]], list[str], object]:
    """Widen what the model accepts widened; axes it rejects at size 2 become static.

    ``run`` calls the model on positional inputs and returns its output (raising if the
    model fails). Returns the capture inputs, the dynamic axes left, notes for the user,
    and the output of the last successful run (None if no widened run succeeded).
    """
    groups = narrow_axes(args, input_names, dynamic_axes)
    if not groups:
        return args, dynamic_axes, [], None
    widened = widen(args, input_names, dynamic_axes)
    try:
        return widened, dynamic_axes, [], run(widened)
    except Exception as error:  # the model's own failure at size 2; tried axis by axis below
        failure = error
    run(args)  # the user's own example must run; a failure here is the model's, raised as such
    axes = {name: dict(dims) for name, dims in dynamic_axes.items()}
    notes: list[str] = []
    for dim, names in sorted(groups.items()):
        trial = {name: {a: d for a, d in dims.items() if d == dim} for name, dims in axes.items()}
        try:
            run(widen(args, input_names, trial))
            continue
        except Exception as error:
            failure = error
        for name in sorted(names):
            for axis in [a for a, d in axes[name].items() if d == dim]:
                size = args[input_names.index(name)].shape[axis]
                notes.append(
                    f"input {name!r} axis {axis} ({dim!r}) is exported static at size {size}: the model fails at "
                    f"size {CAPTURE_SIZE} ({type(failure).__name__}: {first_line(failure)})"
                )
                del axes[name][axis]
    axes = {name: dims for name, dims in axes.items() if dims}
    return widen(args, input_names, axes), axes, notes, None


"""Inputs that make a trace say where its values come from.

htp matches an ONNX value to a recorded call by its numbers, and a value holding one number everywhere
matches any call holding it: an all-ones mask makes every value computed from it (the mask the
model builds, its broadcasts) look alike, and they are then placed by their consumers instead. The
structure htp recovers does not depend on the numbers, only on the same inputs reaching PyTorch and
onnxruntime, so an integer or boolean input holding one nonzero value everywhere is traced with zeros in
the last quarter of its last row instead (zero is a valid value for a mask and for an index). Where the
model refuses those, the example itself is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def informative_args(args: tuple["torch.Tensor", ...]) -> tuple["torch.Tensor", ...] | None:
    """``args`` with each integer or boolean input that holds one nonzero value varied; None when none does."""
    varied = list(args)
    changed = False
    for position, tensor in enumerate(args):
        if tensor.is_floating_point() or tensor.is_complex() or tensor.dim() == 0 or tensor.shape[-1] < 2:
            continue
        flat = tensor.reshape(-1)
        if not bool((flat == flat[0]).all()) or not bool(flat[0]):
            continue
        copy = tensor.clone()
        last = tensor.shape[-1]
        copy[(-1,) * (tensor.dim() - 1) + (slice(last - max(1, last // 4), None),)] = 0
        varied[position] = copy
        changed = True
    return tuple(varied) if changed else None


ANALYSIS_EXTENTS = (2, 16)
"""The longest first axis and the longest other axis htp analyses where an example's axes are dynamic."""
SHORTER_AT_MOST = 0.25
"""Shortened inputs are used only where they hold at most this share of the example's elements."""


def shorter_args(
    args: tuple["torch.Tensor", ...], input_names: list[str], dynamic_axes: dict[str, dict[int, str]]
) -> tuple["torch.Tensor", ...] | None:
    """``args`` cut to a prefix along their dynamic axes, or None where that saves little.

    What htp recovers does not depend on how long a sequence or how large a batch is, while the time its trace,
    onnxruntime run and matching take grows with them: an axis the export declares dynamic is cut to its first
    ``ANALYSIS_EXTENTS`` positions (the first axis to 2, any other to 16; axes of one name alike, so a mask stays
    as long as its ids). The caller checks the file computes what the model computes on them, and uses the
    example itself where it does not.
    """
    sizes: dict[str, int] = {}
    for name, tensor in zip(input_names, args):
        for axis, dim in dynamic_axes.get(name, {}).items():
            if axis < tensor.dim():
                limit = ANALYSIS_EXTENTS[0] if axis == 0 else ANALYSIS_EXTENTS[1]
                sizes[dim] = min(sizes.get(dim, tensor.shape[axis]), tensor.shape[axis], limit)
    shorter = []
    for name, tensor in zip(input_names, args):
        for axis, dim in dynamic_axes.get(name, {}).items():
            if axis < tensor.dim() and sizes[dim] < tensor.shape[axis]:
                tensor = tensor.narrow(axis, 0, sizes[dim])
        shorter.append(tensor.contiguous())
    before = sum(tensor.numel() for tensor in args)
    after = sum(tensor.numel() for tensor in shorter)
    return tuple(shorter) if before and after <= SHORTER_AT_MOST * before else None

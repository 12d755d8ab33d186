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

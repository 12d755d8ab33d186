"""Shared helpers for the fx plugin's tests: one export per model, references, onnxruntime runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from modelexport_core import ExportContext, make_context
from modelexport_core.testing import HARD_CASES, Measured, build_case, measure_export

PRESET_NAMES = ["bert", "gpt2", "vit", "llama", "t5"]
HARD_CASE_NAMES = list(HARD_CASES)

logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed" notices


def export(name: str, directory: Path, **context: Any) -> Measured:
    """fx's export of a preset or hard case with ``make_context(**context)``, measured against PyTorch's records."""
    ctx = make_context(*build_case(name), **context)
    return measure_export("fx", ctx, directory / f"{name}.onnx", name)


def module_names(model: torch.nn.Module) -> set[str]:
    return {name for name, _ in model.named_modules(remove_duplicate=False)}


def resized_inputs(ctx: ExportContext, sizes: dict[str, int], seed: int = 1) -> tuple[torch.Tensor, ...]:
    """New inputs with their dynamic axes resized: ``sizes[axis name]``, or example size + 3 for an
    axis whose example size differs from the first axis of that name (a target sequence)."""
    first_size: dict[str, int] = {}
    for name, example in zip(ctx.input_names, ctx.args):
        for axis, axis_name in ctx.dynamic_axes.get(name, {}).items():
            first_size.setdefault(axis_name, int(example.shape[axis]))
    generator = torch.Generator().manual_seed(seed)
    resized = []
    for name, example in zip(ctx.input_names, ctx.args):
        shape = list(example.shape)
        for axis, axis_name in ctx.dynamic_axes.get(name, {}).items():
            same = shape[axis] == first_size[axis_name]
            shape[axis] = sizes.get(axis_name, shape[axis] + 3) if same else shape[axis] + 3
        if example.dtype.is_floating_point:
            resized.append(torch.randn(shape, generator=generator, dtype=example.dtype))
        elif int(example.min()) >= 0 and int(example.max()) <= 1:  # a mask: one padded row
            mask = torch.ones(shape, dtype=example.dtype)
            if mask.dim() == 2 and shape[0] > 1:
                mask[1, -2:] = 0
            resized.append(mask)
        else:
            resized.append(torch.randint(0, int(example.max()) + 1, shape, generator=generator, dtype=example.dtype))
    return tuple(resized)


def run_onnx(path: Path, ctx: ExportContext, args: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed_names = [i.name for i in session.get_inputs()]
    feed = {name: tensor.numpy() for name, tensor in zip(ctx.input_names, args) if name in feed_names}
    return session.run(None, feed)


def run_torch(ctx: ExportContext, args: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in ctx.module(*args)]

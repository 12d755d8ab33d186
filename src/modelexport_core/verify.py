"""Checking an exported model against PyTorch with onnxruntime, as Optimum does: max abs difference."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import VerificationError

if TYPE_CHECKING:
    import torch

    from .strategy import ExportContext


@dataclass(frozen=True)
class ShapeCheck:
    """One onnxruntime run compared with PyTorch."""

    shapes: dict[str, list[int]]
    max_abs_diff: float
    passed: bool


@dataclass(frozen=True)
class Verification:
    atol: float
    checks: list[ShapeCheck]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def max_abs_diff(self) -> float:
        return max((check.max_abs_diff for check in self.checks), default=0.0)


def resized_inputs(ctx: "ExportContext") -> tuple["torch.Tensor", ...]:
    """Inputs at a second shape: every dynamic axis grown (batch 2 -> 3, others by 3)."""
    import torch

    sizes: dict[str, int] = {}
    generator = torch.Generator().manual_seed(1)
    resized = []
    for name, tensor in zip(ctx.input_names, ctx.args):
        shape = list(tensor.shape)
        for axis, dim_name in ctx.dynamic_axes.get(name, {}).items():
            sizes.setdefault(dim_name, shape[axis] + (1 if axis == 0 else 3))
            shape[axis] = sizes[dim_name]
        if torch.is_floating_point(tensor):
            resized.append(torch.randn(shape, generator=generator).to(tensor.dtype))
        elif tensor.numel() and int(tensor.min()) >= 0 and int(tensor.max()) <= 1:
            resized.append(torch.ones(shape, dtype=tensor.dtype))  # a mask: keep every position visible
        else:
            high = int(tensor.max()) + 1 if tensor.numel() else 2
            resized.append(torch.randint(0, max(high, 1), shape, generator=generator, dtype=tensor.dtype))
    return tuple(resized)


def _compare(session, ctx: "ExportContext", args: tuple, atol: float) -> ShapeCheck:
    import numpy as np
    import torch

    graph_inputs = {i.name for i in session.get_inputs()}
    feed = {name: tensor.numpy() for name, tensor in zip(ctx.input_names, args) if name in graph_inputs}
    with torch.no_grad():
        expected = [t.detach().numpy() for t in ctx.module(*args)]
    actual = session.run(None, feed)
    worst = 0.0
    for want, got in zip(expected, actual):
        if want.shape != got.shape:
            return ShapeCheck({n: list(a.shape) for n, a in zip(ctx.input_names, args)}, float("inf"), False)
        if want.size:
            both_nan = np.isnan(want) & np.isnan(got) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
            diff = np.where(both_nan, 0.0, np.abs(want.astype(np.float64) - got.astype(np.float64)))
            worst = max(worst, float(np.nanmax(diff)) if not np.isnan(diff).all() else float("inf"))
    passed = len(expected) == len(actual) and worst <= atol
    return ShapeCheck({n: list(a.shape) for n, a in zip(ctx.input_names, args)}, worst, passed)


def verify(onnx_path: Path, ctx: "ExportContext", atol: float = 1e-4) -> Verification:
    """Run the ONNX model at the example shape, and at a second shape when axes are dynamic."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    try:
        session = onnxruntime.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        checks = [_compare(session, ctx, ctx.args, atol)]
        if ctx.dynamic_axes:
            checks.append(_compare(session, ctx, resized_inputs(ctx), atol))
    except Exception as error:  # onnxruntime raises its own exception types for models it cannot run
        message = " ".join(str(error).split())
        raise VerificationError(
            f"onnxruntime could not run the exported model: {message[:300]}; rerun with --no-verify to keep the file"
        ) from error
    return Verification(atol, checks)

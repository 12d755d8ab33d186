"""Checking an exported model against PyTorch with onnxruntime, as Optimum does: numpy.allclose's rule.

PyTorch runs where the model is (its device and dtype); onnxruntime's CPU provider
runs the file on CPU copies of the same inputs. Half-precision outputs are compared
with a tolerance suited to their precision (:data:`HALF_PRECISION_ATOL`); where
onnxruntime cannot run a half-precision file at all, the export is kept and the
verification says in one line why it was skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from modelexport_core.errors import VerificationError
from modelexport_core.export.shared_weights import shared_weights_session

if TYPE_CHECKING:
    import torch

    from modelexport_core.plugin.strategy import ExportContext


@dataclass(frozen=True)
class ShapeCheck:
    """One onnxruntime run compared with PyTorch."""

    shapes: dict[str, list[int]]
    max_abs_diff: float
    passed: bool


HALF_PRECISION_ATOL = {"float16": 1e-2, "bfloat16": 5e-2}
"""Tolerance for outputs of these dtypes when the user's ``--atol`` is tighter: a float16
value carries about 3 significant digits, a bfloat16 value about 2, and the error of a few
layers adds up to these."""


@dataclass(frozen=True)
class Verification:
    atol: float
    checks: list[ShapeCheck]
    skipped: str = ""  # why verification could not run here; empty when it ran
    notes: tuple[str, ...] = ()  # checks left out, and why
    rtol: float = 0.0  # each value may also differ by this share of PyTorch's value (as numpy.allclose)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def max_abs_diff(self) -> float:
        return max((check.max_abs_diff for check in self.checks), default=0.0)


def to_numpy(tensor: "torch.Tensor"):
    """A tensor's values as a NumPy array on the CPU, whatever its device."""
    return tensor.detach().cpu().numpy()


def resized_inputs(ctx: "ExportContext", grow: bool = True) -> tuple["torch.Tensor", ...]:
    """Inputs at a second shape: every dynamic axis grown (batch 2 -> 3, others by 3), on the inputs' device.

    ``grow=False``: new random values at the example's own shape (the second check of a
    static export, which catches a choice the trace made from the example's values).
    """
    import torch

    sizes: dict[str, int] = {}
    generator = torch.Generator().manual_seed(1 if grow else 2)
    resized = []
    for name, tensor in zip(ctx.input_names, ctx.user_args):
        shape = list(tensor.shape)
        for axis, dim_name in ctx.dynamic_axes.get(name, {}).items() if grow else ():
            sizes.setdefault(dim_name, shape[axis] + (1 if axis == 0 else 3))
            shape[axis] = sizes[dim_name]
        if torch.is_floating_point(tensor):
            value = torch.randn(shape, generator=generator).to(tensor.dtype)
        elif tensor.numel() and int(tensor.min()) >= 0 and int(tensor.max()) <= 1:
            value = torch.ones(shape, dtype=tensor.dtype)  # a mask: keep every position visible
        else:
            high = int(tensor.max()) + 1 if tensor.numel() else 2
            value = torch.randint(0, max(high, 1), shape, generator=generator, dtype=tensor.dtype)
        resized.append(value.to(tensor.device))
    return tuple(resized)


def output_atol(tensor: "torch.Tensor", atol: float) -> float:
    """The tolerance for one output: the user's, or the half-precision one when that is looser."""
    return max(atol, HALF_PRECISION_ATOL.get(str(tensor.dtype).removeprefix("torch."), 0.0))


def _compare(session, ctx: "ExportContext", args: tuple, atol: float, outputs: list | None = None,
             rtol: float = 0.0) -> ShapeCheck:
    """onnxruntime against PyTorch on ``args``; ``outputs``: PyTorch's, where they were computed already.

    A value passes when it differs by at most ``atol + rtol * |PyTorch's value|`` (``numpy.allclose``'s rule).
    """
    import torch

    graph_inputs = {i.name for i in session.get_inputs()}
    feed = {name: to_numpy(tensor) for name, tensor in zip(ctx.input_names, args) if name in graph_inputs}
    if outputs is None:
        with torch.no_grad():
            outputs = list(ctx.module(*args))
    actual = session.run(None, feed)
    shapes = {n: list(a.shape) for n, a in zip(ctx.input_names, args)}
    worst, passed = _difference(outputs, actual, atol, rtol)
    if len(outputs) != len(actual):
        worst, passed = float("inf"), False  # an output missing on one side differs without bound
    return ShapeCheck(shapes, worst, passed)


def _difference(outputs: list, actual: list, atol: float, rtol: float) -> tuple[float, bool]:
    """The largest difference of ``actual`` (arrays) from PyTorch's ``outputs``, and whether every value is within
    ``atol + rtol * |PyTorch's value|`` (``numpy.allclose``'s rule); NaN passes only where both sides have it."""
    import numpy as np
    import torch

    worst, passed = 0.0, True
    for tensor, got in zip(outputs, actual):
        want = to_numpy(tensor.float() if tensor.dtype == torch.bfloat16 else tensor)
        got = np.asarray(got)
        if want.shape != got.shape:
            return float("inf"), False
        if want.size:
            both_nan = np.isnan(want) & np.isnan(got) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
            diff = np.where(both_nan, 0.0, np.abs(want.astype(np.float64) - got.astype(np.float64)))
            # NaN on one side only differs without bound (the largest difference reported says so)
            largest = float("inf") if np.isnan(diff).any() else float(np.max(diff))
            worst = max(worst, largest)
            allowed = output_atol(tensor, atol) + rtol * np.abs(want.astype(np.float64))
            passed = passed and not np.isnan(diff).any() and bool((diff <= allowed).all())
    return worst, passed


def _half_precision(ctx: "ExportContext") -> str:
    """'float16' or 'bfloat16' when the model computes in half precision, else ''."""
    dtypes = {str(p.dtype).removeprefix("torch.") for p in ctx.model.parameters() if p.is_floating_point()}
    dtypes |= {str(t.dtype).removeprefix("torch.") for t in ctx.user_args if t.is_floating_point()}
    return next((name for name in HALF_PRECISION_ATOL if name in dtypes), "")


def verify(onnx_path: Path, ctx: "ExportContext", atol: float = 1e-4, same_shape_second: bool = False,
           rtol: float = 0.0) -> Verification:
    """Run the ONNX model at the example shape, and at a second shape when axes are dynamic.

    ``same_shape_second``: with no dynamic axis, the second check runs new random inputs of
    the example's shape instead (a static export whose graph kept the example's routing fails it).
    """
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    half = _half_precision(ctx)
    if half == "bfloat16" and any(t.dtype.is_floating_point for t in ctx.user_args):
        return Verification(atol, [], skipped="bfloat16 inputs have no NumPy type, so onnxruntime cannot be fed them here")
    try:
        # the weights the model holds as they are in the file are not loaded a second time
        with shared_weights_session(onnx_path, ctx.model, options) as (session, _shared):
            checks = [_compare(session, ctx, ctx.user_args, atol, list(ctx.example_outputs) or None, rtol)]
            notes: tuple[str, ...] = ()
            if ctx.dynamic_axes or same_shape_second:
                second = resized_inputs(ctx, grow=bool(ctx.dynamic_axes))
                reason, outputs = _pytorch_outputs(ctx, second)
                if reason:
                    shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in zip(ctx.input_names, second))
                    notes = (f"the second shape ({shapes}) was not checked: the model itself fails on it ({reason})",)
                elif ctx.dynamic_axes:
                    checks.append(_compare(session, ctx, second, atol, outputs, rtol))
                else:
                    checks.append(_compare_or_fail(session, ctx, second, atol, outputs, rtol))
    except Exception as error:  # onnxruntime raises its own exception types for models it cannot run
        message = " ".join(str(error).split())
        if half:
            return Verification(atol, [], skipped=f"onnxruntime's CPU provider cannot run this {half} model: {message[:200]}")
        raise VerificationError(f"onnxruntime could not run the exported model: {message[:300]}") from error
    return Verification(atol, checks, notes=notes, rtol=rtol)


def _compare_or_fail(session, ctx: "ExportContext", args: tuple, atol: float, outputs: list,
                     rtol: float = 0.0) -> ShapeCheck:
    """:func:`_compare`, where onnxruntime failing to run the file on ``args`` is a failed check, not an error:
    a static file that ran at the example but not on other values of its shape kept the example's choices."""
    try:
        return _compare(session, ctx, args, atol, outputs, rtol)
    except Exception:  # noqa: BLE001 - onnxruntime's own exception types
        return ShapeCheck({n: list(a.shape) for n, a in zip(ctx.input_names, args)}, float("inf"), False)


def _pytorch_outputs(ctx: "ExportContext", args: tuple) -> tuple[str, list]:
    """The model's outputs in PyTorch on ``args`` (the guessed second shape), or why it fails on them."""
    import torch

    from modelexport_core.errors import first_line

    try:
        with torch.no_grad():
            return "", list(ctx.module(*args))
    except Exception as error:  # the guess of which axes vary together was wrong for this model
        return f"{type(error).__name__}: {first_line(error)}", []


def pytorch_self_difference(ctx: "ExportContext", atol: float, rtol: float = 0.0) -> float | None:
    """How far two PyTorch runs on the example differ, where they differ beyond the tolerance; else None.

    A model that draws random numbers in ``forward`` (random masking, sampling) disagrees with itself, and so
    with any file: that, not the file, is then why verification fails.
    """
    import torch

    with torch.no_grad():
        first = list(ctx.example_outputs) or list(ctx.module(*ctx.user_args))
        second = [to_numpy(t.float() if t.dtype == torch.bfloat16 else t) for t in ctx.module(*ctx.user_args)]
    worst, passed = _difference(first, second, atol, rtol)
    return None if passed else worst

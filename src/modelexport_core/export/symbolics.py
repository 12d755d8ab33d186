"""ONNX translations for aten ops the TorchScript exporter lacks, or gets wrong, but current libraries emit.

``aten::diff`` (transformers' mask code finds packed sequences with it) and
``aten::histc`` (mixture-of-experts routing counts tokens per expert with it) have no
symbolic in torch's TorchScript exporter, so every model using them failed there.
``aten::cumsum`` of a boolean tensor (a running count of mask positions) is translated
without the cast to integers that PyTorch applies, into a graph onnxruntime rejects.
``aten::layer_norm`` whose normalized shape is read from the input (``x.shape[-1:]``, common
in hand-written models) gets, under dynamic axes, a list of traced sizes where torch's
translation wants constants, and the export fails; the translation here reads those sizes
from the input's static type (only their count matters when weight and bias are given).
``aten::permute`` with negative dims is written with them as they are into ``Transpose``'s
``perm``, which onnxruntime refuses to load; they are made non-negative from the input's rank.
All are written here from standard ONNX ops (opset 13 and above, layer_norm from opset 9) and
registered once per process, before a TorchScript export.
"""

from __future__ import annotations

from typing import Any

_REGISTERED = False
SINCE_OPSET = 13
LAYER_NORM_OPSETS = (9, 17)
PERMUTE_SINCE_OPSET = 9  # torch translates it at opset 9 only
_INT64_MAX = 2**63 - 1


def _constant(g: Any, values: Any, dtype: Any) -> Any:
    import torch

    return g.op("Constant", value_t=torch.tensor(values, dtype=dtype))


def diff_symbolic(g: Any, self: Any, n: Any, dim: Any, prepend: Any, append: Any) -> Any:
    """``torch.diff``: ``x[1:] - x[:-1]`` along ``dim``, ``n`` times, after prepending and appending."""
    import torch
    from torch.onnx import symbolic_helper
    from torch.onnx._internal.torchscript_exporter import _type_utils

    times = symbolic_helper._get_const(n, "i", "n")
    axis = symbolic_helper._get_const(dim, "i", "dim")
    value = self
    if not symbolic_helper._is_none(prepend):
        value = g.op("Concat", prepend, value, axis_i=axis)
    if not symbolic_helper._is_none(append):
        value = g.op("Concat", value, append, axis_i=axis)
    is_bool = _type_utils.JitScalarType.from_value(self, _type_utils.JitScalarType.UNDEFINED) == _type_utils.JitScalarType.BOOL
    axes = _constant(g, [axis], torch.int64)
    for _ in range(times):
        later = g.op("Slice", value, _constant(g, [1], torch.int64), _constant(g, [_INT64_MAX], torch.int64), axes)
        earlier = g.op("Slice", value, _constant(g, [0], torch.int64), _constant(g, [-1], torch.int64), axes)
        value = g.op("Xor", later, earlier) if is_bool else g.op("Sub", later, earlier)
    return value


def histc_symbolic(g: Any, self: Any, bins: Any, low: Any, high: Any) -> Any:
    """``torch.histc``: counts of values in ``bins`` equal bins over [low, high]; a value equal to high
    falls in the last bin, values outside are not counted, low == high == 0 takes the data's range."""
    import torch
    from torch.onnx import symbolic_helper
    from torch.onnx._internal.torchscript_exporter import _type_utils

    count = symbolic_helper._get_const(bins, "i", "bins")
    lowest = float(symbolic_helper._get_const(low, "f", "min"))
    highest = float(symbolic_helper._get_const(high, "f", "max"))
    dtype = _type_utils.JitScalarType.from_value(self, _type_utils.JitScalarType.FLOAT)
    flat = g.op("Cast", g.op("Reshape", self, _constant(g, [-1], torch.int64)), to_i=_type_utils.JitScalarType.FLOAT.onnx_type())
    if lowest == highest:
        low_t = g.op("ReduceMin", flat, keepdims_i=0)
        high_t = g.op("ReduceMax", flat, keepdims_i=0)
    else:
        low_t = _constant(g, [lowest], torch.float32)
        high_t = _constant(g, [highest], torch.float32)
    scaled = g.op("Div", g.op("Mul", g.op("Sub", flat, low_t), _constant(g, [float(count)], torch.float32)),
                  g.op("Sub", high_t, low_t))
    index = g.op("Min", g.op("Floor", scaled), _constant(g, [float(count - 1)], torch.float32))
    inside = g.op("And", g.op("GreaterOrEqual", flat, low_t), g.op("LessOrEqual", flat, high_t))
    edges = g.op("Range", _constant(g, 0.0, torch.float32), _constant(g, float(count), torch.float32),
                 _constant(g, 1.0, torch.float32))
    hits = g.op("And", g.op("Equal", g.op("Unsqueeze", index, _constant(g, [1], torch.int64)),
                            g.op("Unsqueeze", edges, _constant(g, [0], torch.int64))),
                g.op("Unsqueeze", inside, _constant(g, [1], torch.int64)))
    counts = g.op("ReduceSum", g.op("Cast", hits, to_i=_type_utils.JitScalarType.FLOAT.onnx_type()),
                  _constant(g, [0], torch.int64), keepdims_i=0)
    return g.op("Cast", counts, to_i=dtype.onnx_type())


def cumsum_symbolic(g: Any, self: Any, dim: Any, dtype: Any) -> Any:
    """``torch.cumsum``: in the requested dtype, or int64 for a boolean or small integer input, as PyTorch does."""
    import torch
    from torch.onnx import symbolic_helper
    from torch.onnx._internal.torchscript_exporter import _type_utils

    axis = symbolic_helper._get_const(dim, "i", "dim")
    source = _type_utils.JitScalarType.from_value(self, _type_utils.JitScalarType.UNDEFINED)
    if not symbolic_helper._is_none(dtype):
        target = _type_utils.JitScalarType(symbolic_helper._get_const(dtype, "i", "dtype"))
    elif source in (_type_utils.JitScalarType.BOOL, _type_utils.JitScalarType.UINT8, _type_utils.JitScalarType.INT8,
                    _type_utils.JitScalarType.INT16, _type_utils.JitScalarType.INT):
        target = _type_utils.JitScalarType.INT64
    else:
        target = None
    value = g.op("Cast", self, to_i=target.onnx_type()) if target is not None and target != source else self
    return g.op("CumSum", value, _constant(g, axis, torch.int64))


def _constant_list(value: Any) -> list[int] | None:
    """The ints of a constant list value, or None when it is built from graph values."""
    from torch.onnx import symbolic_helper

    try:
        return list(symbolic_helper._get_const(value, "is", "normalized_shape"))
    except Exception:  # noqa: BLE001 - torch raises SymbolicValueError for a list of graph values
        return None


def normalized_shape_of(input: Any, normalized_shape: Any) -> list[int]:
    """The normalized shape as ints: the constant itself, else the input's last dims from its static type.

    Sizes the type does not know (a dynamic axis normalized over) are given as 1: torch's
    translation uses only the count of dims, except to build a missing weight or bias,
    which :func:`layer_norm_symbolic` refuses in that case.
    """
    from torch.onnx import errors, symbolic_helper

    constant = _constant_list(normalized_shape)
    if constant is not None:
        return constant
    count = len(list(normalized_shape.node().inputs())) if symbolic_helper._is_packed_list(normalized_shape) else None
    sizes = symbolic_helper._get_tensor_sizes(input)
    if count is None or sizes is None or count > len(sizes):
        raise errors.SymbolicValueError(
            "layer_norm: the normalized shape is neither a constant nor a list of the input's sizes", input)
    return [size if size is not None else 1 for size in sizes[len(sizes) - count:]]


def layer_norm_symbolic(g: Any, input: Any, normalized_shape: Any, weight: Any, bias: Any, eps: Any,
                        cudnn_enable: Any) -> Any:
    """``aten::layer_norm`` with its normalized shape made constant from the input's type, then torch's translation."""
    from torch.onnx import errors, symbolic_helper
    from torch.onnx._internal.torchscript_exporter import symbolic_opset9, symbolic_opset17

    shape = normalized_shape_of(input, normalized_shape)
    if symbolic_helper._is_none(weight) or symbolic_helper._is_none(bias):
        sizes = symbolic_helper._get_tensor_sizes(input) or []
        if _constant_list(normalized_shape) is None and None in sizes[len(sizes) - len(shape):]:
            raise errors.SymbolicValueError(
                "layer_norm without weight or bias over a dynamic axis: its size is not known", input)
    translate = symbolic_opset17.layer_norm if g.opset >= 17 else symbolic_opset9.layer_norm
    return translate(g, input, shape, weight, bias, eps, cudnn_enable)


def permute_symbolic(g: Any, self: Any, dims: Any) -> Any:
    """``aten::permute`` with negative dims (``x.permute(0, -2, -1, 1)``) made non-negative from the input's rank:
    torch's translation writes them into ``Transpose``'s ``perm`` as they are, which ONNX does not allow."""
    from torch.onnx import symbolic_helper

    perm = list(symbolic_helper._get_const(dims, "is", "dims"))
    if any(d < 0 for d in perm):
        rank = symbolic_helper._get_tensor_rank(self) or len(perm)
        perm = [d % rank for d in perm]
    if perm == list(range(len(perm))):
        return self
    return g.op("Transpose", self, perm_i=perm)


def register_missing_symbolics() -> None:
    """Register the translations above with the TorchScript exporter (once per process)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from torch.onnx import register_custom_op_symbolic

    register_custom_op_symbolic("aten::diff", diff_symbolic, SINCE_OPSET)
    register_custom_op_symbolic("aten::histc", histc_symbolic, SINCE_OPSET)
    register_custom_op_symbolic("aten::cumsum", cumsum_symbolic, SINCE_OPSET)
    register_custom_op_symbolic("aten::permute", permute_symbolic, PERMUTE_SINCE_OPSET)
    for opset in LAYER_NORM_OPSETS:  # each opset torch translates it at, or torch's own wins from that opset on
        register_custom_op_symbolic("aten::layer_norm", layer_norm_symbolic, opset)
    _REGISTERED = True

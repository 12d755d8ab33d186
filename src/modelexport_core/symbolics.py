"""ONNX translations for aten ops the TorchScript exporter lacks, or gets wrong, but current libraries emit.

``aten::diff`` (transformers' mask code finds packed sequences with it) and
``aten::histc`` (mixture-of-experts routing counts tokens per expert with it) have no
symbolic in torch's TorchScript exporter, so every model using them failed there.
``aten::cumsum`` of a boolean tensor (a running count of mask positions) is translated
without the cast to integers that PyTorch applies, into a graph onnxruntime rejects.
All are written here from standard ONNX ops (opset 13 and above) and registered once
per process, before a TorchScript export.
"""

from __future__ import annotations

from typing import Any

_REGISTERED = False
SINCE_OPSET = 13
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


def register_missing_symbolics() -> None:
    """Register the translations above with the TorchScript exporter (once per process)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from torch.onnx import register_custom_op_symbolic

    register_custom_op_symbolic("aten::diff", diff_symbolic, SINCE_OPSET)
    register_custom_op_symbolic("aten::histc", histc_symbolic, SINCE_OPSET)
    register_custom_op_symbolic("aten::cumsum", cumsum_symbolic, SINCE_OPSET)
    _REGISTERED = True

"""Inputs for running an ONNX file with nothing but the file: from its graph inputs' types and shapes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import onnx

# symbolic dims get small sizes: enough to exercise every op, small enough to run at once
SYMBOLIC_SIZES = {"batch": 2, "sequence": 16}
DEFAULT_SYMBOLIC_SIZE = 8
INTEGER_HIGH = 2  # integer inputs (token ids, masks, positions) stay in [0, 2): valid for any vocabulary


def _size(dim: "onnx.TensorShapeProto.Dimension") -> int:
    if dim.HasField("dim_value") and dim.dim_value > 0:
        return dim.dim_value
    name = dim.dim_param.lower()
    for key, size in SYMBOLIC_SIZES.items():
        if key in name:
            return size
    return DEFAULT_SYMBOLIC_SIZE


def generated_inputs(model: "onnx.ModelProto", seed: int = 0) -> dict[str, "np.ndarray"]:
    """Random inputs for every graph input of ``model`` that is not an initializer.

    Floating inputs are standard normal; integer inputs are 1 where the name suggests a mask
    and otherwise in [0, 2), valid ids for any embedding; booleans are True.
    """
    import numpy as np
    import onnx

    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    inputs = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        shape = [_size(d) for d in tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            inputs[value.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            inputs[value.name] = np.ones(shape, dtype=dtype)
        elif "mask" in value.name.lower():
            inputs[value.name] = np.ones(shape, dtype=dtype)
        else:
            inputs[value.name] = rng.integers(0, INTEGER_HIGH, size=shape).astype(dtype)
    return inputs

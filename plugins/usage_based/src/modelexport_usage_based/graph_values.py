"""Constant tensors of an ONNX graph: initializers and the values of ``Constant`` nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    import numpy as np
    import onnx


ArrayReader = Callable[["onnx.TensorProto"], "np.ndarray"]
"""Reads an initializer's value: from the proto, or from the file a weightless stub of it refers to."""


def initializer_arrays(graph: "onnx.GraphProto", read: ArrayReader | None = None) -> Iterator[tuple[str, "np.ndarray"]]:
    """Each initializer of the graph as an array, with its name, one at a time (never all weights at once)."""
    from onnx import numpy_helper

    read = read or numpy_helper.to_array
    for init in graph.initializer:
        yield init.name, read(init)


def constant_array(node: "onnx.NodeProto") -> "np.ndarray | None":
    """The tensor a ``Constant`` node holds; None for sparse or string constants."""
    import numpy as np
    from onnx import numpy_helper

    for attribute in node.attribute:
        if attribute.name == "value":
            return numpy_helper.to_array(attribute.t)
        if attribute.name == "value_float":
            return np.array(attribute.f, dtype=np.float32)
        if attribute.name == "value_floats":
            return np.array(list(attribute.floats), dtype=np.float32)
        if attribute.name == "value_int":
            return np.array(attribute.i, dtype=np.int64)
        if attribute.name == "value_ints":
            return np.array(list(attribute.ints), dtype=np.int64)
    return None

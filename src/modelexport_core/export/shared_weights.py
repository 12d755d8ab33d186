"""An onnxruntime session on an exported file whose weights are the model's own tensors, not a second copy.

Verification needs the PyTorch model and onnxruntime's session of the file at once; loaded
as usual, the session holds every weight a second time (2.4 GB more for a 0.6 B model).
Here each initializer whose bytes in the file are exactly those of a parameter or buffer of
the model (same name, type and shape; compared byte for byte, one tensor at a time) is
handed to onnxruntime as that tensor's memory (``add_external_initializers``); the others
(folded constants, transposed copies) are read from the file as before. The session still
runs the file: what it computes with comes from the file's bytes, some of them found in the
model's memory.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from modelexport_core.format.onnx_file import load_graph, stub_file, tensor_value

if TYPE_CHECKING:
    import numpy as np
    import onnx
    import torch


@dataclass
class SharedWeights:
    """The initializers handed to onnxruntime from the model's memory; kept alive as long as the session."""

    names: list[str] = field(default_factory=list)
    arrays: list["np.ndarray"] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)  # the OrtValues over ``arrays``

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self.arrays)


def _model_tensors(model: "torch.nn.Module") -> dict[str, "torch.Tensor"]:
    """Parameters and buffers by the name a plain export gives their initializers."""
    tensors = dict(model.named_buffers())
    tensors.update(model.named_parameters())
    return tensors


def _as_shared_array(tensor: "torch.Tensor", initializer: "onnx.TensorProto") -> "np.ndarray | None":
    """The tensor's memory as an array of the initializer's type and shape, or None where it cannot be shared."""
    from onnx.helper import tensor_dtype_to_np_dtype

    if tensor.device.type != "cpu" or not tensor.is_contiguous() or tensor.is_sparse:
        return None
    try:
        array = tensor.detach().numpy()  # a view of the tensor's memory, no copy
        dtype = tensor_dtype_to_np_dtype(initializer.data_type)
    except (TypeError, RuntimeError, KeyError, ValueError):  # bfloat16 and other types NumPy lacks
        return None
    if array.dtype != dtype or list(array.shape) != list(initializer.dims):
        return None
    return array


def _same_bytes(array: "np.ndarray", initializer: "onnx.TensorProto", folder: Path) -> bool:
    """Whether the file holds exactly ``array``'s bytes for this initializer (read alone, then dropped)."""
    import numpy as np

    stored = tensor_value(initializer, folder)
    return stored.shape == array.shape and stored.dtype == array.dtype and np.array_equal(
        stored.reshape(-1).view(np.uint8), array.reshape(-1).view(np.uint8))


def find_shared_weights(graph: "onnx.ModelProto", folder: Path, model: "torch.nn.Module") -> SharedWeights:
    """The initializers of ``graph`` (read with ``load_graph`` from a file in ``folder``) the model holds as they are."""
    import onnx
    import onnxruntime

    tensors = _model_tensors(model)
    shared = SharedWeights()
    for initializer in graph.graph.initializer:
        if initializer.data_location != onnx.TensorProto.EXTERNAL:
            continue  # small tensors stay inline in the graph, and onnxruntime replaces external ones only
        tensor = tensors.get(initializer.name)
        array = _as_shared_array(tensor, initializer) if tensor is not None else None
        if array is None or not array.size or not _same_bytes(array, initializer, folder):
            continue
        shared.names.append(initializer.name)
        shared.arrays.append(array)
        shared.values.append(onnxruntime.OrtValue.ortvalue_from_numpy(array))
    return shared


@contextmanager
def shared_weights_session(onnx_path: Path, model: "torch.nn.Module", options: Any) -> Iterator[tuple[Any, SharedWeights]]:
    """An onnxruntime CPU session of ``onnx_path`` with the weights it shares with ``model`` taken from its memory.

    The session reads a weightless copy of the graph written beside the file, whose other
    initializers refer to their bytes in the file; it is removed when the block ends.
    """
    import onnxruntime

    onnx_path = Path(onnx_path)
    graph = load_graph(onnx_path)
    shared = find_shared_weights(graph, onnx_path.parent, model)
    if shared.names:
        options.add_external_initializers(shared.names, shared.values)
    with stub_file(graph, onnx_path, "verify") as stub:
        session = onnxruntime.InferenceSession(str(stub), options, providers=["CPUExecutionProvider"])
        yield session, shared

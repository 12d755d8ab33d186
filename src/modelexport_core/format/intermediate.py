"""Every intermediate value of an ONNX graph on the example inputs, computed with onnxruntime.

Strategies compare these with the tensors the model computed on the same inputs: htp with every
operation's result, usage_based with the values each module call took and returned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    from modelexport_core.format.onnx_file import StreamedModel


def _numpy_input(tensor: "torch.Tensor") -> "np.ndarray":
    return tensor.detach().cpu().numpy()


def intermediate_values(
    onnx_model: "onnx.ModelProto",
    input_names: Sequence[str],
    args: Sequence["torch.Tensor"],
    weights: "Path | StreamedModel | None" = None,
) -> dict[str, "np.ndarray"]:
    """Run ``onnx_model`` on ``args`` and return the value of every node output (by value name).

    Every node output is made a graph output so that nothing is optimised away; values
    onnxruntime cannot produce are simply missing from the result. ``weights``: where the
    weights of a graph without them are: the file it was read from with ``load_graph`` (onnxruntime
    reads them there) or the exporter's bytes (handed to onnxruntime as they lie); never copied
    through Python.
    """
    import onnxruntime as ort

    held: list = []  # what onnxruntime computes with from memory, alive while it runs
    session = _session(onnx_model, weights, held)
    graph_inputs = {i.name for i in session.get_inputs()}
    feeds = {name: ort.OrtValue.ortvalue_from_numpy(_numpy_input(tensor))
             for name, tensor in zip(input_names, args) if name in graph_inputs}
    names = [output.name for output in session.get_outputs()]
    # as OrtValues, then arrays over their memory: ``run`` would copy every intermediate value once more
    return dict(zip(names, (value.numpy() for value in session.run_with_ort_values(names, feeds))))


def _session(onnx_model: "onnx.ModelProto", weights: "Path | StreamedModel | None", held: list) -> "ort.InferenceSession":
    """An onnxruntime session returning every node output of ``onnx_model``, unoptimised; ``held`` keeps the
    arrays it was handed alive."""
    from pathlib import Path

    import onnx
    import onnxruntime as ort

    if weights is not None:  # a graph without its weights is small: the session's graph is a copy, the given
        copy = onnx.ModelProto()  # one is never changed (another thread may read it meanwhile)
        copy.CopyFrom(onnx_model)
        onnx_model = copy
    graph = onnx_model.graph
    before = len(graph.output)
    existing = {output.name for output in graph.output}
    for node in graph.node:
        for value in node.output:
            if value and value not in existing:
                graph.output.append(onnx.ValueInfoProto(name=value))
                existing.add(value)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = False
    # one run: packing weights for faster matmuls (a second copy of each), and threads spinning between ops,
    # cost more than they save
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = ["CPUExecutionProvider"]
    try:
        if isinstance(weights, Path):
            from modelexport_core.format.onnx_file import stub_file

            with stub_file(onnx_model, weights, "intermediate-values") as path:
                return ort.InferenceSession(str(path), options, providers=providers)
        if weights is not None:
            return ort.InferenceSession(_in_memory(onnx_model, weights, options, held), options, providers=providers)
        return ort.InferenceSession(onnx_model.SerializeToString(), options, providers=providers)
    finally:
        del graph.output[before:]


def _in_memory(onnx_model: "onnx.ModelProto", weights: "StreamedModel", options: "ort.SessionOptions",
               held: list) -> bytes:
    """``onnx_model`` (a copy, changed here) serialized for a session whose weights are the exporter's bytes where they lie: each
    initializer the graph holds without its data is marked external and handed over as an array over those
    bytes (``add_external_initializers``), copied only where not stored in order."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    names: list[str] = []
    for (_, write), tensor in zip(weights.data, onnx_model.graph.initializer):
        if write is None:  # its data is in the graph
            continue
        array = weights.value(tensor)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        tensor.data_location = onnx.TensorProto.EXTERNAL
        del tensor.external_data[:]
        tensor.external_data.add(key="location", value="in-memory")
        names.append(tensor.name)
        held.append(ort.OrtValue.ortvalue_from_numpy(array))
    if names:
        options.add_external_initializers(names, held)
    return onnx_model.SerializeToString()

"""Reading and writing an ONNX file's graph without its weights (``modelexport_core.format.onnx_file``)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelexport_core.format.onnx_file import (
    StreamedTensor,
    check_graph,
    load_graph,
    save_graph,
    save_with_initializers,
    streamed_from_bytes,
    stub_file,
    tensor_value,
)

pytestmark = pytest.mark.unit  # the fast tier, run first


def _model_with_weights(path, *, subgraph: bool = False) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "weight")
    bias = numpy_helper.from_array(np.ones(64, dtype=np.float32), "bias")
    nodes = [
        helper.make_node("MatMul", ["x", "weight"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "bias"], ["y"]),  # unnamed: known as Add#1
    ]
    if subgraph:
        branch = helper.make_graph([helper.make_node("Relu", ["y"], ["r"], name="inner")], "branch", [],
                                   [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 64])])
        nodes.append(helper.make_node("Constant", [], ["c"], name="cond",
                                      value=numpy_helper.from_array(np.array(True))))
        nodes.append(helper.make_node("If", ["c"], ["z"], name="if", then_branch=branch, else_branch=branch))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("z" if subgraph else "y", TensorProto.FLOAT, [2, 64])],
                              initializer=[weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, str(path))
    return model


def test_the_graph_is_read_without_weights_and_written_back_around_them(tmp_path):
    source, target = tmp_path / "m.onnx", tmp_path / "tagged.onnx"
    original = _model_with_weights(source, subgraph=True)
    graph = load_graph(source)
    assert [n.name for n in graph.graph.node] == [n.name for n in original.graph.node]
    weight, bias = graph.graph.initializer  # the weight's data stays in the file, the small bias inline
    assert weight.data_location == TensorProto.EXTERNAL and not weight.raw_data and list(weight.dims) == [64, 64]
    assert bias.data_location != TensorProto.EXTERNAL and list(bias.dims) == [64]
    for stub, full in zip(graph.graph.initializer, original.graph.initializer):
        assert np.array_equal(tensor_value(stub, tmp_path), numpy_helper.to_array(full))
    assert weight.data_location == TensorProto.EXTERNAL and not weight.raw_data  # reading it left the stub alone
    for model in (graph, original):  # the same edits: tags, and a weight and a node renamed
        for node in model.graph.node:
            node.metadata_props.add(key="k", value=node.name)
            node.doc_string = "tagged"
        model.graph.initializer[0].name = "renamed_weight"
        model.graph.node[0].input[1] = "renamed_weight"
        model.graph.node[0].name = "renamed_matmul"
    save_graph(graph, source, target)
    written = onnx.load(str(target))
    assert written == original  # the edits, and the weights' bytes as they were
    onnx.checker.check_model(str(target), full_check=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64, np.int32, np.uint8, np.int8, np.bool_])
def test_a_stub_is_read_as_the_array_it_was_writable(tmp_path, dtype):
    """Read straight from the file into the array's buffer: every element kind as numpy_helper reads it."""
    value = (np.arange(4096).reshape(64, 64) % 7).astype(dtype)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(value.dtype), [64, 64])],
                              initializer=[numpy_helper.from_array(value, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path / "m.onnx"))
    stub = load_graph(tmp_path / "m.onnx").graph.initializer[0]
    assert stub.data_location == TensorProto.EXTERNAL
    read = tensor_value(stub, tmp_path)
    assert read.dtype == value.dtype and read.shape == value.shape and np.array_equal(read, value)
    read[0, 0] = read[0, 1]  # as numpy_helper's arrays are


def test_the_stub_graph_is_checked_against_the_weights_in_the_file(tmp_path):
    source = tmp_path / "m.onnx"
    _model_with_weights(source)
    graph = load_graph(source)
    check_graph(graph, source)
    graph.graph.node[1].input[0] = "missing"
    with pytest.raises(onnx.checker.ValidationError, match="missing"):
        check_graph(graph, source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # the stub it checked is gone


def test_a_different_set_of_initializers_is_refused(tmp_path):
    source = tmp_path / "m.onnx"
    _model_with_weights(source)
    graph = load_graph(source)
    del graph.graph.initializer[0]
    with pytest.raises(ValueError, match="2 initializers"):
        save_graph(graph, source, tmp_path / "out.onnx")


def test_initializers_streamed_inline_equal_those_onnx_save_writes(tmp_path):
    expected = _model_with_weights(tmp_path / "m.onnx")
    graph_only = onnx.ModelProto()
    graph_only.CopyFrom(expected)
    graph_only.graph.ClearField("initializer")
    streamed = []
    for tensor in expected.graph.initializer:
        array = numpy_helper.to_array(tensor)
        header = TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        streamed.append(StreamedTensor(header, array.nbytes, lambda out, a=array: out.write(a.tobytes())))
    save_with_initializers(graph_only, streamed, tmp_path / "streamed.onnx")
    written = onnx.load(str(tmp_path / "streamed.onnx"))
    assert written == expected


def test_a_model_held_as_the_bytes_an_exporter_hands_over_is_edited_and_written_once_byte_for_byte(tmp_path):
    original = _model_with_weights(tmp_path / "m.onnx", subgraph=True)
    original.graph.initializer.append(numpy_helper.from_array(np.arange(300, dtype=np.int64), "steps"))
    original.graph.initializer[-1].ClearField("raw_data")
    original.graph.initializer[-1].int64_data.extend(range(300))  # not raw bytes: stays with its header
    serialized = original.SerializeToString()
    streamed = streamed_from_bytes(serialized)
    weight, bias, steps = streamed.model.graph.initializer
    assert list(weight.dims) == [64, 64] and not weight.raw_data and not weight.external_data  # left in the bytes
    assert numpy_helper.to_array(bias).shape == (64,) and list(steps.int64_data) == list(range(300))
    assert [size for size, _ in streamed.data] == [64 * 64 * 4, 0, 0]

    streamed.write(tmp_path / "same.onnx")
    assert onnx.load(str(tmp_path / "same.onnx")) == onnx.load_from_string(serialized)  # untouched: the exporter's model
    edited = streamed_from_bytes(serialized)
    for model in (edited.model, original):  # tags, and a weight renamed
        model.graph.node[0].metadata_props.add(key="k", value="v")
        model.graph.initializer[0].name = "renamed_weight"
        model.graph.node[0].input[1] = "renamed_weight"
    edited.write(tmp_path / "edited.onnx")
    assert onnx.load(str(tmp_path / "edited.onnx")) == original


def test_a_runtime_given_the_stub_file_computes_what_the_full_model_computes(tmp_path):
    """``stub_file``: the weightless graph beside its source is a complete model for onnxruntime, inline or external."""
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    for external in (False, True):
        source = tmp_path / f"m{int(external)}.onnx"
        model = _model_with_weights(source)
        if external:  # weights in a data file beside the model, as models over 2 GB have them
            onnx.save(model, str(source), save_as_external_data=True, location=f"{source.name}.data")
        expected = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
        graph = load_graph(source)
        assert graph.ByteSize() < 4096  # the 16 KB weight stayed in the file
        with stub_file(graph, source, "probe") as stub:
            got = ort.InferenceSession(str(stub)).run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, expected)
        assert not stub.exists()
        weight = numpy_helper.to_array(model.graph.initializer[0]) if not external else np.arange(4096).reshape(64, 64)
        np.testing.assert_array_equal(tensor_value(graph.graph.initializer[0], tmp_path), weight.astype(np.float32))

"""htp's filling of unmatched nodes, on graphs of a few nodes with their recorded calls given."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelexport_htp.fill import tag_nodes
from modelexport_htp.project import Projection
from modelexport_htp.trace import OpRecord, Trace

pytestmark = pytest.mark.unit


def _graph(merged_first: bool) -> onnx.ModelProto:
    """Two layers each adding one value the exporter merged (``m``: computed once, read by both layers);
    ``merged_first``: written before the first layer's nodes, else amid them."""
    merged = helper.make_node("Neg", ["x"], ["m"], name="merged")
    first_layer = [helper.make_node("Relu", ["x"], ["a0"], name="a0"),
                   helper.make_node("Add", ["a0", "m"], ["a1"], name="a1")]
    second_layer = [helper.make_node("Relu", ["a1"], ["b0"], name="b0"),
                    helper.make_node("Add", ["b0", "m"], ["b1"], name="b1")]
    nodes = [merged, *first_layer, *second_layer] if merged_first else [first_layer[0], merged, first_layer[1],
                                                                        *second_layer]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("b1", TensorProto.FLOAT, [4, 4])
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))


def _tags(merged_first: bool) -> tuple[dict[str, str], dict[str, str]]:
    model = _graph(merged_first)
    records = [OpRecord(0, "input:x", (), (), ())]
    records += [OpRecord(i, op, (layer,), (i - 1,), ()) for i, (op, layer) in
                enumerate([("relu", "layers.0"), ("add", "layers.0"), ("relu", "layers.1"), ("add", "layers.1")], 1)]
    trace = Trace(records=records, execution_trace=["", "layers.0", "layers.1"], param_owners={}, param_values={})
    position = {node.name: i for i, node in enumerate(model.graph.node)}
    projection = Projection(matched={position["a0"]: 1, position["a1"]: 2, position["b0"]: 3, position["b1"]: 4})
    values = {name: np.ones((4, 4), np.float32) for name in ("x", "m", "a0", "a1", "b0", "b1")}  # not small
    modules, _, how = tag_nodes(model, projection, trace, values, exporter="dynamo")
    return modules, how


def test_a_merged_value_written_amid_one_call_ran_in_that_call() -> None:
    modules, how = _tags(merged_first=False)
    assert modules["merged"] == "layers.0" and how["merged"] == "running call"
    assert modules["a1"] == "layers.0" and modules["b1"] == "layers.1"


def test_a_merged_value_written_before_the_calls_reading_it_stays_with_their_caller() -> None:
    modules, how = _tags(merged_first=True)
    assert modules["merged"] == "" and how["merged"] == "common consumer"


def _pooled_constant_tags(exporter: str, written_before_root_op: bool) -> tuple[dict[str, str], dict[str, str]]:
    """A constant read only by a layer's node, written at the top of the graph before a node of the root (the
    TorchScript exporter made it for a root operation, since removed, and pooled the layer's equal constant
    into it); ``written_before_root_op`` False: written just before its reader."""
    two = helper.make_tensor("v", TensorProto.FLOAT, [], [2.0])
    const = helper.make_node("Constant", [], ["c"], name="c", value=two)
    root_op = helper.make_node("Shape", ["x"], ["s"], name="s")
    layer = [helper.make_node("Relu", ["x"], ["a0"], name="a0"),
             helper.make_node("Mul", ["a0", "c"], ["m"], name="m"),
             helper.make_node("Relu", ["m"], ["a1"], name="a1")]
    nodes = [const, root_op, *layer] if written_before_root_op else [root_op, layer[0], const, *layer[1:]]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    outputs = [helper.make_tensor_value_info("a1", TensorProto.FLOAT, [4, 4]),
               helper.make_tensor_value_info("s", TensorProto.INT64, [2])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], outputs))
    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "shape", (), (0,), (), shape_read=True),
               OpRecord(2, "relu", ("layers.0",), (0,), ()), OpRecord(3, "mul", ("layers.0",), (2,), ()),
               OpRecord(4, "relu", ("layers.0",), (3,), ())]
    trace = Trace(records=records, execution_trace=["", "layers.0"], param_owners={}, param_values={})
    position = {node.name: i for i, node in enumerate(model.graph.node)}
    projection = Projection(matched={position["s"]: 1, position["a0"]: 2, position["a1"]: 4})
    values = {name: np.ones((4, 4), np.float32) for name in ("x", "a0", "m", "a1")}
    values.update(s=np.array([4, 4]), c=np.array(2.0, np.float32))
    modules, _, how = tag_nodes(model, projection, trace, values, exporter=exporter)
    return modules, how


def test_a_constant_written_before_a_node_of_its_readers_caller_was_made_there() -> None:
    modules, how = _pooled_constant_tags("torchscript", written_before_root_op=True)
    assert modules["c"] == "" and how["c"] == "written before"
    assert modules["m"] == modules["a1"] == "layers.0"


@pytest.mark.parametrize("exporter, written_before_root_op", [("torchscript", False), ("dynamo", True)])
def test_a_constant_written_beside_its_reader_or_by_dynamo_goes_with_its_reader(
    exporter: str, written_before_root_op: bool,
) -> None:
    modules, how = _pooled_constant_tags(exporter, written_before_root_op)
    assert modules["c"] == "layers.0" and how["c"] == "consumer"


def _earlier_call_constant_tags(earlier: str, later: str) -> tuple[dict[str, str], dict[str, str]]:
    """A constant read only by a node of ``later``'s call, written before a node of ``earlier``'s call, which ran
    first (the TorchScript exporter made it for an operation of ``earlier``'s, since folded, and pooled
    ``later``'s equal constant into it)."""
    two = helper.make_tensor("v", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Constant", [], ["c"], name="c", value=two),
             helper.make_node("Relu", ["x"], ["e"], name="e"),
             helper.make_node("Relu", ["e"], ["a0"], name="a0"),
             helper.make_node("Mul", ["a0", "c"], ["m"], name="m"),
             helper.make_node("Relu", ["m"], ["a1"], name="a1")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info(
        "a1", TensorProto.FLOAT, [4, 4])]))
    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "relu", (earlier,), (0,), ()),
               OpRecord(2, "relu", (later,), (1,), ()), OpRecord(3, "mul", (later,), (2,), ()),
               OpRecord(4, "relu", (later,), (3,), ())]
    trace = Trace(records=records, execution_trace=["", earlier, later], param_owners={}, param_values={})
    position = {node.name: i for i, node in enumerate(model.graph.node)}
    projection = Projection(matched={position["e"]: 1, position["a0"]: 2, position["a1"]: 4})
    values = {name: np.ones((4, 4), np.float32) for name in ("x", "e", "a0", "m", "a1")}
    values.update(c=np.array(2.0, np.float32))
    modules, _, how = tag_nodes(model, projection, trace, values, exporter="torchscript")
    return modules, how


def test_a_constant_written_before_a_node_of_an_earlier_call_was_made_there() -> None:
    modules, how = _earlier_call_constant_tags("embeddings", "encoder.layers.0.attention")
    assert modules["c"] == "embeddings" and how["c"] == "written before"
    assert modules["m"] == "encoder.layers.0.attention"


def test_a_constant_written_before_a_node_of_the_previous_layer_stays_with_its_reader() -> None:
    """The same between two layers of one list: the next layer's own constant may have been pooled into one the
    first layer made, and a tag in a sibling layer is the defect tags exist to end."""
    modules, how = _earlier_call_constant_tags("layers.0", "layers.1")
    assert modules["c"] == "layers.1" and how["c"] == "consumer"


def _handed_over_tags(mask_before_call: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The root computes a mask (``mask``) and hands it to ``layers.0``, whose first call the exporter split in two
    (``piece``, then ``a0``); ``mask_before_call``: written before ``a0``, as it ran, else amid the layer's nodes."""
    root = helper.make_node("Relu", ["x"], ["r"], name="r")
    mask = helper.make_node("Neg", ["r"], ["k"], name="mask")
    piece = helper.make_node("Sigmoid", ["r"], ["p"], name="piece")
    layer = [helper.make_node("Mul", ["p", "r"], ["a0"], name="a0"),
             helper.make_node("Add", ["a0", "k"], ["m"], name="m"),
             helper.make_node("Relu", ["m"], ["a1"], name="a1")]
    nodes = [root, mask, piece, *layer] if mask_before_call else [root, piece, layer[0], mask, *layer[1:]]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("a1", TensorProto.FLOAT, [4, 4])]))
    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "relu", (), (0,), ()),
               OpRecord(2, "mul", ("layers.0",), (1,), ()), OpRecord(3, "add", ("layers.0",), (2,), ()),
               OpRecord(4, "relu", ("layers.0",), (3,), ())]
    trace = Trace(records=records, execution_trace=["", "layers.0"], param_owners={}, param_values={})
    position = {node.name: i for i, node in enumerate(model.graph.node)}
    projection = Projection(matched={position["r"]: 1, position["a0"]: 2, position["m"]: 3, position["a1"]: 4})
    values = {name: np.ones((4, 4), np.float32) for name in ("x", "r", "k", "p", "a0", "m", "a1")}
    modules, _, how = tag_nodes(model, projection, trace, values)
    return modules, how


def test_a_tensor_written_before_the_first_call_of_the_module_it_serves_was_made_by_the_caller() -> None:
    modules, how = _handed_over_tags(mask_before_call=True)
    assert modules["mask"] == "" and how["mask"] == "before the call"
    # the exporter's first piece of the layer's first call is written before it too, and is the layer's
    assert modules["piece"] == "layers.0" and how["piece"] == "consumer"


def test_a_tensor_written_inside_the_call_it_serves_is_that_modules() -> None:
    modules, how = _handed_over_tags(mask_before_call=False)
    assert modules["mask"] == "layers.0" and how["mask"] == "consumer"


def _handed_zeros_tags(caller_made_them: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The root makes a tensor of zeros (``zeros``: a factory no node was matched to) and hands it to ``layers.0``,
    whose first call (``x != 1``) the exporter split into ``equal`` and ``a0``; ``caller_made_them`` False: the
    layer made the zeros itself (the call took nothing)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="s"),
             helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros"),
             helper.make_node("Constant", [], ["one"], name="one", value=helper.make_tensor("v", TensorProto.INT64, [], [1])),
             helper.make_node("Equal", ["z", "one"], ["e"], name="equal"),
             helper.make_node("Not", ["e"], ["a0"], name="a0"),
             helper.make_node("Cast", ["a0"], ["a1"], name="a1", to=TensorProto.INT64)]
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [4, 4])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("a1", TensorProto.INT64, [4, 4])]))
    zeros, mask = np.zeros((4, 4), np.int64), np.ones((4, 4), bool)
    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "size", (), (0,), (), [np.array([4, 4])], shape_read=True),
               OpRecord(2, "zeros", ("layers.0",) if not caller_made_them else (), (), (), [zeros]),
               OpRecord(3, "ne", ("layers.0",), (2,) if caller_made_them else (), (), [mask]),
               OpRecord(4, "int", ("layers.0",), (3,), (), [mask.astype(np.int64)])]
    trace = Trace(records=records, execution_trace=["", "layers.0"], param_owners={}, param_values={})
    position = {node.name: i for i, node in enumerate(model.graph.node)}
    projection = Projection(matched={position["s"]: 1, position["a0"]: 3, position["a1"]: 4})
    values = {"x": np.ones((4, 4), np.int64), "s": np.array([4, 4]), "z": zeros, "one": np.array(1), "e": ~mask,
              "a0": mask, "a1": mask.astype(np.int64)}
    modules, _, how = tag_nodes(model, projection, trace, values)
    return modules, how


def test_a_value_the_first_call_took_is_no_piece_of_it() -> None:
    modules, how = _handed_zeros_tags(caller_made_them=True)
    assert modules["zeros"] == "" and how["zeros"] == "before the call"
    # the mask of falses the exporter wrote for ``!=`` equals the zeros but is no tensor of integers: a piece
    assert modules["equal"] == "layers.0" and how["equal"] == "consumer"


def test_a_node_feeding_the_first_call_that_took_nothing_is_a_piece_of_it() -> None:
    modules, how = _handed_zeros_tags(caller_made_them=False)
    assert modules["zeros"] == "layers.0" and how["zeros"] == "consumer"


def test_a_node_matched_to_a_factory_is_no_known_place() -> None:
    from modelexport_htp.fill import known_places

    nodes = [helper.make_node("Range", ["s", "e", "d"], ["r"], name="range"), helper.make_node("Neg", ["r"], ["n"], name="neg"),
             helper.make_node("Abs", ["n"], ["a"], name="abs")]
    ints = [helper.make_tensor_value_info(name, TensorProto.INT64, []) for name in "sed"]
    graph = helper.make_graph(nodes, "g", ints, [helper.make_tensor_value_info("a", TensorProto.INT64, [4])])
    records = [OpRecord(0, "arange", ("decoder",), (), ()), OpRecord(1, "neg", ("encoder",), (0,), ())]
    trace = Trace(records=records, execution_trace=["", "encoder", "decoder"], param_owners={}, param_values={})
    how = {"range": "matched", "neg": "matched", "abs": "consumer"}
    # the arange was matched by time alone (it read no tensor): no evidence for the order checks; nor is a reader's tag
    assert known_places(graph, Projection(matched={0: 0, 1: 1}), trace, how) == ["neg"]


def test_an_unmatched_node_reading_a_weight_ran_where_that_weight_was_read() -> None:
    """A lookup of a zero row matches no value: its tag is the module whose calls read the weight it reads (the
    table's own module), before its reader's (the caller's concatenation); not where the weight's values are
    another parameter's too."""
    from modelexport_htp.fill import tag_nodes

    nodes = [helper.make_node("Gather", ["table", "ids"], ["looked"], name="lookup"),
             helper.make_node("Concat", ["looked", "x"], ["joined"], name="join", axis=-1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2]),
                     helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("joined", TensorProto.FLOAT, [2, 6])],
        [numpy_helper.from_array(np.zeros((4, 3), dtype=np.float32), "table")])
    model = helper.make_model(graph)
    records = [OpRecord(0, "input:ids", (), (), ()), OpRecord(1, "input:x", (), (), ()),
               OpRecord(2, "embedding", ("embed", "embed.shapes"), (0,), ("embed.shapes.weight",)),
               OpRecord(3, "cat", ("embed",), (2, 1), ())]
    trace = Trace(records=records, execution_trace=["", "embed", "embed.shapes"],
                  param_owners={"embed.shapes.weight": "embed.shapes"}, param_values={})
    values = {"looked": np.zeros((2, 3), dtype=np.float32), "joined": np.zeros((2, 6), dtype=np.float32)}
    one = Projection(matched={1: 3}, initializer_params={"table": frozenset({"embed.shapes.weight"})})
    tags, _, how = tag_nodes(model, one, trace, values, "torchscript")
    assert tags["lookup"] == "embed.shapes" and how["lookup"] == "parameter owner"
    two = Projection(matched={1: 3}, initializer_params={"table": frozenset({"embed.shapes.weight", "other.weight"})})
    assert tag_nodes(model, two, trace, values, "torchscript")[0]["lookup"] == "embed"


def test_a_value_its_readers_calls_read_from_their_callers_caller_was_handed_in() -> None:
    """A mask of zeros matches no value, and only two layers' nodes read it: made by the root and handed to the
    encoder, it is the root's, not the encoder's (the common module of its readers); where no recorded call read
    such a value in both layers, it stays with the common module."""
    from modelexport_htp.fill import tag_nodes

    nodes = [helper.make_node("Expand", ["zero", "shape"], ["mask"], name="mask"),
             helper.make_node("Add", ["x", "mask"], ["a"], name="layer0_add"),
             helper.make_node("Add", ["a", "mask"], ["b"], name="layer1_add")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(np.zeros((1,), dtype=np.float32), "zero"),
         numpy_helper.from_array(np.array([3, 4]), "shape")])
    model = helper.make_model(graph)
    zeros, x = np.zeros((3, 4), dtype=np.float32), np.arange(12.0, dtype=np.float32).reshape(3, 4)
    values = {"mask": zeros, "a": x, "b": x}

    def tags(read_in_both: bool) -> dict[str, str]:
        records = [OpRecord(0, "input:x", (), (), (), outputs=[x]), OpRecord(1, "full", (), (), (), outputs=[zeros]),
                   OpRecord(2, "add", ("encoder", "encoder.layers.0"), (0, 1), (), outputs=[x]),
                   OpRecord(3, "add", ("encoder", "encoder.layers.1"), (2, 1) if read_in_both else (2,), (),
                            outputs=[x])]
        trace = Trace(records=records, execution_trace=["", "encoder", "encoder.layers.0", "encoder.layers.1"],
                      param_owners={}, param_values={})
        projection = Projection(matched={})
        projection.matched.update({1: 2, 2: 3})
        return tag_nodes(model, projection, trace, values, "torchscript")[0]

    assert tags(read_in_both=True)["mask"] == ""
    assert tags(read_in_both=False)["mask"] == "encoder"


def _size_product_tags(apart: bool, reader: str) -> tuple[dict[str, str], dict[str, str]]:
    """A dynamo file: in ``block.router``, the product of a size with itself (``p``) is read by a Reshape of
    ``reader``; ``apart``: ``p`` is written amid the router's nodes (torch.export writes a size expression where it
    is first used: there, by a use that left no node), else right before its reader."""
    router = [helper.make_node("Relu", ["x"], ["r0"], name="r0"), helper.make_node("Shape", ["r0"], ["s"], name="s")]
    product = helper.make_node("Mul", ["s", "s"], ["p"], name="p")
    rest = [helper.make_node("Relu", ["r0"], ["r1"], name="r1"), helper.make_node("Reshape", ["r1", "p"], ["q"], name="q")]
    nodes = [*router, product, *rest] if apart else [*router, rest[0], product, rest[1]]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info(
        "q", TensorProto.FLOAT, [16])]))
    stack = ("block", "block.router")
    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "relu", stack, (0,), ()),
               OpRecord(2, "relu", stack, (1,), ()),
               OpRecord(3, "reshape", ("block", reader) if reader != "block" else ("block",), (2,), ())]
    trace = Trace(records=records, execution_trace=["", "block", "block.router", *([reader] if reader != "block" else [])],
                  param_owners={}, param_values={})
    position = {node.name: i for i, node in enumerate(model.graph.node)}
    projection = Projection(matched={position["r0"]: 1, position["r1"]: 2, position["q"]: 3})
    values = {name: np.ones((4, 4), np.float32) for name in ("x", "r0", "r1")}
    values.update(s=np.array([4, 4]), p=np.array([16, 16]), q=np.ones(16, np.float32))
    modules, _, how = tag_nodes(model, projection, trace, values, exporter="dynamo")
    return modules, how


def test_a_size_product_written_before_the_call_reading_it_ran_in_the_call_running_there() -> None:
    modules, how = _size_product_tags(apart=True, reader="block")
    assert modules["p"] == "block.router" and how["p"] == "running call"
    assert modules["q"] == "block"


def test_a_size_product_written_beside_its_reader_is_a_piece_of_it() -> None:
    """Written right before its reader, after the router's last node: the reader's split-off size piece."""
    modules, how = _size_product_tags(apart=False, reader="block.inner")
    assert modules["p"] == "block.inner" and how["p"] == "consumer"

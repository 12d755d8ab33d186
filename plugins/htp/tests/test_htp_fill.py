"""htp's filling of unmatched nodes, on graphs of a few nodes with their recorded calls given."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

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

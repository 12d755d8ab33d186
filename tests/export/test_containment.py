"""The call-containment invariant htp and usage_based hold before they write (``modelexport_core.export.containment``)."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from modelexport_core.export.containment import hold_call_containment

pytestmark = pytest.mark.unit  # the fast tier, run first

RAN = {"layer.0", "layer.0.mlp", "layer.0.mlp.fc", "layer.1", "shared", "shared.fc", "head"}


def _chain(length: int):
    """x -> n0 -> n1 -> ... : each node reads the one before it."""
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"], name=f"n{i}") for i in range(length)]
    return helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                             [helper.make_tensor_value_info(f"v{length - 1}", TensorProto.FLOAT, [1])])


def test_a_node_between_two_parts_of_one_call_is_put_inside_it():
    graph = _chain(4)
    held = hold_call_containment(graph, {"n0": "layer.0", "n1": "layer.0.mlp", "n2": "layer.1", "n3": "layer.0.mlp"}, [], RAN)
    # n2 read layer.0.mlp's value and was read inside layer.0.mlp: it ran in layer.0.mlp's call, not layer.1's
    assert held.node_modules["n2"] == "layer.0.mlp" and held.moved == {"n2": "layer.1"}


def test_a_deeper_module_of_the_call_and_the_ends_of_the_graph_are_kept():
    graph = _chain(4)
    tags = {"n0": "layer.1", "n1": "layer.0.mlp.fc", "n2": "layer.0", "n3": "layer.0"}
    held = hold_call_containment(graph, tags, [], RAN)
    assert held.node_modules == tags and held.moved == {}  # n1 is inside layer.0; n0 and n3 have one side only


def test_calls_of_a_reused_module_are_not_told_apart():
    graph = _chain(3)
    tags = {"n0": "shared.fc", "n1": "head", "n2": "shared.fc"}
    assert hold_call_containment(graph, tags, ["shared"], RAN).moved == {}
    assert hold_call_containment(graph, tags, [], RAN).node_modules["n1"] == "shared.fc"


def test_nodes_between_the_elements_of_a_container_are_left_to_the_caller():
    graph = _chain(3)
    # blocks is a list of layers: it never runs, so the root's work between blocks.0 and blocks.1 stays the root's
    tags = {"n0": "blocks.0", "n1": "", "n2": "blocks.1"}
    assert hold_call_containment(graph, tags, [], {"blocks.0", "blocks.1"}).moved == {}


def test_a_node_feeding_an_earlier_sibling_moves_to_its_first_reader():
    from modelexport_core.export.containment import hold_causality

    graph = _chain(3)
    order = {"": 0, "layer": 1, "layer.0": 2, "layer.0.mlp": 3, "layer.1": 4}
    # n0 and n1 were matched to layer.1 but feed layer.0, which ran before layer.1 began: impossible
    tags = {"n0": "layer.1", "n1": "layer.1", "n2": "layer.0.mlp"}
    held = hold_causality(graph, tags, order, [], anchored=["n2"])
    assert held.node_modules == {"n0": "layer.0.mlp", "n1": "layer.0.mlp", "n2": "layer.0.mlp"}
    assert held.moved == {"n0": "layer.1", "n1": "layer.1"}
    # a reader whose module was itself inferred is no evidence: one wrong guess is not spread upstream
    assert hold_causality(graph, tags, order, [], anchored=[]).moved == {}
    # the other way round is the normal flow (an earlier layer feeds a later one), and nesting is no order
    assert hold_causality(graph, {"n0": "layer.0", "n1": "layer.1", "n2": "layer"}, order, [], ["n1", "n2"]).moved == {}
    # calls of a module run more than once cannot be ordered, nor can a reader inside one (a shared activation)
    tags = {"n0": "layer.1", "n1": "layer.0", "n2": "layer.0"}
    assert hold_causality(graph, tags, order, ["layer.1"], ["n1", "n2"]).moved == {}
    tags = {"n0": "layer.1", "n1": "layer.0.mlp", "n2": "layer.0.mlp"}
    assert hold_causality(graph, tags, order, ["layer.0.mlp"], ["n1", "n2"]).moved == {}


def test_a_node_reading_a_later_siblings_value_moves_to_that_sibling():
    from modelexport_core.export.containment import hold_causality

    order = {"": 0, "layer": 1, "layer.0": 2, "layer.0.mlp": 3, "layer.1": 4}
    # c -> n1 <- n0 ; n1 -> n2 -> n3: layer.1 reads its own size (n0), the rest of a computation every layer repeats
    # with the same numbers (n1, n2, and the constant c) was given layer.0, whose call had ended before layer.1's began
    nodes = [
        helper.make_node("Shape", ["x"], ["v0"], name="n0"),
        helper.make_node("Constant", [], ["c0"], name="c", value=helper.make_tensor("t", TensorProto.INT64, [1], [2])),
        helper.make_node("Mul", ["v0", "c0"], ["v1"], name="n1"),
        helper.make_node("Relu", ["v1"], ["v2"], name="n2"),
        helper.make_node("Relu", ["v2"], ["v3"], name="n3"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("v3", TensorProto.FLOAT, [1])])
    tags = {"n0": "layer.1", "c": "layer.0", "n1": "layer.0", "n2": "layer.0.mlp", "n3": "layer.1"}
    held = hold_causality(graph, tags, order, [], anchored=["n0", "n2", "n3"])
    # n1 reads layer.1's value: it ran in layer.1; so did n2, which reads n1; the constant goes with its reader
    assert held.node_modules == dict.fromkeys(tags, "layer.1")
    assert held.moved == {"n1": "layer.0", "n2": "layer.0.mlp", "c": "layer.0"}
    # a producer whose module was itself inferred is no evidence, and a module run twice has no one place in time
    assert hold_causality(graph, tags, order, [], anchored=["n2", "n3"]).moved == {}
    assert hold_causality(graph, tags, order, ["layer.1"], anchored=["n0", "n2", "n3"]).moved == {}
    # reading an earlier sibling's value is the normal flow
    tags = {"n0": "layer.0", "c": "layer.1", "n1": "layer.1", "n2": "layer.1", "n3": "layer.1"}
    assert hold_causality(graph, tags, order, [], anchored=["n0", "n2", "n3"]).moved == {}


def test_a_node_moved_for_its_maker_moves_no_reader_holding_a_maker_of_its_own_module():
    from modelexport_core.export.containment import hold_causality

    order = {"": 0, "encoder": 1, "decoder": 2}
    # n0 (positions both stacks compute alike, merged by the exporter) was matched to the decoder's equal call;
    # n1 reads it and moves there. n2 reads n1 and also the encoder's own value (a, known): the two makers
    # disagree, n1's module is only derived from n0, and n2 stays, so does n3 after it (no cascade through
    # the encoder)
    nodes = [
        helper.make_node("Relu", ["x"], ["v0"], name="n0"),
        helper.make_node("Relu", ["v0"], ["v1"], name="n1"),
        helper.make_node("Relu", ["x"], ["va"], name="a"),
        helper.make_node("Add", ["v1", "va"], ["v2"], name="n2"),
        helper.make_node("Relu", ["v2"], ["v3"], name="n3"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("v3", TensorProto.FLOAT, [1])])
    tags = {"n0": "decoder", "n1": "encoder", "a": "encoder", "n2": "encoder", "n3": "encoder"}
    held = hold_causality(graph, tags, order, [], anchored=["n0", "a"])
    assert held.moved == {"n1": "encoder"} and held.node_modules["n2"] == "encoder"
    # without a maker of its own module, the moved node's reader follows it, and so on (the rest of a computation
    # every layer repeats, fed by the later layer's sizes)
    held = hold_causality(graph, tags, order, [], anchored=["n0"])
    assert held.node_modules["n2"] == held.node_modules["n3"] == "decoder"


def test_a_node_computed_from_a_later_calls_value_through_its_caller_moves_to_the_caller():
    from modelexport_core.export.containment import hold_lineage

    order = {"": 0, "block": 1, "block.mixer": 2, "block.ffn": 3, "block.ffn.fc2": 4}
    # x -> n0 (the mixer's result); x -> n1 (fc2) -> n2 (the block scales it) ; n3 = n0 + n2 ; n4 = n3 * c
    nodes = [
        helper.make_node("Relu", ["x"], ["v0"], name="n0"),
        helper.make_node("Relu", ["x"], ["v1"], name="n1"),
        helper.make_node("Neg", ["v1"], ["v2"], name="n2"),
        helper.make_node("Add", ["v0", "v2"], ["v3"], name="n3"),
        helper.make_node("Constant", [], ["c0"], name="c", value=helper.make_tensor("t", TensorProto.FLOAT, [1], [2.0])),
        helper.make_node("Mul", ["v3", "c0"], ["v4"], name="n4"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("v4", TensorProto.FLOAT, [1])])
    tags = {"n0": "block.mixer", "n1": "block.ffn.fc2", "n2": "block", "n3": "block.mixer", "c": "block.mixer",
            "n4": "block.mixer"}
    held = hold_lineage(graph, tags, order, [], anchored=["n0", "n1", "n2"])
    # n3 reads the block's n2, which read fc2's value: made after the mixer's call had ended, in the block
    assert held.node_modules == {**tags, "n3": "block", "n4": "block", "c": "block"}
    assert set(held.moved) == {"n3", "n4", "c"}
    # a direct maker alone would not tell: n2 is the block's own, which encloses the mixer
    from modelexport_core.export.containment import hold_causality

    assert hold_causality(graph, tags, order, [], anchored=["n0", "n1", "n2"]).moved == {}
    # without a known maker there is no time to go by; a module called more than once has no one place in time
    assert hold_lineage(graph, tags, order, [], anchored=["n0"]).moved == {}
    assert hold_lineage(graph, tags, order, ["block.ffn"], anchored=["n0", "n1", "n2"]).moved == {}


def test_a_node_made_of_weights_alone_tells_no_time():
    from modelexport_core.export.containment import hold_lineage

    order = {"": 0, "a": 1, "b": 2}
    # w (a constant an exporter wrote once, matched to b) feeds n0 in a: it may have been computed anywhere
    nodes = [
        helper.make_node("Constant", [], ["w"], name="w", value=helper.make_tensor("t", TensorProto.FLOAT, [1], [2.0])),
        helper.make_node("Mul", ["x", "w"], ["v0"], name="n0"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])])
    assert hold_lineage(graph, {"w": "b", "n0": "a"}, order, [], anchored=["w"]).moved == {}

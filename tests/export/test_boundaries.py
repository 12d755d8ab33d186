"""Call boundaries (``modelexport_core.export.boundaries``) on a four-node graph built by hand, with its values
and the calls that ran: each call's region, the nodes a value runs on unchanged through, what is not settled,
and the tags moved in and out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelexport_core.export.boundaries import (
    Boundaries,
    CallRegion,
    Event,
    call_regions,
    constant_nodes,
    hold_boundaries,
    made_for_readers,
    weight_owners,
)

if TYPE_CHECKING:
    import torch

pytestmark = pytest.mark.unit


def _graph() -> tuple[onnx.GraphProto, dict[str, np.ndarray], np.ndarray]:
    """x -> Relu -> Add(zero) -> Tanh -> Mul(Constant 2): the Add changes no element."""
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], dtype=np.float32)
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Add", ["a", "zero"], ["a2"], name="add"),
        helper.make_node("Tanh", ["a2"], ["b"], name="tanh"),
        helper.make_node("Constant", [], ["two"], name="two", value=numpy_helper.from_array(np.float32(2.0))),
        helper.make_node("Mul", ["b", "two"], ["c"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.zeros(3, dtype=np.float32), "zero")],
    )
    a = np.maximum(x, 0)
    b = np.tanh(a)
    return graph, {"a": a, "a2": a.copy(), "b": b, "two": np.float32(2.0), "c": 2 * b}, x


def _events(values: dict[str, np.ndarray], x: np.ndarray, second_takes=("a", "first result")) -> list[Event]:
    """The root takes x; ``first`` takes x and returns a; ``second`` takes a value and returns b; the root returns c."""
    name, key = second_takes
    return [
        Event(True, "", (("x", x),)),
        Event(True, "first", (("x", x),)),
        Event(False, "first", (("first result", values["a"]),)),
        Event(True, "second", ((key, values[name]),)),
        Event(False, "second", (("second result", values["b"]),)),
        Event(False, "", (("root result", values["c"]),)),
    ]


def _handing_back(module: str, key: str, array: np.ndarray) -> list[Event]:
    """A call of ``module`` handing back the very tensor it took: it bounds nothing, but its caller made a call."""
    return [Event(True, module, ((key, array),)), Event(False, module, ((key, array),))]


def test_a_calls_region_runs_from_what_it_took_to_what_it_returned():
    graph, values, x = _graph()
    boundaries = call_regions(graph, values, _events(values, x), [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["first"].nodes == {0} and regions["second"].nodes == {2}
    assert regions[""].nodes == {0, 1, 2, 4}  # the constant is left to the other passes
    # the zero added changes nothing: the first call's result may end before or after it
    assert regions["first"].unsure == {1} and regions["second"].unsure == {1}
    assert boundaries.unbounded == set()


def test_tags_move_into_the_call_that_ran_them_and_out_of_calls_that_did_not():
    graph, values, x = _graph()
    boundaries = call_regions(graph, values, _events(values, x), [x])
    constant = constant_nodes(graph)
    tags = {0: "", 1: "", 2: "first", 3: "second", 4: "second"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    # Relu in; Tanh out of first and into second; Mul out of second, and the constant read by Mul alone with it
    assert moved == {0: "first", 2: "second", 4: "", 3: ""}


@pytest.mark.parametrize("taken", ["first result", "a copy"])
def test_a_new_tensor_no_call_returned_is_not_held_by_the_node_holding_an_earlier_result(taken):
    """second takes a tensor equal to a (first's result) and to a2 (a plus zero). Where it is the very tensor first
    returned, second took a, or a2 in its own code: the Add is unsure. Where it is a tensor no call returned, code
    made it after first returned, and a node holds one tensor: the Add made it, before second began."""
    graph, values, x = _graph()
    boundaries = call_regions(graph, values, _events(values, x, second_takes=("a2", taken)), [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["second"].nodes == {2}
    assert regions["second"].unsure == ({1} if taken == "first result" else set())
    constant = constant_nodes(graph)
    moved = hold_boundaries({0: "first", 1: "second", 2: "second", 3: "second", 4: "second"}, boundaries, constant,
                            made_for_readers(graph, constant))
    assert (1 in moved) == (taken == "a copy") and moved.get(1, "") == ""


def test_an_input_equal_to_two_unrelated_earlier_values_bounds_nothing_out():
    graph, values, x = _graph()
    graph.node.insert(0, helper.make_node("Relu", ["x"], ["a0"], name="relu_aside"))  # a second, unrelated a
    values["a0"] = values["a"].copy()
    boundaries = call_regions(graph, values, _events(values, x, second_takes=("a2", "a copy")), [x])
    assert "second" in boundaries.unbounded
    assert "second" not in boundaries.bounding
    constant = constant_nodes(graph)
    moved = hold_boundaries({0: "", 1: "first", 2: "", 3: "", 4: "second", 5: "second"}, boundaries, constant, {})
    assert 4 not in moved and 5 not in moved  # nothing proves the Mul ran outside second


def test_a_call_returning_what_it_took_is_not_bounded():
    graph, values, x = _graph()
    events = _events(values, x)
    events[4] = Event(False, "second", (("second result", values["a"].copy()),))  # returns a value equal to its input
    boundaries = call_regions(graph, values, events, [x])
    assert "second" in boundaries.unbounded  # its region pushes nothing out: it holds the one node making its result
    assert [region.nodes for region in boundaries.regions if region.module == "second"] == [{1}]


def _run(nodes: list[onnx.NodeProto], x: np.ndarray, weights: dict[str, np.ndarray] | None = None
         ) -> tuple[onnx.GraphProto, dict[str, np.ndarray]]:
    """A graph of ``nodes`` on the input x (of ``x``'s element type), and the value of every node output on ``x``."""
    from onnx.reference import ReferenceEvaluator

    outputs = [name for node in nodes for name in node.output]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None) for name in outputs],
        [numpy_helper.from_array(value, name) for name, value in (weights or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    found = ReferenceEvaluator(model).run(None, {"x": x})
    return graph, dict(zip(outputs, found))


X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], dtype=np.float32)


def ints(name: str, value: list[int] | int) -> onnx.NodeProto:
    """A Constant node writing ``value`` as int64 into ``name``."""
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=np.int64)))


def test_a_computation_the_caller_reads_too_is_left_where_it_is():
    """first computes tanh(x) and sin of it; the caller computes cos of tanh(x): the exporter merged the two tanh
    into one node, so the values cannot say whether first or its caller ran it."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Sin", ["t"], ["r1"]),
                          helper.make_node("Cos", ["t"], ["r2"])], X)
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("r1", values["r1"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 0 in boundaries.loose
    assert 0 not in hold_boundaries({0: "first", 1: "first", 2: ""}, boundaries, set(), {})


def test_a_size_the_caller_reads_before_a_call_reading_it_again_is_the_callers():
    """The caller computes a = relu(x) and reads its number of rows; first takes a and reshapes tanh(a) to that many
    columns, and the caller reshapes first's result back to that many rows. The exporter merged the two reads into one, written
    before anything first computed: a forward reads the sizes it needs as it begins, so the caller read it first."""
    graph, values = _run([
        helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Shape", ["a"], ["s"]), ints("first", [0]),
        helper.make_node("Gather", ["s", "first"], ["n"]), helper.make_node("Tanh", ["a"], ["t"]), ints("rest", [-1]),
        helper.make_node("Concat", ["rest", "n"], ["shape"], axis=0), helper.make_node("Reshape", ["t", "shape"], ["r"]),
        helper.make_node("Concat", ["n", "rest"], ["shape2"], axis=0),
        helper.make_node("Reshape", ["r", "shape2"], ["out"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "first", (("a", values["a"]),)),
              Event(False, "first", (("r", values["r"]),)), Event(False, "", (("out", values["out"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert {1, 3} <= boundaries.loose
    tagged = {0: "", 1: "first", 2: "first", 3: "first", 4: "first", 5: "first", 6: "first", 7: "first", 8: "",
              9: ""}
    moved = hold_boundaries(tagged, boundaries, constant_nodes(graph), {})
    assert moved.get(1) == "" and moved.get(3) == ""
    assert all(moved.get(i, "first") == "first" for i in (4, 6, 7))


def test_a_value_computed_from_weights_the_call_read_and_read_after_it_too_stays_in_the_call():
    """first multiplies x by its weights and returns tanh of the product; the caller reads the product as well (its
    own layout change cancelled one inside first, so the exporter hands it the value from before): no code before
    first made the product, so first ran it, as the tags say."""
    w = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0], [1.0, 2.0, 0.5]], dtype=np.float32)
    graph, values = _run([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Tanh", ["t"], ["r1"]),
                          helper.make_node("Cos", ["t"], ["r2"])], X, {"w": w})
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("r1", values["r1"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 0 not in boundaries.loose
    assert 0 not in hold_boundaries({0: "first", 1: "first", 2: ""}, boundaries, set(), {})


def test_an_input_handed_on_through_a_layout_and_back_is_the_first_of_its_run():
    """The caller makes a, lays it out otherwise and back (two transposes: a window partition of one window), and
    first takes the value and returns tanh of it: the value ran on unchanged from a, so first is bounded."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]),
                          helper.make_node("Transpose", ["a"], ["t1"], perm=[1, 0]),
                          helper.make_node("Transpose", ["t1"], ["t2"], perm=[1, 0]),
                          helper.make_node("Tanh", ["t2"], ["r"])], X)
    events = [Event(True, "first", (("t2", values["t2"]),)), Event(False, "first", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "first" not in boundaries.unbounded
    assert [region.nodes for region in boundaries.regions if region.module == "first"] == [{3}]


def _pooled(first: str, second: str) -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """first computes tanh(x), picks rows of it by an argmax and reshapes them by the index's size before
    returning them; second takes that very tensor and returns sin of it."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("ArgMax", ["h"], ["idx"], axis=0, keepdims=0),
        helper.make_node("Gather", ["h", "idx"], ["g"], axis=0),
        helper.make_node("Shape", ["idx"], ["s"]),
        helper.make_node("Constant", [], ["m"], value=numpy_helper.from_array(np.array([-1], dtype=np.int64))),
        helper.make_node("Concat", ["s", "m"], ["shape"], axis=0),
        helper.make_node("Reshape", ["g", "shape"], ["out"]),
        helper.make_node("Sin", ["out"], ["r"]),
    ], X)
    events = [Event(True, first, (("x", X),)), Event(False, first, (("out", values["out"]),)),
              Event(True, second, (("out", values["out"]),)), Event(False, second, (("r", values["r"]),))]
    return graph, events, values


def test_a_node_passing_a_result_on_shaped_by_sizes_of_what_the_call_made_ran_in_it():
    """The reshape passing pool's picked rows on reads the size of pool's index, which pool made and did not
    return: no later code reads it, so pool ran the reshape and the size arithmetic serving it, not the caller
    between the two calls."""
    graph, events, values = _pooled("pool", "project")
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "pool", 1: "pool", 2: "pool", 3: "", 4: "", 5: "", 6: "", 7: "project"}
    moved = hold_boundaries(tags, boundaries, set(), {})
    assert {i: moved.get(i) for i in (3, 4, 5, 6)} == {3: "pool", 4: "pool", 5: "pool", 6: "pool"}


def test_a_node_passing_a_layers_result_on_to_the_next_layer_is_not_put_in_it_by_sizes():
    """The same where the calls are two layers of one list: the next layer may have computed the size again (the
    exporter merges equal computations), so nothing puts the reshape in the first layer."""
    graph, events, values = _pooled("layers.0", "layers.1")
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "layers.0", 1: "layers.0", 2: "layers.0", 3: "layers.1", 4: "layers.1", 5: "layers.1",
            6: "layers.1", 7: "layers.1"}
    assert boundaries.shaped_within == {}
    moved = hold_boundaries(tags, boundaries, {4}, {})
    assert all(moved.get(i, tags[i]) != "layers.0" for i in (3, 5, 6))


def test_a_merged_computation_a_later_call_took_is_not_left_in_that_call():
    """probe computes tanh(x) and returns sin of it; the caller computes tanh(x) again and hands it to outer, which
    returns cos of it: the exporter merged the two tanh into one node, so whether probe or the caller ran it is
    not settled, but outer took its value, so outer began after it: a strategy's tag inside outer moves out."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Sin", ["t"], ["r1"]),
                          helper.make_node("Cos", ["t"], ["r2"])], X)
    events = [Event(True, "probe", (("x", X),)), Event(False, "probe", (("r1", values["r1"]),)),
              Event(True, "outer", (("t", values["t"]),)), Event(False, "outer", (("r2", values["r2"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 0 in boundaries.loose
    assert hold_boundaries({0: "outer", 1: "probe", 2: "outer"}, boundaries, set(), {}) == {0: ""}


def test_zeros_a_call_took_that_one_node_alone_holds_were_made_before_it():
    """The caller builds zeros of x's shape and hands them to embed with x (token types nobody gave): embed
    began once they existed, so the node making them, and the size it read, ran before it."""
    zeros = np.zeros_like(X)
    graph, values = _run([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["y"]),
        helper.make_node("Tanh", ["y"], ["r"]),
    ], X)
    events = [Event(True, "embed", (("x", X), ("z", zeros))), Event(False, "embed", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert {0, 1} <= boundaries.ran_before["embed"]


def test_size_arithmetic_a_call_reads_from_before_it_began_other_than_its_inputs_is_left_where_it_is():
    """second expands a weight to the size of tanh(x), read before it began, though it took only x: an exporter
    moved the size read up (merged with an equal one), so where it ran is not settled."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Shape", ["t"], ["s"]),
                          helper.make_node("Sin", ["t"], ["r1"]), helper.make_node("Expand", ["w", "s"], ["e"])],
                         X, {"w": np.array([1.0, 2.0, 3.0], dtype=np.float32)})
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("r1", values["r1"]),)),
              Event(True, "second", (("x", X),)), Event(False, "second", (("e", values["e"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 1 in boundaries.loose
    assert 1 not in hold_boundaries({0: "first", 1: "second", 2: "first", 3: "second"}, boundaries, set(), {})


def test_a_result_equal_to_two_unrelated_values_bounds_nothing():
    """relu(x), and max(x, 0 * x) computed apart (not a repeat of the first: another operator), equal to it."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Abs", ["x"], ["b"]),
                          helper.make_node("LeakyRelu", ["x"], ["c"], alpha=0.0)], X)
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("c", values["c"]),))]
    assert "first" in call_regions(graph, values, events, [X]).unbounded  # a or c: not settled


def test_of_equal_values_a_result_is_the_first_where_later_calls_returned_the_others():
    """first and then second return relu(x), each computed again (nodes 0 and 2): first's result is the first
    node equal to it, the other one being second's, which began after first ended (nodes are written in the order
    they ran). A call of one module on a value it already gave (a norm projecting onto the unit sphere) does so."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Abs", ["x"], ["b"]),
                          helper.make_node("Relu", ["x"], ["c"])], X)
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("a", values["a"]),)),
              Event(True, "second", (("x", X),)), Event(False, "second", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert not boundaries.unbounded
    assert regions["first"].nodes == {0} and regions["second"].nodes == {2}


def test_of_equal_values_a_result_is_the_first_where_the_others_were_computed_from_it():
    """second returns relu(x) + 1 (node 3); a later value computed from it, exp(log(it)) (node 5), equals it."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sin", ["x"], ["b"]),
                          helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.float32(1.0))),
                          helper.make_node("Add", ["a", "one"], ["c"]), helper.make_node("Log", ["c"], ["d"]),
                          helper.make_node("Exp", ["d"], ["e"])], X)
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("b", values["b"]),)),
              Event(True, "second", (("x", X),)), Event(False, "second", (("c", values["c"]),))]
    regions = {region.module: region for region in call_regions(graph, values, events, [X]).regions}
    assert regions["second"].nodes == {3}


def test_a_node_holding_an_earlier_calls_result_holds_no_later_calls_result():
    """first returns relu(x), passed on by a zero added (node 1); second returns a new tensor equal to it,
    computed from it (a branch scaled by a weight of zeros added, node 4): its result is node 4, not the node
    passing first's result on."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "zero"], ["a2"]),
                          helper.make_node("Sin", ["a2"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["z"]),
                          helper.make_node("Add", ["a2", "z"], ["c"])], X,
                         {"zero": np.zeros(3, dtype=np.float32), "scale": np.zeros(3, dtype=np.float32)})
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("a", values["a"]),)),
              Event(True, "second", (("x", X),)), Event(False, "second", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "second" not in boundaries.unbounded and 4 in regions["second"].nodes


def test_a_new_tensor_equal_to_a_result_of_a_call_it_made_is_made_by_the_first_node_computing_it_from_that():
    """outer calls inner (relu) and returns a new tensor equal to inner's result, computed after it (zeros made
    from x added, as a mask of ones multiplied in): outer's code made it from inner's result, so the first node
    computing it from that result, not passing it on, holds outer's result, and the caller's later equal
    computation (another zero added) is not outer's."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sub", ["x", "x"], ["z"]),
                          helper.make_node("Add", ["a", "z"], ["b"]), helper.make_node("Add", ["b", "z"], ["c"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "outer", (("x", X),)), Event(True, "outer.inner", (("x", X),)),
              Event(False, "outer.inner", (("a", values["a"]),)), Event(False, "outer", (("b", values["b"]),)),
              Event(False, "", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "outer" not in boundaries.unbounded
    assert [region.nodes for region in boundaries.regions if region.module == "outer"] == [{0, 1, 2}]


def test_a_tensor_a_folded_call_made_leaves_the_callers_equal_value_out_of_its_caller():
    """outer calls inner (relu), then norm, which returns a new tensor equal to what it took (a norm at its initial
    statistics the exporter folded: no node of its own), and returns that; the caller adds zeros made from x. The
    caller's add is the first node computing outer's value from inner's result, but norm made outer's result
    without a node: it is not outer's."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sub", ["x", "x"], ["z"]),
                          helper.make_node("Add", ["a", "z"], ["c"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "outer", (("x", X),)), Event(True, "outer.inner", (("x", X),)),
              Event(False, "outer.inner", (("a", values["a"]),)), Event(True, "outer.norm", (("a", values["a"]),)),
              Event(False, "outer.norm", (("b", values["a"].copy()),)), Event(False, "outer", (("b", values["a"]),)),
              Event(False, "", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert not any(2 in region.nodes for region in boundaries.regions if region.module == "outer")


def test_a_value_a_call_returned_as_it_took_it_stays_with_the_call_that_made_it():
    """A call returns what it took (a norm at its initial statistics, a block scaled near zero): the node that
    made the value is the maker's (an exporter fusing the norm into the layer before names the node after the
    layer); the nodes it runs on unchanged through after it may be the returning call's or its caller's (second
    made a call: which of its nodes or its caller's made the new tensor is not known)."""
    graph, values, x = _graph()
    events = _events(values, x)
    events[4:5] = [*_handing_back("second.inner", "first result", values["a"]),
                   Event(False, "second", (("second result", values["a"].copy()),))]
    boundaries = call_regions(graph, values, events, [x])
    assert 0 not in boundaries.unplaced and 1 in boundaries.unplaced
    constant = constant_nodes(graph)
    moved = hold_boundaries({0: "", 1: "", 2: "", 3: "", 4: ""}, boundaries, constant, {})
    assert moved[0] == "first" and 1 not in moved


def test_what_shaped_a_value_passed_on_unchanged_is_not_settled():
    """The call takes tanh(x), written on as a reshape to its own size (its Shape read, then the Reshape), which the
    caller reads too: the reshape, and the size read feeding it, may be the caller's or the call's."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Shape", ["t"], ["s"]),
                          helper.make_node("Reshape", ["t", "s"], ["v"]), helper.make_node("Sin", ["v"], ["r"]),
                          helper.make_node("Cos", ["v"], ["c"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "call", (("t", values["t"].copy()),)),
              Event(False, "call", (("r", values["r"]),)), Event(False, "", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert {1, 2} <= boundaries.unplaced  # pulled into no call, pushed out of neither
    assert hold_boundaries({0: "", 1: "call", 2: "call", 3: "call", 4: ""}, boundaries, set(), {}) == {}
    assert hold_boundaries({0: "", 1: "", 2: "", 3: "call", 4: ""}, boundaries, set(), {}) == {}


def test_a_value_a_call_took_cast_to_its_own_type_and_read_by_the_call_alone_was_cast_in_it():
    """The call takes tanh(x), cast to the type it has (recorded, though nothing changed) by a node only the
    call's Sin reads. Code casts a value where it computes with it (a norm computing in float32): the cast ran
    in the call. A reshape to its own size is not settled so (a caller reshapes what it hands over)."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Sin", ["v"], ["r"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "call", (("t", values["t"].copy()),)),
              Event(False, "call", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert not boundaries.unplaced
    assert hold_boundaries({0: "", 1: "call", 2: "call"}, boundaries, set(), {}) == {}
    assert hold_boundaries({0: "", 1: "", 2: "call"}, boundaries, set(), {}) == {1: "call"}
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Shape", ["t"], ["s"]),
                          helper.make_node("Reshape", ["t", "s"], ["v"]), helper.make_node("Sin", ["v"], ["r"])], X)
    boundaries = call_regions(graph, values, events, [X])
    assert {1, 2} <= boundaries.unplaced
    assert hold_boundaries({0: "", 1: "", 2: "", 3: "call"}, boundaries, set(), {}) == {}


def test_a_result_an_earlier_call_returned_cast_to_its_own_type_and_read_by_the_next_call_alone_was_cast_in_it():
    """act returns tanh(x); norm takes that very tensor, and a node only norm's Sin reads casts it to the type it
    has (a norm computing in float32). Whether act cast it as it returned it or norm as it took it, the graph
    and the values are the same: code casts a value where it computes with it, so norm ran the cast."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Sin", ["v"], ["r"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("t", values["t"]),)),
              Event(True, "norm", (("t", values["t"]),)), Event(False, "norm", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 1 not in boundaries.unplaced
    assert hold_boundaries({0: "act", 1: "act", 2: "norm"}, boundaries, set(), {}) == {1: "norm"}


def test_a_cast_of_a_returned_tensor_read_only_by_a_scale_of_ones_is_not_moved_into_the_next_call():
    """norm casts its value back to the type it has and scales it by a weight of ones: cast and scale pass its
    result on. proj takes that result; the cast's one reader passes the value on, so proj computes nothing with
    the cast, and the cast is not moved into proj."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Mul", ["ones", "v"], ["m"]), helper.make_node("Sin", ["m"], ["r"])],
                         X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "norm", (("x", X),)), Event(False, "norm", (("t", values["t"]),)),
              Event(True, "proj", (("t", values["t"]),)), Event(False, "proj", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "proj" not in hold_boundaries({0: "norm", 1: "norm", 2: "norm", 3: "proj"}, boundaries, set(), {}).values()


def test_a_cast_the_caller_reads_after_the_call_returned_was_cast_in_the_call():
    """act returns tanh(x); layer hands that tensor to norm, which casts it to the type it has and computes sin of
    it; layer then adds the cast to norm's result (a residual). A cast to the type it has returns the very tensor
    it was given, so a trace records the caller's later read of that tensor as a read of the cast: that read does
    not say the caller cast it. Norm ran the cast, and so did layer, which called norm."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Sin", ["v"], ["r"]), helper.make_node("Add", ["v", "r"], ["o"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("t", values["t"]),)),
              Event(True, "layer", (("t", values["t"]),)),
              Event(True, "layer.norm", (("t", values["t"]),)), Event(False, "layer.norm", (("r", values["r"]),)),
              Event(False, "layer", (("o", values["o"]),)), Event(False, "", (("o", values["o"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 1 not in boundaries.unplaced
    assert hold_boundaries({0: "act", 1: "layer", 2: "layer.norm", 3: "layer"}, boundaries, set(), {}) == {
        1: "layer.norm"}


def test_a_cast_of_a_returned_tensor_only_the_next_calls_children_compute_with_was_cast_as_it_was_returned():
    """act returns tanh(x), and a node casts it to the type it has; proj takes that tensor and reads the cast's
    sizes only, handing it to its child lin, which computes sin of it. proj computes nothing with the cast, and lin
    may have been handed what was cast before: code casts a value where it computes with it, so act, which
    computed it, cast it as it returned it (a norm casting its result back to the type it was given)."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Shape", ["v"], ["s"]), helper.make_node("Sin", ["v"], ["u"]),
                          helper.make_node("Reshape", ["u", "s"], ["w"]), helper.make_node("Cos", ["w"], ["r"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("t", values["t"]),)),
              Event(True, "proj", (("t", values["t"]),)), Event(True, "proj.lin", (("t", values["t"]),)),
              Event(False, "proj.lin", (("u", values["u"]),)), Event(False, "proj", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.cast_back == {1: "act"}
    tags = {0: "act", 1: "proj", 2: "proj", 3: "proj.lin", 4: "proj", 5: "proj"}
    assert hold_boundaries(tags, boundaries, set(), {}) == {1: "act"}


def test_a_call_casting_what_it_took_to_its_own_type_casts_its_result_back_as_it_returns_it():
    """norm casts the tensor act returned to the type it has and computes sin of it; a node casts norm's result to
    the type it has, and the caller adds it to what act returned. A call computing in a type of its choosing casts
    its result back to the type it was given as it returns it: norm ran that cast. Where norm casts nothing it
    took, the cast of its result is left to the caller."""
    def run(cast_taken: bool) -> dict[int, str]:
        first = helper.make_node("Cast", ["t"], ["v"], to=1) if cast_taken else helper.make_node("Sin", ["t"], ["v"])
        graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), first, helper.make_node("Sin", ["v"], ["r"]),
                              helper.make_node("Cast", ["r"], ["w"], to=1), helper.make_node("Add", ["w", "t"], ["o"])],
                             X)
        events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)),
                  Event(False, "act", (("t", values["t"]),)), Event(True, "norm", (("t", values["t"]),)),
                  Event(False, "norm", (("r", values["r"]),)), Event(False, "", (("o", values["o"]),))]
        boundaries = call_regions(graph, values, events, [X])
        return hold_boundaries({0: "act", 1: "norm", 2: "norm", 3: "", 4: ""}, boundaries, set(), {})

    assert run(cast_taken=True) == {3: "norm"}
    assert 3 not in run(cast_taken=False)


def test_the_cast_of_a_result_goes_to_a_call_computing_with_it_unless_another_call_was_handed_it_too():
    """norm casts what it took and returns sin of it; a node casts that result to the type it has. Where layer.ln
    takes the result and computes with the cast (read later only by its caller, layer, adding it back), ln cast it.
    Where mlp.gate and then mlp.up each compute with the cast, the later read lies in another call that may have
    been handed the tensor too: norm, computing in a type of its choosing, cast it back as it returned it."""
    def run(nodes: list[onnx.NodeProto], calls: list[tuple[str, str]], tags: dict[int, str]) -> dict[int, str]:
        graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                              helper.make_node("Sin", ["v"], ["k"]), helper.make_node("Cast", ["k"], ["c"], to=1),
                              *nodes], X)
        events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)),
                  Event(False, "act", (("t", values["t"]),)), Event(True, "norm", (("t", values["t"]),)),
                  Event(False, "norm", (("k", values["k"]),)), Event(True, calls[0][0], (("k", values["k"]),))]
        for module, result in calls[1:]:
            events += [Event(True, module, (("k", values["k"]),)), Event(False, module, ((result, values[result]),))]
        events += [Event(False, calls[0][0], ((calls[0][1], values[calls[0][1]]),)),
                   Event(False, "", ((calls[0][1], values[calls[0][1]]),))]
        boundaries = call_regions(graph, values, events, [X])
        return hold_boundaries({0: "act", 1: "norm", 2: "norm", **tags}, boundaries, set(), {})

    layer = [helper.make_node("Cos", ["c"], ["u"]), helper.make_node("Add", ["c", "u"], ["o"])]
    assert run(layer, [("layer", "o"), ("layer.ln", "u")], {3: "layer", 4: "layer.ln", 5: "layer"}) == {
        3: "layer.ln"}
    mlp = [helper.make_node("Cos", ["c"], ["g"]), helper.make_node("Sin", ["c"], ["u"]),
           helper.make_node("Mul", ["g", "u"], ["o"])]
    assert run(mlp, [("mlp", "o"), ("mlp.gate", "g"), ("mlp.up", "u")],
               {3: "mlp.gate", 4: "mlp.gate", 5: "mlp.up", 6: "mlp"}) == {3: "norm"}


def test_a_cast_a_call_made_claims_for_an_equal_tensor_of_its_own_leaves_the_returned_cast_to_its_maker():
    """norm casts what act returned, computes cos of it, casts that back and scales it by a weight of ones: it
    returns the scaled tensor. mixer takes that tensor; its child proj takes another tensor equal to it and computes
    sin of it. proj's nodes are the only readers of the cast, but proj took another tensor than norm returned: the
    cast of norm's result is norm's (a call computing in a type of its choosing casts its result back), neither
    proj's nor, through proj, mixer's."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Cos", ["v"], ["a"]), helper.make_node("Cast", ["a"], ["c"], to=1),
                          helper.make_node("Mul", ["c", "ones"], ["k"]), helper.make_node("Sin", ["k"], ["r"])],
                         X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("t", values["t"]),)),
              Event(True, "norm", (("t", values["t"]),)), Event(False, "norm", (("k", values["k"]),)),
              Event(True, "mixer", (("k", values["k"]),)), Event(True, "mixer.proj", (("k2", values["k"].copy()),)),
              Event(False, "mixer.proj", (("r", values["r"]),)), Event(False, "mixer", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "act", 1: "norm", 2: "norm", 3: "mixer.proj", 4: "mixer.proj", 5: "mixer.proj"}
    assert hold_boundaries(tags, boundaries, set(), {}).get(3) == "norm"


def test_the_cast_of_a_layers_result_is_never_put_in_that_layer_when_the_next_layer_takes_it():
    """layers.0 casts what it took and returns sin of it; layers.1 takes that tensor and a node casts it to the type
    it has. Nothing says layers.0 cast it as it returned it rather than layers.1 as it took it, and a tag in a
    sibling layer is the defect tags exist to end: the cast is not put in layers.0."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["v"], to=1),
                          helper.make_node("Sin", ["v"], ["k"]), helper.make_node("Cast", ["k"], ["c"], to=1),
                          helper.make_node("Cos", ["c"], ["r"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("t", values["t"]),)),
              Event(True, "layers.0", (("t", values["t"]),)), Event(False, "layers.0", (("k", values["k"]),)),
              Event(True, "layers.1", (("k", values["k"]),)), Event(False, "layers.1", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 3 not in boundaries.cast_back
    moved = hold_boundaries({0: "act", 1: "layers.0", 2: "layers.0", 3: "", 4: "layers.1"}, boundaries, set(), {})
    assert moved.get(3, "") != "layers.0"


def test_a_cast_claimed_by_a_call_for_a_tensor_its_caller_did_not_take_leaves_the_caller_undecided():
    """norm returns tanh(x) cast to the type it has and scaled by ones; mixer takes that tensor, and its child proj
    another tensor equal to it, whose nodes alone read the cast. proj's claim on the cast is about its own tensor:
    it does not settle whether mixer or its caller ran the cast."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["a"]), helper.make_node("Cast", ["a"], ["c"], to=1),
                          helper.make_node("Mul", ["c", "ones"], ["k"]), helper.make_node("Sin", ["k"], ["r"])],
                         X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "norm", (("x", X),)), Event(False, "norm", (("k", values["k"]),)),
              Event(True, "mixer", (("k", values["k"]),)), Event(True, "mixer.proj", (("k2", values["k"].copy()),)),
              Event(False, "mixer.proj", (("r", values["r"]),)), Event(False, "mixer", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 1 in boundaries.unplaced and "mixer" in boundaries.undecided[1]


def _mlp_events(values: dict[str, np.ndarray]) -> list[Event]:
    """norm returns tanh(x); mlp takes it, calls gate (sin of it), then inner (a reshape by sizes), and adds them."""
    return [Event(True, "", (("x", X),)), Event(True, "norm", (("x", X),)), Event(False, "norm", (("t", values["t"]),)),
            Event(True, "mlp", (("t", values["t"]),)), Event(True, "mlp.gate", (("t", values["t"]),)),
            Event(False, "mlp.gate", (("g", values["g"]),)), Event(True, "mlp.inner", (("t", values["t"]),)),
            Event(False, "mlp.inner", (("r", values["r"]),)), Event(False, "mlp", (("o", values["o"]),)),
            Event(False, "", (("o", values["o"]),))]


def test_sizes_a_call_read_off_what_it_took_are_its_own_though_a_call_it_made_read_them_too():
    """mlp reads the sizes of the tensor it took (Shape), calls gate, then inner, which reshapes its result to those
    sizes: for inner they were computed before it began (an exporter moves size computations up, merged with an
    equal one), but every reader of them lies within mlp's call and they read sizes of what mlp took: a call reads
    its own input's sizes, so mlp ran the Shape."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Shape", ["t"], ["s"]),
                          helper.make_node("Sin", ["t"], ["g"]), helper.make_node("Flatten", ["t"], ["f"], axis=0),
                          helper.make_node("Cos", ["f"], ["u"]), helper.make_node("Reshape", ["u", "s"], ["r"]),
                          helper.make_node("Add", ["g", "r"], ["o"])], X)
    boundaries = call_regions(graph, values, _mlp_events(values), [X])
    assert 1 not in boundaries.loose
    tags = {0: "norm", 1: "", 2: "mlp.gate", 3: "mlp.inner", 4: "mlp.inner", 5: "mlp.inner", 6: "mlp"}
    assert hold_boundaries(tags, boundaries, set(), {}) == {1: "mlp"}


def test_sizes_a_call_read_off_a_value_it_did_not_take_stay_where_they_are():
    """As above, but the sizes inner reshapes by are read off a value computed after norm returned and before mlp
    began, which mlp did not take: nothing says mlp read them (the exporter moved them up, merged with an equal
    one), so the Shape is left where it is."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Neg", ["x"], ["c"]),
                          helper.make_node("Shape", ["c"], ["s"]),
                          helper.make_node("Sin", ["t"], ["g"]), helper.make_node("Flatten", ["t"], ["f"], axis=0),
                          helper.make_node("Cos", ["f"], ["u"]), helper.make_node("Reshape", ["u", "s"], ["r"]),
                          helper.make_node("Add", ["g", "r"], ["o"])], X)
    boundaries = call_regions(graph, values, _mlp_events(values), [X])
    assert 2 in boundaries.loose
    tags = {0: "norm", 1: "", 2: "", 3: "mlp.gate", 4: "mlp.inner", 5: "mlp.inner", 6: "mlp.inner", 7: "mlp"}
    assert 2 not in hold_boundaries(tags, boundaries, set(), {})


def test_a_call_given_numbers_leaves_the_integer_arithmetic_it_reads():
    """The caller reads a size and hands the call a number; the call expands a weight to it. The call took no
    tensor, so it read no size: the Shape is the caller's, neither in the call's region nor pulled into it."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Shape", ["t"], ["s"]),
                          helper.make_node("Expand", ["w", "s"], ["e"])], X,
                         {"w": np.array([1.0, 2.0, 3.0], dtype=np.float32)})
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("t", values["t"]),)),
              Event(True, "code", (), numbers=(2.0, 3.0)), Event(False, "code", (("e", values["e"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["code"].nodes == {2} and 1 not in regions["code"].unsure
    assert 1 not in hold_boundaries({0: "first", 1: "", 2: "code"}, boundaries, set(), {})
    assert hold_boundaries({0: "first", 1: "code", 2: "code"}, boundaries, set(), {}).get(1) == ""


def test_integers_computed_from_the_models_inputs_alone_are_not_placed():
    """A dynamo file reads an input's sizes once, at the top; a TorchScript file where they are used."""
    graph, values = _run([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Tanh", ["x"], ["t"]),
                          helper.make_node("Expand", ["w", "s"], ["e"]), helper.make_node("Add", ["t", "e"], ["r"])],
                         X, {"w": np.array([1.0, 2.0, 3.0], dtype=np.float32)})
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 0 in boundaries.unplaced and 0 not in hold_boundaries({0: "", 1: "first", 2: "first", 3: "first"},
                                                               boundaries, set(), {})


def test_a_node_in_a_call_of_a_module_shared_under_two_parents_goes_to_that_modules_name():
    """One activation instance registered under h.0.mlp and h.1.mlp: PyTorch names every call of it by its first
    name, h.0.mlp.act, and h.1.mlp's call of it runs within h.1.mlp's call (its region lies in h.1.mlp's)."""
    regions = [CallRegion("h.0.mlp", {0, 1, 2}), CallRegion("h.0.mlp.act", {1}),
               CallRegion("h.1.mlp", {3, 4, 5}), CallRegion("h.1.other", {6, 7}), CallRegion("h.0.mlp.act", {4})]
    tags = {0: "h.0.mlp", 1: "h.0.mlp", 2: "h.0.mlp", 3: "h.1.mlp", 4: "h.1.mlp", 5: "h.1.mlp", 6: "h.1.other"}
    moved = hold_boundaries(tags, Boundaries(regions, set()), set(), {})
    assert moved == {1: "h.0.mlp.act", 4: "h.0.mlp.act"}
    # two calls on two lines of the tree whose regions overlap without one holding the other (a value the
    # exporter shared): the values do not say which ran it
    regions = [CallRegion("h.0.mlp", {0, 1}), CallRegion("h.1.mlp", {1, 2})]
    assert hold_boundaries({0: "h.0.mlp", 1: "h.1.mlp", 2: "h.1.mlp"}, Boundaries(regions, set()), set(), {}) == {}


def test_nodes_computed_from_a_value_a_call_returned_as_it_took_it_are_pulled_into_the_call_enclosing_it():
    """second's act computes relu(x); second hands it to its norm, which at its initial statistics returns a new
    tensor equal to it (the Add of zero), and takes tanh of that: the Add ran in the norm or in second."""
    graph, values, x = _graph()
    a = values["a"]
    events = [
        Event(True, "", (("x", x),)),
        Event(True, "second", (("x", x),)),
        Event(True, "second.act", (("x", x),)),
        Event(False, "second.act", (("relu", a),)),
        Event(True, "second.norm", (("relu", a),)),
        *_handing_back("second.norm.inner", "relu", a),  # a call it made: what made its result is not settled
        Event(False, "second.norm", (("normed", a.copy()),)),
        Event(False, "second", (("second result", values["b"]),)),
        Event(False, "", (("root result", values["c"]),)),
    ]
    boundaries = call_regions(graph, values, events, [x])
    assert 1 in boundaries.unplaced and boundaries.undecided[1] == {"second.norm"}
    moved = hold_boundaries({0: "second", 1: "first", 2: "second", 3: "", 4: ""}, boundaries, constant_nodes(graph), {})
    assert moved.get(1) == "second"
    assert moved.get(0) == "second.act"  # the relu made the value: the act's (a norm fused names the layer)


def test_a_module_never_called_runs_no_node():
    """A node tagged with a container of layers (no forward of its own: none of its calls ran) goes to the nearest
    module that was called; one tagged below a called module that never ran goes to that module."""
    graph, values, x = _graph()
    boundaries = call_regions(graph, values, _events(values, x), [x])
    assert boundaries.called == {"", "first", "second"}
    moved = hold_boundaries({0: "first", 1: "", 2: "second", 3: "", 4: "stack"}, boundaries, {3}, {})
    assert moved.get(4) == ""
    moved = hold_boundaries({0: "first", 1: "", 2: "second.unused", 3: "", 4: ""}, boundaries, {3}, {})
    assert moved.get(2) == "second"


def test_a_node_reading_weights_beside_other_readers_of_a_result_is_no_part_of_it():
    """``first`` returns a; ``second`` takes it, scales it by weights of ones (a norm at its initial statistics:
    its value equals a) beside a tanh of it, and adds the two. The scaling is second's, not first's result
    passed on; a weight read by a result's one reader (a bias of zeros after a product) still passes it on."""
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], dtype=np.float32)
    ones = np.ones(3, dtype=np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Mul", ["a", "w"], ["m"]),
             helper.make_node("Tanh", ["a"], ["t"]), helper.make_node("Add", ["m", "t"], ["c"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(ones, "w")])
    a = np.maximum(x, 0)
    values = {"a": a, "m": a * ones, "t": np.tanh(a), "c": a + np.tanh(a)}
    events = [Event(True, "", (("x", x),)), Event(True, "first", (("x", x),)),
              Event(False, "first", (("first result", a),)), Event(True, "second", (("first result", a),)),
              Event(False, "second", (("second result", values["c"]),)), Event(False, "", (("root", values["c"]),))]
    regions = {region.module: region for region in call_regions(graph, values, events, [x]).regions}
    assert regions["first"].nodes == {0} and 1 not in regions["first"].unsure
    assert regions["second"].nodes == {1, 2, 3}


def test_a_call_taking_one_number_repeated_that_several_nodes_hold_is_still_bounded():
    """``call`` takes tanh(x) and a tensor of zeros; two nodes hold zeros of that shape (x * 0 and t * 0), so which
    one it took is not settled: the call is bounded by its other input and its result, the zeros' nodes are
    left undecided (in the call or before it)."""
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], dtype=np.float32)
    zero = np.zeros((), dtype=np.float32)
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Mul", ["x", "z"], ["z1"]),
             helper.make_node("Mul", ["t", "z"], ["z2"]), helper.make_node("Sin", ["t"], ["s"]),
             helper.make_node("Sub", ["z2", "s"], ["r"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(zero, "z")])
    t = np.tanh(x)
    values = {"t": t, "z1": x * 0, "z2": t * 0, "s": np.sin(t), "r": t * 0 - np.sin(t)}
    events = [Event(True, "", (("x", x),)), Event(True, "call", (("t", t.copy()), ("zeros", np.zeros_like(x)))),
              Event(False, "call", (("r", values["r"]),)), Event(False, "", (("root", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    regions = {region.module: region for region in boundaries.regions}
    assert "call" not in boundaries.unbounded
    assert {3, 4} <= regions["call"].nodes and 0 not in regions["call"].nodes
    assert 2 in boundaries.unplaced


@pytest.mark.filterwarnings("ignore")
def test_calls_recorded_under_the_exporters_trace_are_the_eager_calls_and_leave_the_file_alone(tmp_path):
    """The values crossing every call, recorded while the TorchScript exporter traces the model, are those of an
    eager run; the file made meanwhile is the file made without recording."""
    import torch

    from modelexport_core.export.boundaries import record_calls, recording_calls

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x.mul_(2.0)  # an in-place update: a new version of the tensor taken
            return self.proj(x).relu() + x

    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 4)
    eager = record_calls(model, lambda: model(x.clone()))
    torch.onnx.export(model, (x.clone(),), str(tmp_path / "plain.onnx"), dynamo=False)
    with recording_calls(model) as traced:
        torch.onnx.export(model, (x.clone(),), str(tmp_path / "recorded.onnx"), dynamo=False)
    assert [(e.begins, e.module, len(e.values)) for e in traced] == [(e.begins, e.module, len(e.values)) for e in eager]
    assert all(np.array_equal(a, b) for t, e in zip(traced, eager) for (_, a), (_, b) in zip(t.values, e.values))
    plain, recorded = (onnx.load(str(tmp_path / f"{n}.onnx")).graph for n in ("plain", "recorded"))
    assert [(n.op_type, list(n.input)) for n in recorded.node] == [(n.op_type, list(n.input)) for n in plain.node]


@pytest.mark.filterwarnings("ignore")
def test_a_number_a_call_takes_is_recorded_where_a_node_may_compute_it(tmp_path):
    """In an eager run every number a call takes may be a size its caller read (a node of the file); under the
    TorchScript exporter's trace sizes are tensors, and a plain number is a constant of the trace: not recorded."""
    import torch

    from modelexport_core.export.boundaries import record_calls, recording_calls

    class Cut(torch.nn.Module):
        def forward(self, x: torch.Tensor, size: int, length: "int | torch.Tensor") -> torch.Tensor:
            return x.reshape(-1, size, x.shape[-1]) * length

    class Caller(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cut = Cut()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.cut(x, 2, x.shape[1])

    model = Caller().eval()
    x = torch.randn(2, 4, 3)
    eager = record_calls(model, lambda: model(x))
    with recording_calls(model) as traced:
        torch.onnx.export(model, (x,), str(tmp_path / "cut.onnx"), dynamo=False)
    assert [e.numbers for e in eager if e.begins] == [(), (2, 4)]
    assert [e.numbers for e in traced if e.begins] == [(), ()]
    assert [len(e.values) for e in traced if e.begins] == [1, 2]  # the size read, as a tensor of one integer


def test_a_constant_computed_in_steps_is_made_for_the_node_its_last_step_serves():
    """Pads computed from a constant in two constant steps serve the Pad reading the input: every step goes
    where that Pad goes."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Constant", [], ["p0"], name="pads", value=numpy_helper.from_array(np.array([0, 1, 0, 1]))),
        helper.make_node("Cast", ["p0"], ["p1"], name="cast", to=TensorProto.INT64),
        helper.make_node("Pad", ["a", "p1"], ["b"], name="pad"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 3])])
    constant = constant_nodes(graph)
    made_for = made_for_readers(graph, constant)
    assert made_for == {1: [3], 2: [3]}
    boundaries = call_regions(graph, {}, [], [])
    boundaries.regions.append(CallRegion("outer", {3}))
    moved = hold_boundaries({0: "inner", 1: "inner", 2: "inner", 3: "inner"}, boundaries, constant, made_for)
    assert moved == {3: "outer", 1: "outer", 2: "outer"}


def test_a_call_runs_after_the_values_it_takes_even_where_its_results_tell_nothing():
    """The caller computes relu(x) and hands it to a call that returns zeros (a branch whose last norm scales by
    zero): its result equals every tensor of zeros of its shape, but the Relu ran before it began, so it is not the
    call's (the Mul, the first node holding those zeros after it began, is)."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Mul", ["a", "zero"], ["z"]),
                          helper.make_node("Add", ["x", "z"], ["r"])], X, {"zero": np.zeros(1, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "branch", (("a", values["a"].copy()),)),
              Event(False, "branch", (("z", values["z"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "branch" not in boundaries.unbounded and boundaries.ran_before["branch"] == {0}
    assert [region.nodes for region in boundaries.regions if region.module == "branch"] == [{1}]
    moved = hold_boundaries({0: "branch", 1: "branch", 2: ""}, boundaries, set(), {})
    assert moved[0] == "" and 1 not in moved


def test_a_node_computing_a_value_equal_to_one_it_reads_passes_it_on():
    """A residual add of a branch that returns zeros computes a value equal to the stream it reads: a call taking
    that value took the first node holding it or the add, and its region starts after them."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sub", ["a", "a"], ["z"]),
                          helper.make_node("Add", ["a", "z"], ["a2"]), helper.make_node("Tanh", ["a2"], ["t"])], X)
    events = [Event(True, "", (("x", X),)), Event(True, "call", (("taken", values["a2"].copy()),)),
              Event(False, "call", (("t", values["t"]),)), Event(False, "", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "call" not in boundaries.unbounded
    assert regions["call"].nodes == {3} and 2 in regions["call"].unsure


def test_a_node_running_the_value_on_while_reading_other_data_ran_before_a_call_taking_that_tensor_alone():
    """The caller multiplies relu(x) by a mask of ones it built from x (not from relu(x)) and hands the product,
    equal to relu(x), to proj, which takes that one tensor. proj computes from what it took, its weights and
    constants alone, so the multiply, which also reads the mask, ran before it: the caller's, as is the mask."""
    graph, values = _run([
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("GreaterOrEqual", ["ax", "zero"], ["keep"]),
        helper.make_node("Cast", ["keep"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["a", "mask"], ["masked"]),
        helper.make_node("Tanh", ["masked"], ["t"]),
    ], X, {"zero": np.zeros(1, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "proj", (("masked", values["masked"].copy()),)),
              Event(False, "proj", (("t", values["t"]),)), Event(False, "", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "proj" not in boundaries.unbounded
    assert regions["proj"].nodes == {5} and 4 not in regions["proj"].unsure
    moved = hold_boundaries({0: "", 1: "proj", 2: "proj", 3: "proj", 4: "proj", 5: "proj"}, boundaries, set(), {})
    assert moved == {1: "", 2: "", 3: "", 4: ""}


def test_a_node_running_a_value_on_while_reading_a_tensor_the_call_was_not_handed_ran_before_the_call():
    """The caller builds a mask from x, ands it with a second mask of its own (all true, from x too) and hands
    the result, equal to the first mask, to layer beside relu(x). layer took those two tensors alone and no
    number, so it could not have read the second mask: the and, and what computed that mask, ran before it (the
    caller's), though the layer takes several tensors."""
    graph, values = _run([
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("Greater", ["x", "zero"], ["g"]),
        helper.make_node("Cast", ["g"], ["m0"], to=TensorProto.BOOL),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("GreaterOrEqual", ["ax", "zero"], ["ones"]),
        helper.make_node("And", ["m0", "ones"], ["m1"]),
        helper.make_node("Where", ["m1", "h", "minus_one"], ["t"]),
    ], X, {"zero": np.zeros(1, dtype=np.float32), "minus_one": -np.ones(1, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)),
              Event(True, "layer", (("h", values["h"].copy()), ("m1", values["m1"].copy()))),
              Event(False, "layer", (("t", values["t"]),)), Event(False, "", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "layer" not in boundaries.unbounded
    assert regions["layer"].nodes == {6} and not regions["layer"].unsure & {3, 4, 5}
    moved = hold_boundaries({0: "", **{i: "layer" for i in range(1, 7)}}, boundaries, set(), {})
    assert {i: moved.get(i) for i in (3, 4, 5)} == {3: "", 4: "", 5: ""}


def test_a_tensor_a_call_builds_from_a_number_it_took_is_its_own_beside_a_value_it_runs_on():
    """As above, but layer also took a number (a size, a tensor of one integer under the exporter's trace) and
    built the second mask from it: a call given a number may compute a tensor from it that is computed from no
    value it took, so the and is not put before the call."""
    graph, values = _run([
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("Greater", ["x", "zero"], ["g"]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one_i"], ["n"]),
        helper.make_node("Range", ["zero_i", "n", "one_i"], ["r"]),
        helper.make_node("GreaterOrEqual", ["r", "zero_i"], ["ones"]),
        helper.make_node("Unsqueeze", ["ones", "zero_axis"], ["row"]),
        helper.make_node("And", ["g", "row"], ["m1"]),
        helper.make_node("Where", ["m1", "h", "minus_one"], ["t"]),
    ], X, {"zero": np.zeros(1, dtype=np.float32), "minus_one": -np.ones(1, dtype=np.float32),
           "zero_i": np.array(0, dtype=np.int64), "one_i": np.array(1, dtype=np.int64),
           "zero_axis": np.zeros(1, dtype=np.int64)})
    events = [Event(True, "", (("x", X),)),
              Event(True, "layer", (("h", values["h"].copy()), ("g", values["g"].copy()), ("n", values["n"].copy()))),
              Event(False, "layer", (("t", values["t"]),)), Event(False, "", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "layer" not in boundaries.unbounded
    moved = hold_boundaries({0: "", 1: "", 2: "", 3: "", **{i: "layer" for i in range(4, 9)}}, boundaries, set(), {})
    assert not {i for i in (4, 5, 6, 7) if moved.get(i, "layer") != "layer"}


def test_a_result_equal_within_rounding_to_what_the_call_took_is_its_own_where_a_node_holds_it_far_nearer():
    """A norm at its initial statistics scales by 1/sqrt(1 + eps): its result equals its input within rounding,
    but the node computing it holds the recorded result exactly, and the input's node is far from it."""
    scale = np.float32(1.0 / np.sqrt(1.0 + 1e-5))
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Mul", ["a", "scale"], ["b"]),
                          helper.make_node("Tanh", ["b"], ["t"])], X, {"scale": np.array([scale], dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("a", values["a"]),)),
              Event(True, "norm", (("a", values["a"]),)), Event(False, "norm", (("b", values["b"].copy()),)),
              Event(False, "", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "norm" not in boundaries.unbounded and regions["norm"].nodes == {1}
    assert hold_boundaries({0: "act", 1: "", 2: ""}, boundaries, set(), {}) == {1: "norm"}


def test_a_result_equal_within_rounding_to_what_the_call_took_computed_from_a_childs_result_is_its_own():
    """A block adds its branch scaled near zero (a layer scale of 1e-6) to what it took: its result equals its
    input within rounding, and the recorded value lies as near the input as the node computing it. That node
    is computed from the result of the call the block made (its branch), which only the block's code can
    have done: it holds the block's result, and the block's scale and add are the block's."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Tanh", ["a"], ["t"]),
                          helper.make_node("Mul", ["t", "gamma"], ["s"]), helper.make_node("Add", ["a", "s"], ["b"]),
                          helper.make_node("Sin", ["b"], ["out"])],
                         X, {"gamma": np.full(3, 1e-6, dtype=np.float32)})
    recorded = values["a"] + values["s"] / 2  # as far from the input as from the node adding the branch
    events = [Event(True, "", (("x", X),)), Event(True, "act", (("x", X),)), Event(False, "act", (("a", values["a"]),)),
              Event(True, "block", (("a", values["a"]),)), Event(True, "block.branch", (("a", values["a"]),)),
              Event(False, "block.branch", (("t", values["t"]),)), Event(False, "block", (("b", recorded),)),
              Event(False, "", (("out", values["out"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "block" not in boundaries.unbounded and regions["block"].nodes >= {2, 3}
    moved = hold_boundaries({0: "act", 1: "block.branch", 2: "", 3: "", 4: ""}, boundaries, set(), {})
    assert moved.get(2) == "block" and moved.get(3) == "block"


def test_a_new_tensor_cut_back_out_of_a_concatenation_is_held_where_it_was_cut_not_by_the_earlier_tensor():
    """block's norm returns n; block concatenates n with another value and cuts n's rows back out: its mlp takes
    that cut, a new tensor equal to n. Its value is held by the norm's node and by the slice, which are not one
    value run on (the concatenation mixes in the other); the new tensor is not the norm's: the slice holds it, and
    ran before the mlp began."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["n"]), helper.make_node("Sin", ["x"], ["o"]),
                          helper.make_node("Concat", ["n", "o"], ["c"], axis=0),
                          helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["s"]),
                          helper.make_node("Cos", ["s"], ["m"])],
                         X, {"starts": np.array([0], dtype=np.int64), "ends": np.array([2], dtype=np.int64),
                             "axes": np.array([0], dtype=np.int64)})
    events = [Event(True, "", (("x", X),)), Event(True, "block", (("x", X),)),
              Event(True, "block.norm", (("x", X),)), Event(False, "block.norm", (("n", values["n"]),)),
              Event(True, "block.mlp", (("s", values["s"].copy()),)), Event(False, "block.mlp", (("m", values["m"]),)),
              Event(False, "block", (("m", values["m"]),)), Event(False, "", (("m", values["m"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "block.mlp" not in boundaries.unbounded and regions["block.mlp"].nodes == {4}
    assert 3 not in regions["block.mlp"].unsure
    moved = hold_boundaries({0: "block.norm", 1: "block", 2: "block", 3: "block.mlp", 4: "block.mlp"}, boundaries,
                            constant_nodes(graph), {})
    assert moved.get(3) == "block"


def test_a_value_computed_from_sizes_once_and_expanded_is_held_where_it_was_computed():
    """A mask computed from the input's sizes alone (data the file computes without the input's elements),
    then expanded to the shape it has: the two nodes holding it are one value run on, not copies of a table
    written for each reader, so the call taking it ran after the first and what computed it."""
    graph, values = _run([helper.make_node("Shape", ["x"], ["s"]),
                          helper.make_node("Cast", ["s"], ["m"], to=TensorProto.FLOAT),
                          helper.make_node("Expand", ["m", "to"], ["e"]), helper.make_node("Sin", ["e"], ["r"])],
                         X, {"to": np.array([2], dtype=np.int64)})
    events = [Event(True, "", (("x", X),)), Event(True, "block", (("e", values["e"].copy()),)),
              Event(False, "block", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert {0, 1} <= boundaries.ran_before["block"]
    assert hold_boundaries({0: "block", 1: "block", 2: "block", 3: "block"}, boundaries, set(), {}) \
        == {0: "", 1: ""}


@pytest.mark.parametrize("gate_takes_it", [False, True])
def test_a_function_of_a_weight_read_within_one_call_alone_goes_into_it_unless_the_call_took_it(gate_takes_it):
    """A gate computes the sigmoid of its parameter and scales what it took by it; equal parameters elsewhere
    left the sigmoid's owner open, so it is tagged with the block around the gate. All its readers ran in the
    gate, so the gate computed it; not where the gate took the sigmoid as an input (its caller computed it)."""
    weight = np.array([0.3, -1.2, 0.8], dtype=np.float32)
    graph, values = _run([helper.make_node("Sigmoid", ["p"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"]),
                          helper.make_node("Tanh", ["y"], ["t"])], X, {"p": weight})
    taken = (("x", X), ("s", values["s"])) if gate_takes_it else (("x", X),)
    events = [Event(True, "", (("x", X),)), Event(True, "block", (("x", X),)), Event(True, "block.gate", taken),
              Event(False, "block.gate", (("y", values["y"]),)), Event(False, "block", (("t", values["t"]),)),
              Event(False, "", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    moved = hold_boundaries({0: "block", 1: "block.gate", 2: "block"}, boundaries, constant,
                            made_for_readers(graph, constant), {}, made_for_readers(graph, constant, weighed=True))
    assert moved.get(0) == (None if gate_takes_it else "block.gate")


def test_a_function_of_a_weight_read_in_two_layers_does_not_go_into_their_list():
    """The sigmoid of a weight is read by two layers of a list (a container that runs no node of its own): it
    stays with the caller, not in the list both layers lie in."""
    weight = np.array([0.3, -1.2, 0.8], dtype=np.float32)
    graph, values = _run([helper.make_node("Sigmoid", ["p"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"]),
                          helper.make_node("Add", ["y", "s"], ["z"])], X, {"p": weight})
    events = [Event(True, "", (("x", X),)), Event(True, "layers.0", (("x", X),)),
              Event(False, "layers.0", (("y", values["y"]),)), Event(True, "layers.1", (("y", values["y"]),)),
              Event(False, "layers.1", (("z", values["z"]),)), Event(False, "", (("z", values["z"]),))]
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    moved = hold_boundaries({0: "", 1: "layers.0", 2: "layers.1"}, boundaries, constant,
                            made_for_readers(graph, constant), {}, made_for_readers(graph, constant, weighed=True))
    assert 0 not in moved


def test_constants_a_call_took_its_values_from_ran_before_it():
    """The caller builds positions from constants alone (no graph input reaches them) and hands them to a call:
    those constant nodes are the caller's, whatever a strategy guessed."""
    graph, values = _run([helper.make_node("Constant", [], ["n"], value=numpy_helper.from_array(np.array(3))),
                          helper.make_node("Range", ["start", "n", "step"], ["ids"]),
                          helper.make_node("Cast", ["ids"], ["positions"], to=TensorProto.FLOAT),
                          helper.make_node("Mul", ["x", "positions"], ["r"])], X,
                         {"start": np.array(0), "step": np.array(1)})
    events = [Event(True, "", (("x", X),)), Event(True, "rotary", (("x", X), ("p", values["positions"].copy()))),
              Event(False, "rotary", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    assert {0, 1, 2} <= constant and {0, 1, 2} <= boundaries.ran_before["rotary"]
    moved = hold_boundaries({0: "rotary", 1: "rotary", 2: "rotary", 3: "rotary"}, boundaries, constant, {})
    assert moved == {0: "", 1: "", 2: ""}


@pytest.mark.parametrize("axis", [-1, 0])
def test_a_value_whose_rows_the_runtime_ordered_otherwise_is_found(axis):
    """A router selects values in an order left unspecified (``topk(sorted=False)``): PyTorch ordered each row one
    way, the runtime the other, and the call computing from them element by element follows that order. Or it
    sorts tokens by the expert each goes to, an order left unspecified among equal keys: the experts take the
    rows (along the first axis) grouped one way in PyTorch, the other in the runtime."""
    graph, values = _run([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Tanh", ["n"], ["t"]),
                          helper.make_node("Sin", ["t"], ["s"])], X)
    flipped = {name: np.flip(values[name], axis=axis).copy() for name in ("n", "t")}
    events = [Event(True, "", (("x", X),)), Event(True, "router", (("x", X),)),
              Event(False, "router", (("n", flipped["n"]),)), Event(True, "experts", (("n", flipped["n"]),)),
              Event(False, "experts", (("t", flipped["t"]),)), Event(False, "", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region.nodes for region in boundaries.regions}
    assert boundaries.unbounded == set() and regions["router"] == {0} and regions["experts"] == {1}


def test_a_size_of_the_models_input_goes_with_the_reader_the_boundaries_move():
    """A call reshapes its work to its input's shape: the size read from the model's input is placed by no call's
    values (an exporter may read it anywhere), so it follows the node reading it into the call."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["t"]),
                          helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["t", "s"], ["v"])], X)
    events = [Event(True, "child", (("x", X),)), Event(False, "child", (("v", values["v"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.sizes == {2: [3]}
    constant = constant_nodes(graph)
    moved = hold_boundaries({0: "child", 1: "child", 2: "", 3: ""}, boundaries, constant,
                            made_for_readers(graph, constant))
    assert moved == {3: "child", 2: "child"}


def test_a_node_written_amid_a_call_it_may_have_run_in_ran_in_it():
    """A call pads what it took by zero (a value equal to its input: the call's, or its caller's before it, which
    reads it too) between two nodes of its own: exporters write nodes in the order they ran, so the pad ran in the
    call."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["n"]),
                          helper.make_node("Pad", ["a", "pads"], ["p"]), helper.make_node("Tanh", ["p"], ["t"]),
                          helper.make_node("Add", ["n", "t"], ["r"]), helper.make_node("Sub", ["r", "p"], ["o"])],
                         X, {"pads": np.zeros(4, dtype=np.int64)})
    events = [Event(True, "child", (("a", values["a"].copy()),)), Event(False, "child", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.unplaced == {2} and boundaries.undecided == {2: {"child"}}
    moved = hold_boundaries({0: "", 1: "child", 2: "", 3: "child", 4: "child", 5: ""}, boundaries, set(), {})
    assert moved == {2: "child"}


def test_a_size_a_call_took_computed_before_its_first_node_from_nothing_it_took_ran_before_it():
    """The caller reads a width off a tensor and hands it, with another tensor, to a call (as a tensor of one
    integer, as an exporter's trace makes it): written before the call's first node and read off no value the
    call took, it was computed before the call began."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Shape", ["a"], ["s"]),
                          helper.make_node("Gather", ["s", "one"], ["w"]), helper.make_node("Transpose", ["a"], ["t"]),
                          helper.make_node("Neg", ["t"], ["n"]), helper.make_node("Cast", ["w"], ["f"], to=1),
                          helper.make_node("Mul", ["n", "f"], ["r"])], X, {"one": np.array(1, dtype=np.int64)})
    events = [Event(True, "child", (("t", values["t"].copy()), ("w", values["w"].copy()))),
              Event(False, "child", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.ran_before["child"] >= {1, 2}
    moved = hold_boundaries({0: "", 1: "child", 2: "child", 3: "", 4: "child", 5: "child", 6: "child"},
                            boundaries, set(), {})
    assert moved == {1: "", 2: ""}


def test_a_size_read_off_a_value_the_call_took_may_be_its_own():
    """The same, the width read off the tensor the call took: the call may read its input's sizes itself."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Transpose", ["a"], ["t"]),
                          helper.make_node("Shape", ["t"], ["s"]), helper.make_node("Gather", ["s", "one"], ["w"]),
                          helper.make_node("Neg", ["t"], ["n"]), helper.make_node("Cast", ["w"], ["f"], to=1),
                          helper.make_node("Mul", ["n", "f"], ["r"])], X, {"one": np.array(1, dtype=np.int64)})
    events = [Event(True, "child", (("t", values["t"].copy()), ("w", values["w"].copy()))),
              Event(False, "child", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert not boundaries.ran_before.get("child", set()) & {2, 3}
    assert hold_boundaries({0: "", 1: "", 2: "child", 3: "child", 4: "child", 5: "child", 6: "child"},
                           boundaries, set(), {}) == {}


def test_a_node_passing_on_a_size_the_call_took_may_be_its_own():
    """The call casts the width it took before using it: the cast passes the number on, and may be the call's."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Shape", ["a"], ["s"]),
                          helper.make_node("Gather", ["s", "one"], ["w"]), helper.make_node("Transpose", ["a"], ["t"]),
                          helper.make_node("Cast", ["w"], ["w32"], to=6), helper.make_node("Neg", ["t"], ["n"]),
                          helper.make_node("Cast", ["w32"], ["f"], to=1), helper.make_node("Mul", ["n", "f"], ["r"])],
                         X, {"one": np.array(1, dtype=np.int64)})
    events = [Event(True, "child", (("t", values["t"].copy()), ("w", values["w"].copy()))),
              Event(False, "child", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert {1, 2} <= boundaries.ran_before["child"] and 4 not in boundaries.ran_before["child"]


def test_a_call_also_returning_a_value_that_tells_nothing_is_bounded_by_its_other_results():
    graph, values, x = _graph()
    events = _events(values, x)
    # second also returns a mask of ones: no node is told by it, the tensor still bounds the call
    events[4] = Event(False, "second", (("second result", values["b"]), ("mask", np.ones(3, dtype=np.float32))))
    boundaries = call_regions(graph, values, events, [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["second"].nodes == {2}
    # the nodes computing the mask are not known: none is pushed out of the module on this call's account
    assert "second" in boundaries.unbounded
    constant = constant_nodes(graph)
    tags = {0: "", 1: "", 2: "first", 3: "second", 4: "second"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == {0: "first", 2: "second"}  # Tanh pulled in; the Mul and its constant stay where they were


def _reshaped_by_a_returned_size() -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """layer computes t = tanh(x), returns sin(t) and the number of t's rows; the caller reshapes the result to
    that many columns (the number unsqueezed and joined after -1 into a shape)."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Shape", ["t"], ["s"]), ints("first", 0),
        helper.make_node("Gather", ["s", "first"], ["n"]), helper.make_node("Sin", ["t"], ["r"]), ints("axes", [0]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["nu"]), ints("rest", [-1]),
        helper.make_node("Concat", ["rest", "nu"], ["shape"], axis=0), helper.make_node("Reshape", ["r", "shape"], ["out"]),
    ], X)
    events = [Event(True, "", (("x", X),)), Event(True, "layer", (("x", X),)),
              Event(False, "layer", (("r", values["r"]), ("rows", np.array(X.shape[0])))),
              Event(False, "", (("out", values["out"]),))]
    return graph, events, values


def test_a_call_returning_a_size_still_bounds_every_node_but_integer_arithmetic():
    """Only integer arithmetic can have computed the number of rows layer returned: its tensor result still bounds
    it for every other node, so the caller's reshape moves out of it, and with it the arithmetic turning the
    number into the reshape's shape (written where the shape is used). The size read off t stays: layer may have
    computed it to return it."""
    graph, events, values = _reshaped_by_a_returned_size()
    boundaries = call_regions(graph, values, events, [X])
    assert "layer" in boundaries.sized and "layer" not in boundaries.unbounded
    constant = constant_nodes(graph)
    moved = hold_boundaries({i: "layer" for i in range(len(graph.node))}, boundaries, constant,
                            made_for_readers(graph, constant))
    assert moved == {9: "", 6: "", 8: "", 5: "", 7: ""}


def _masked_by_the_sizes_of_a_result() -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """pre returns r = sin(x) and a mask cos(x); the caller reads r's number of rows, expands the mask to that many
    rows (the number unsqueezed and joined with the row's length: the mask's own shape) and hands r and the mask to
    layer: tanh(r + mask)."""
    graph, values = _run([
        helper.make_node("Sin", ["x"], ["r"]), helper.make_node("Cos", ["x"], ["m"]),
        helper.make_node("Shape", ["r"], ["s"]), ints("first", 0), helper.make_node("Gather", ["s", "first"], ["n"]),
        ints("axes", [0]), helper.make_node("Unsqueeze", ["n", "axes"], ["nu"]), ints("width", [X.shape[1]]),
        helper.make_node("Concat", ["nu", "width"], ["shape"], axis=0),
        helper.make_node("Expand", ["m", "shape"], ["mask"]), helper.make_node("Add", ["r", "mask"], ["sum"]),
        helper.make_node("Tanh", ["sum"], ["out"]),
    ], X)
    events = [Event(True, "", (("x", X),)), Event(True, "pre", (("x", X),)),
              Event(False, "pre", (("r", values["r"]), ("m", values["m"]))),
              Event(True, "layer", (("r", values["r"]), ("mask", values["mask"]))),
              Event(False, "layer", (("out", values["out"]),)), Event(False, "", (("out", values["out"]),))]
    return graph, events, values


def test_sizes_read_off_a_value_held_outside_every_call_go_with_the_operand_they_build():
    """The caller held r (pre returned it): the sizes it read off r to build the shape the mask is expanded to,
    and the arithmetic after them, were written where the shape is used: in the caller, as the expand (the first
    node passing on a tensor layer took, made after pre ended) ran before layer began."""
    graph, events, values = _masked_by_the_sizes_of_a_result()
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    tags = {0: "pre", 1: "pre", **{i: "layer" for i in range(2, len(graph.node))}}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == {i: "" for i in range(2, len(graph.node) - 2)}


def _positions_written_twice() -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """The caller counts positions off x's row length (a range), pre returns sin(x), and rot adds the positions
    it took to that; the caller then scales rot's result by the positions, which the file computes again."""
    def positions(suffix: str) -> list[onnx.NodeProto]:
        return [helper.make_node("Shape", ["x"], [f"s{suffix}"]),
                helper.make_node("Gather", [f"s{suffix}", "axis"], [f"n{suffix}"]),
                helper.make_node("Range", ["zero", f"n{suffix}", "step"], [f"p{suffix}"])]

    floats = helper.np_dtype_to_tensor_dtype(X.dtype)
    graph, values = _run([
        ints("axis", 1), ints("zero", 0), ints("step", 1), *positions(""),
        helper.make_node("Sin", ["x"], ["t"]), helper.make_node("Cast", ["p"], ["pf"], to=floats),
        helper.make_node("Add", ["t", "pf"], ["out"]), *positions("2"),
        helper.make_node("Cast", ["p2"], ["pf2"], to=floats), helper.make_node("Mul", ["out", "pf2"], ["y"]),
    ], X)
    events = [Event(True, "", (("x", X),)), Event(True, "pre", (("x", X),)),
              Event(False, "pre", (("t", values["t"]),)),
              Event(True, "rot", (("t", values["t"]), ("positions", values["p"]))),
              Event(False, "rot", (("out", values["out"]),)), Event(False, "", (("y", values["y"]),))]
    return graph, events, values


def test_what_computed_a_copy_written_before_a_call_began_ran_before_it():
    """The file wrote the positions rot took twice (copies: which one it took is not known), but the first copy
    lies before pre's result, so it and what computed it ran before rot began: rot's cast of them moves into rot,
    the range and the sizes it counts from stay in the caller."""
    graph, events, values = _positions_written_twice()
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    tags = {i: "" for i in range(len(graph.node))} | {6: "pre", 8: "rot"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == {7: "rot"}


def test_a_module_whose_calls_returned_nothing_but_empty_tensors_runs_no_node():
    """compress (and the projection it called) returned a tensor of no element: data leaves a call through its
    results, so no node of the graph ran in either; the nodes tagged with them go to the caller."""
    graph, values = _run([helper.make_node("Sin", ["x"], ["t"]), helper.make_node("Cos", ["t"], ["y"])], X)
    empty = np.zeros((0, X.shape[1]), X.dtype)
    events = [Event(True, "", (("x", X),)), Event(True, "compress", (("x", X),)),
              Event(True, "compress.proj", (("x", X),)), Event(False, "compress.proj", (("p", values["t"]),)),
              Event(False, "compress", (("none", empty),)), Event(False, "", (("y", values["y"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.called == {""}
    moved = hold_boundaries({0: "compress.proj", 1: "compress"}, boundaries, set(), {})
    assert moved == {0: "", 1: ""}


def test_a_module_returning_empty_tensors_a_node_holds_still_ran():
    """Where a node of the graph holds a value of no element of the shape compress returned (the file kept what
    computed it: a slice of no rows), compress's nodes are in the graph: it stays a called module."""
    graph, values = _run([helper.make_node("Sin", ["x"], ["t"]), ints("begin", [0]), ints("end", [0]),
                          helper.make_node("Slice", ["t", "begin", "end"], ["none"]),
                          helper.make_node("Cos", ["t"], ["y"])], X)
    assert values["none"].shape == (0, X.shape[1])
    events = [Event(True, "", (("x", X),)), Event(True, "compress", (("x", X),)),
              Event(False, "compress", (("none", values["none"]),)), Event(False, "", (("y", values["y"]),))]
    assert call_regions(graph, values, events, [X]).called == {"", "compress"}


def test_a_call_made_the_constants_holding_its_result():
    """pos returns a table computed from constants alone (positions at static sizes: cos of a row squared), after
    pre's result and from nothing pos took: pos made it, and the constants computed for it alone; the caller adds
    it to pre's result."""
    row = numpy_helper.from_array(np.arange(1, X.shape[1] + 1, dtype=X.dtype))
    graph, values = _run([
        helper.make_node("Sin", ["x"], ["t"]), helper.make_node("Constant", [], ["c"], value=row),
        helper.make_node("Mul", ["c", "c"], ["sq"]), helper.make_node("Cos", ["sq"], ["table"]),
        helper.make_node("Add", ["t", "table"], ["y"]),
    ], X)
    events = [Event(True, "", (("x", X),)), Event(True, "pre", (("x", X),)),
              Event(False, "pre", (("t", values["t"]),)), Event(True, "pos", (("t", values["t"]),)),
              Event(False, "pos", (("table", values["table"]),)), Event(False, "", (("y", values["y"]),))]
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    assert constant == {1, 2, 3}
    moved = hold_boundaries({0: "pre", 1: "", 2: "", 3: "", 4: ""}, boundaries, constant,
                            made_for_readers(graph, constant))
    assert moved == {1: "pos", 2: "pos", 3: "pos"}


def _cropped(also_read: bool) -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """join stacks tanh(x) on itself and crops the rows of the stack to all of them; then take returns sin of
    what join returned. With ``also_read``, the caller reads the stack too (cos of it)."""
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Concat", ["t", "t"], ["c"], axis=0),
             ints("begin", [0]), ints("end", [4]), helper.make_node("Slice", ["c", "begin", "end"], ["k"]),
             helper.make_node("Sin", ["k"], ["r"])]
    if also_read:
        nodes.append(helper.make_node("Cos", ["c"], ["o"]))
    graph, values = _run(nodes, X)
    events = [Event(True, "join", (("x", X),)), Event(False, "join", (("k", values["k"]),)),
              Event(True, "take", (("k", values["k"]),)), Event(False, "take", (("r", values["r"]),))]
    return graph, events, values


def test_a_crop_taking_the_whole_of_a_value_nothing_else_reads_ran_where_the_value_was_made():
    """The values cannot say whether join cropped its stack before returning it or take cropped what it took:
    code crops what it padded or joined itself, and a stack read by nothing but a crop of all of it was never
    returned whole, so the crop (and the constants made for it) go to join."""
    graph, events, values = _cropped(also_read=False)
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.crops == {4: 1}
    constant = constant_nodes(graph)
    tags = {0: "join", 1: "join", 2: "take", 3: "take", 4: "take", 5: "take"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == {4: "join", 2: "join", 3: "join"}


def test_a_crop_of_the_whole_of_a_value_read_elsewhere_too_is_left_where_it_is():
    """Where the caller reads the stack itself, it was returned whole: the crop may be take's own."""
    graph, events, values = _cropped(also_read=True)
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.crops == {}


def test_a_table_of_zeros_shaped_to_the_input_added_to_a_result_passes_it_on_and_may_be_the_calls():
    """embed returns tanh(x) plus a table of zeros reshaped to x's sizes (a positional table resized to the input);
    layer takes that value, and only a Shape besides the Add reads tanh(x). The Add may be either call's last or
    first node; the table computed from a weight and sizes alone may be embed's: neither is pushed out of embed
    nor pulled into layer."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Shape", ["t"], ["size"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Reshape", ["zeros", "shape"], ["table"]),
        helper.make_node("Add", ["t", "table"], ["e"]),
        helper.make_node("Sin", ["e"], ["s"]),
    ], X, {"zeros": np.zeros(6, dtype=np.float32)})
    events = [Event(True, "embed", (("x", X),)), Event(False, "embed", (("e", values["e"]),)),
              Event(True, "layer", (("e", values["e"]),)), Event(False, "layer", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["embed"].nodes == {0} and {2, 3, 4} <= regions["embed"].unsure
    tags = {0: "embed", 1: "embed", 2: "embed", 3: "embed", 4: "embed", 5: "layer"}
    moved = hold_boundaries(tags, boundaries, constant_nodes(graph), {})
    assert not {2, 3, 4} & set(moved)


def test_a_normalization_repeated_until_it_settles_ends_at_its_last_step():
    """balance divides x by its row sums twice; the second step changes nothing (the rows already sum to one), so
    both steps' values equal its result. The second is computed from the first and constants alone: it passes the
    value on, and the call may end at it, so no step is pushed out of the call."""
    x = np.array([[0.5, 1.0, 2.0], [1.5, 0.25, 3.0]], dtype=np.float32)
    graph, values = _run([
        helper.make_node("ReduceSum", ["x", "axes"], ["s1"], keepdims=1),
        helper.make_node("Add", ["s1", "eps"], ["d1"]),
        helper.make_node("Div", ["x", "d1"], ["r1"]),
        helper.make_node("ReduceSum", ["r1", "axes"], ["s2"], keepdims=1),
        helper.make_node("Add", ["s2", "eps"], ["d2"]),
        helper.make_node("Div", ["r1", "d2"], ["r2"]),
        helper.make_node("Tanh", ["r2"], ["t"]),
    ], x, {"axes": np.array([-1], dtype=np.int64), "eps": np.array(1e-12, dtype=np.float32)})
    events = [Event(True, "balance", (("x", x),)), Event(False, "balance", (("r", values["r2"]),))]
    boundaries = call_regions(graph, values, events, [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["balance"].nodes == {0, 1, 2} and {3, 4, 5} <= regions["balance"].unsure
    moved = hold_boundaries({i: "balance" for i in range(6)} | {6: ""}, boundaries, constant_nodes(graph), {})
    assert not {3, 4, 5} & set(moved)


def test_a_table_the_file_writes_once_per_reader_places_no_node():
    """scale takes t and a table, and multiplies two products of t by it; the file writes the table as a Constant
    node for each product. Two nodes hold what the call took, neither computed from the other: which one it took
    would be unsettled, and the call unbounded (the caller's Sin left in it). Copies of data compute nothing, so they
    place no node: the call is bounded by t and its result, and neither copy ran before it began."""
    table = np.array([[1.0, 0.5, 0.25], [2.0, 4.0, 8.0]], dtype=np.float32)
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Constant", [], ["c1"], value=numpy_helper.from_array(table)),
        helper.make_node("Mul", ["t", "c1"], ["q"]),
        helper.make_node("Constant", [], ["c2"], value=numpy_helper.from_array(table)),
        helper.make_node("Mul", ["t", "c2"], ["k"]),
        helper.make_node("Add", ["q", "k"], ["r"]),
        helper.make_node("Sin", ["r"], ["s"]),
    ], X)
    events = [Event(True, "scale", (("t", values["t"]), ("table", table))),
              Event(False, "scale", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "scale" not in boundaries.unbounded and regions["scale"].nodes == {2, 4, 5}
    assert not {1, 3} & set(boundaries.ran_before.get("scale", ()))
    moved = hold_boundaries({0: "", 1: "scale", 2: "scale", 3: "scale", 4: "scale", 5: "scale", 6: "scale"},
                            boundaries, constant_nodes(graph), {})
    assert moved.get(6) == ""


def test_positions_computed_from_sizes_in_two_places_place_no_node():
    """bias takes x and positions 0, 1, 2; the file computes that range from x's sizes twice (once for each of
    two readers in the exporter's telling). Neither Range is computed from the other, so which one the call took
    is not settled, but both are computed from sizes alone: data, not the call's computation. The call is bounded
    by x and its result, and the caller's Sin is pushed out of it."""
    graph, values = _run([
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "last"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["p1"]),
        helper.make_node("Range", ["zero", "n", "one"], ["p2"]),
        helper.make_node("Cast", ["p2"], ["pf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "pf"], ["r"]),
        helper.make_node("Sin", ["r"], ["s"]),
        helper.make_node("Cast", ["p1"], ["p1f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["s", "p1f"], ["o"]),
    ], X, {"last": np.array(1, dtype=np.int64), "zero": np.array(0, dtype=np.int64),
           "one": np.array(1, dtype=np.int64)})
    positions = np.arange(3, dtype=np.int64)
    events = [Event(True, "bias", (("x", X), ("p", positions))), Event(False, "bias", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "bias" not in boundaries.unbounded
    moved = hold_boundaries({i: "bias" for i in range(9)}, boundaries, constant_nodes(graph), {})
    assert moved.get(6) == "" and 5 not in moved


def test_a_call_handing_back_what_it_took_beside_a_new_result_is_bounded_by_that_result():
    """stack takes x and returns x itself (the same tensor: every state of a stack, its input first) beside
    tanh(x). The handed-back tensor was made before the call began and places nothing; the new result bounds the
    call, so the caller's Sin of it is pushed out."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Sin", ["t"], ["s"])], X)
    events = [Event(True, "stack", (("x", X),)), Event(False, "stack", (("x", X), ("t", values["t"])))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert "stack" not in boundaries.unbounded and regions["stack"].nodes == {0}
    assert hold_boundaries({0: "stack", 1: "stack"}, boundaries, constant_nodes(graph), {}) == {1: ""}


def test_a_constant_written_while_a_call_ran_and_read_by_its_children_is_that_calls():
    """enc computes tanh(x), then a table from constants alone, and hands both to its two blocks. A strategy left
    the table at the root (nothing computing from the input reads it before the blocks). It is written between two
    nodes that ran in enc (exporters write nodes in the order they ran), every reader is within enc, and enc did
    not take it: it ran in enc."""
    table = numpy_helper.from_array(np.array([[0.5, 1.0, 2.0], [1.5, 0.25, 3.0]], dtype=np.float32))
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("Constant", [], ["c"], value=table),
        helper.make_node("Sin", ["c"], ["tab"]),
        helper.make_node("Mul", ["h", "tab"], ["h0"]),
        helper.make_node("Tanh", ["h0"], ["t0"]),
        helper.make_node("Mul", ["t0", "tab"], ["h1"]),
        helper.make_node("Tanh", ["h1"], ["t1"]),
        helper.make_node("Cos", ["t1"], ["out"]),
    ], X)
    h, tab, t0, t1 = values["h"], values["tab"], values["t0"], values["t1"]
    events = [Event(True, "enc", (("x", X),)),
              Event(True, "enc.b0", (("h", h), ("tab", tab))), Event(False, "enc.b0", (("t0", t0),)),
              Event(True, "enc.b1", (("t0", t0), ("tab", tab))), Event(False, "enc.b1", (("t1", t1),)),
              Event(False, "enc", (("t1", t1),))]
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    tags = {0: "enc", 1: "", 2: "", 3: "enc.b0", 4: "enc.b0", 5: "enc.b1", 6: "enc.b1", 7: ""}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == {1: "enc", 2: "enc"}


def test_a_constant_written_after_what_a_call_took_and_read_by_its_first_node_alone_is_that_calls():
    """attn projects x (proj), then hands the projection alone to its norm, which shifts it by a constant it made
    (the exporter writes the constant just before the norm's one node). A strategy left the constant with attn. It
    is written after the value norm took was made, only norm's node reads it, and norm did not take it: attn
    would have handed over a constant it made for norm's node alone, so it ran in norm."""
    halves = numpy_helper.from_array(np.full(3, 0.5, dtype=np.float32))
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["p"]),
        helper.make_node("Constant", [], ["shift"], value=halves),
        helper.make_node("Add", ["p", "shift"], ["n"]),
        helper.make_node("Sin", ["n"], ["out"]),
    ], X)
    p, n, out = values["p"], values["n"], values["out"]
    events = [Event(True, "attn", (("x", X),)),
              Event(True, "attn.proj", (("x", X),)), Event(False, "attn.proj", (("p", p),)),
              Event(True, "attn.norm", (("p", p),)), Event(False, "attn.norm", (("n", n),)),
              Event(False, "attn", (("out", out),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["attn.norm"].nodes == {2} and regions["attn.norm"].began == 0
    constant = constant_nodes(graph)
    tags = {0: "attn.proj", 1: "attn", 2: "attn.norm", 3: "attn"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == {1: "attn.norm"}


def test_a_new_tensor_equal_to_an_earlier_one_was_made_before_the_call_taking_it():
    """layer concatenates the one tensor prev returned (a new tensor of the same elements) and hands it to its norm.
    The norm took a tensor no call had met: it was made after layer began and before the norm did, so the Concat
    passing the value on ran in layer, not in the norm (a strategy following the value gave it to the norm)."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Concat", ["t"], ["c"], axis=1),
        helper.make_node("Sin", ["c"], ["n"]),
        helper.make_node("Cos", ["n"], ["r"]),
    ], X)
    t, n, r = values["t"], values["n"], values["r"]
    events = [Event(True, "prev", (("x", X),)), Event(False, "prev", (("t", t),)),
              Event(True, "layer", (("t", t),)),
              Event(True, "layer.norm", (("c", values["c"]),)), Event(False, "layer.norm", (("n", n),)),
              Event(False, "layer", (("r", r),))]
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "prev", 1: "layer.norm", 2: "layer.norm", 3: "layer"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}) == {1: "layer"}


def test_sizes_the_caller_computed_before_a_call_stay_out_of_it_when_their_reader_moves_in():
    """The root computes positions from x's sizes and hands them to rot, whose Cast of them a strategy left at the
    root. The Cast moves into rot; the sizes it reads go where their readers are, but not into rot: rot took them,
    so they ran before it began."""
    graph, values = _run([
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "last"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["pos"]),
        helper.make_node("Cast", ["pos"], ["pf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "pf"], ["r"]),
        helper.make_node("Sin", ["r"], ["out"]),
    ], X, {"last": np.array(1, dtype=np.int64), "zero": np.array(0, dtype=np.int64),
           "one": np.array(1, dtype=np.int64)})
    events = [Event(True, "rot", (("x", X), ("pos", values["pos"]))), Event(False, "rot", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "", 1: "", 2: "", 3: "", 4: "rot", 5: ""}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}) == {3: "rot"}



def test_a_node_passing_a_result_on_to_a_call_taking_that_very_tensor_stays_on_their_lines():
    """blk.first returns tanh(x); blk.second takes that same tensor. The file reshapes it to its own sizes before
    second's Sin: the Reshape ran after first returned the tensor and before second's result, so in first, in
    second, or in blk between them (the root was waiting on blk all along). A strategy that gave it to another
    module (a block before, reading the same value), or to the root, is off every such line: it goes to blk,
    which holds them all."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Reshape", ["t", "shape"], ["t2"]),
        helper.make_node("Sin", ["t2"], ["s"]),
    ], X, {"shape": np.array([2, 3], dtype=np.int64)})
    t, s = values["t"], values["s"]
    events = [Event(True, "blk", (("x", X),)),
              Event(True, "blk.first", (("x", X),)), Event(False, "blk.first", (("t", t),)),
              Event(True, "blk.second", (("t", t),)), Event(False, "blk.second", (("s", s),)),
              Event(False, "blk", (("s", s),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.between == {1: ("blk.first", "blk.second")}
    constant = constant_nodes(graph)
    for off in ("other", ""):
        assert hold_boundaries({0: "blk.first", 1: off, 2: "blk.second"}, boundaries, constant, {}) == {1: "blk"}
    for kept in ("blk", "blk.first", "blk.second"):
        assert hold_boundaries({0: "blk.first", 1: kept, 2: "blk.second"}, boundaries, constant, {}) == {}


def test_an_integer_tensor_a_call_took_that_no_node_holds_places_no_node():
    """scan takes x and the positions 0, 1, 2, which the file folded into its readers' constants: no node holds
    them. Integers compare exactly, so none of the file's values is that tensor: it places no node, and the call is
    bounded by x and its result (before, an input found nowhere left it unbounded, and the caller's Sin in it)."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Sin", ["t"], ["s"])], X)
    positions = np.arange(3, dtype=np.int64).reshape(1, 3)
    events = [Event(True, "scan", (("x", X), ("p", positions))), Event(False, "scan", (("t", values["t"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "scan" not in boundaries.unbounded
    assert hold_boundaries({0: "scan", 1: "scan"}, boundaries, constant_nodes(graph), {}) == {1: ""}
    # a float tensor found nowhere may be a rounding apart from a node's value: the call stays unbounded
    events = [Event(True, "scan", (("x", X), ("p", positions.astype(np.float32) + 0.1))),
              Event(False, "scan", (("t", values["t"]),))]
    assert "scan" in call_regions(graph, values, events, [X]).unbounded


def test_sizes_computed_from_a_number_handed_to_a_call_and_read_in_it_alone_are_its_own():
    """The caller reads x's last size n and hands it to pos as a tensor of one integer; pos makes the shape
    (2, n) from it and expands a table to it. The Unsqueeze and Concat making that shape are computed from
    the model's input alone, which leaves their place open (a caller may compute sizes for its callee), but they
    read the number after it was handed over and only pos reads them: a caller computing them would have handed
    them over instead. They are pos's; the Shape and Gather giving n stay the caller's."""
    table = np.array([[1.0], [2.0]], dtype=np.float32)
    graph, values = _run([
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "last"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "axis"], ["n1"]),
        helper.make_node("Concat", ["two", "n1"], ["size"], axis=0),
        helper.make_node("Expand", ["table", "size"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["s"]),
    ], X, {"last": np.array(1, dtype=np.int64), "axis": np.array([0], dtype=np.int64),
           "two": np.array([2], dtype=np.int64), "table": table})
    events = [Event(True, "pos", (("n", values["n"]),)), Event(False, "pos", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    moved = hold_boundaries({0: "", 1: "", 2: "", 3: "", 4: "pos", 5: ""}, boundaries, constant_nodes(graph), {})
    assert moved == {2: "pos", 3: "pos"}


def test_a_result_of_one_number_repeated_is_held_by_the_first_node_holding_it_after_the_call_began():
    """branch scales tanh(x) by a weight of zeros (a norm initialised to zero) and returns zeros; the caller adds
    them to x. Zeros equal every tensor of zeros of their shape, so the result told nothing and the call went
    unbounded, leaving the caller's Add in it. The first node holding those zeros after the call began, from which
    every later one is computed, holds it: the call is bounded, and the Add pushed out."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Mul", ["t", "scale"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["z2"]),
    ], X, {"scale": np.zeros(3, dtype=np.float32)})
    events = [Event(True, "branch", (("x", X),)), Event(False, "branch", (("z", values["z"]),)),
              Event(True, "second", (("s", values["s"]),)), Event(False, "second", (("z2", values["z2"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "branch" not in boundaries.unbounded
    regions = {region.module: region for region in boundaries.regions}
    assert regions["branch"].nodes == {0, 1} and regions["second"].nodes == {3}
    moved = hold_boundaries({0: "branch", 1: "branch", 2: "branch", 3: "second"}, boundaries, constant_nodes(graph), {})
    assert moved == {2: ""}


def test_a_result_of_one_number_repeated_is_held_by_a_node_holding_it_within_rounding():
    """gate returns halves (a sigmoid of zeros: 0.5 everywhere); the file's runtime rounded one element a unit in
    the last place below. The caller scales x by them, and a later call, second, returns halves too, exactly.
    Held within rounding, gate's result is the first node holding halves: second's are a later layer's, and
    neither the caller's Mul nor second's nodes are gate's."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Mul", ["t", "zero"], ["z"]),
        helper.make_node("Add", ["z", "half"], ["g"]),
        helper.make_node("Mul", ["x", "g"], ["y"]),
        helper.make_node("Tanh", ["y"], ["t2"]),
        helper.make_node("Mul", ["t2", "zero"], ["z2"]),
        helper.make_node("Add", ["z2", "half"], ["g2"]),
    ], X, {"zero": np.zeros(3, dtype=np.float32), "half": np.full(3, 0.5, dtype=np.float32)})
    recorded = values["g"].copy()
    values["g"][0, 1] = np.nextafter(np.float32(0.5), np.float32(0))
    events = [Event(True, "gate", (("x", X),)), Event(False, "gate", (("g", recorded),)),
              Event(True, "second", (("y", values["y"]),)), Event(False, "second", (("g2", values["g2"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["gate"].nodes == {0, 1, 2}
    moved = hold_boundaries({i: "gate" for i in range(7)}, boundaries, constant_nodes(graph), {})
    assert all(moved.get(i) != "gate" for i in range(3, 7))


def test_zeros_a_call_hands_on_from_a_call_it_made_are_held_where_that_calls_result_is():
    """outer scales tanh(x) by zeros, adds x, and calls inner on it, which returns zeros (its product scaled by
    zeros); outer returns that very tensor. inner is not bounded (what it took is not found), so where its zeros
    lie is not known: outer's result is no node of its own, not the first zeros written after it began (node 1,
    from which inner's are computed through values that tell something). Nothing is pushed out of outer."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Mul", ["t", "zero"], ["z"]),
        helper.make_node("Add", ["z", "x"], ["s"]),
        helper.make_node("MatMul", ["s", "w"], ["p"]),
        helper.make_node("Mul", ["p", "zero"], ["q"]),
    ], X, {"zero": np.zeros(3, dtype=np.float32), "w": np.arange(9, dtype=np.float32).reshape(3, 3)})
    events = [Event(True, "outer", (("x", X),)), Event(True, "outer.inner", (("unfound", 7 * X),)),
              Event(False, "outer.inner", (("q", values["q"]),)), Event(False, "outer", (("q", values["q"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "outer" not in {region.module for region in boundaries.regions}
    moved = hold_boundaries({0: "outer", 1: "outer", 2: "outer", 3: "outer.inner", 4: "outer.inner"}, boundaries,
                            constant_nodes(graph), {})
    assert not any(module == "" for module in moved.values())


def _owning(buffers: bool = False, **tensors: np.ndarray) -> "torch.nn.Module":
    """A module owning ``tensors`` itself: as parameters, or as buffers."""
    import torch

    module = torch.nn.Module()
    for name, value in tensors.items():
        tensor = torch.tensor(value, dtype=torch.float32)
        if buffers:
            module.register_buffer(name, tensor)
        else:
            module.register_parameter(name, torch.nn.Parameter(tensor))
    return module


def test_a_node_between_two_calls_reading_a_parameter_of_one_of_them_alone_ran_in_that_call():
    """norm returns tanh(x) times its weight of ones; mixer takes that very tensor. The product equals tanh(x), so
    the values leave the Mul between the two calls, and the strategy put it in mixer. The exporter merged norm's
    weight with final_norm's (both ones): the Mul reads a weight equal to a parameter of norm's own and of none of
    mixer's or of their caller's, so norm ran it. Where mixer owns an equal parameter too, nothing says which."""
    import torch

    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("Mul", ["h", "ones"], ["n"]),
        helper.make_node("Sin", ["n"], ["m"]),
    ], X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "norm", (("x", X),)), Event(False, "norm", (("n", values["n"]),)),
              Event(True, "mixer", (("n", values["n"]),)), Event(False, "mixer", (("m", values["m"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 1 in boundaries.between

    model = torch.nn.Module()
    model.norm, model.mixer, model.final_norm = _owning(weight=np.ones(3)), _owning(weight=np.ones(4)), \
        _owning(weight=np.ones(3))
    owners = weight_owners(graph, model, {1: {"norm", "mixer", ""}})
    assert owners[1].modules == {"norm"}
    tags = {0: "norm", 1: "mixer", 2: "mixer"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}, owners) == {1: "norm"}
    model.mixer = _owning(weight=np.ones(3))
    owners = weight_owners(graph, model, {1: {"norm", "mixer", ""}})
    assert 1 not in hold_boundaries(tags, boundaries, constant_nodes(graph), {}, owners)


def _pooled_once(extra: bool) -> tuple[onnx.GraphProto, dict[str, np.ndarray]]:
    """tanh(x), averaged over an axis of one position (equal to it), then sin; ``extra``: the mean scaled by a
    constant of ones too (a second node holding the value)."""
    x = X.reshape(2, 3, 1)
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("ReduceMean", ["t"], ["p"], axes=[2], keepdims=1)]
    if extra:
        nodes += [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.ones(1, np.float32))),
                  helper.make_node("Mul", ["p", "one"], ["q"])]
    nodes.append(helper.make_node("Sin", ["q" if extra else "p"], ["r"]))
    return _run(nodes, x)


@pytest.mark.parametrize("inner", [False, True])
def test_a_call_making_no_call_that_returned_a_new_tensor_equal_to_what_it_took_ran_the_one_node_holding_it(inner):
    """block computes tanh(x) and hands it to pool, which averages it over an axis of one position and returns
    the mean: a new tensor equal to what it took. A call that made no call and returned a new tensor computed it
    itself: the one node computed from what it took that holds the value ran in pool. Where pool made a call,
    which of its nodes or its caller's made it is not settled (the values alone cannot say)."""
    graph, values = _pooled_once(extra=False)
    x = X.reshape(2, 3, 1)
    events = [Event(True, "block", (("x", x),)), Event(True, "block.pool", (("t", values["t"]),)),
              *(_handing_back("block.pool.inner", "t", values["t"]) if inner else []),
              Event(False, "block.pool", (("p", values["p"].copy()),)), Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    moved = hold_boundaries({0: "block", 1: "block", 2: "block"}, boundaries, constant_nodes(graph), {})
    assert moved == ({} if inner else {1: "block.pool"})


def test_calls_making_no_call_each_taking_the_new_tensor_the_one_before_returned_ran_its_nodes_in_order():
    """block computes tanh(x); act takes it and returns its mean over an axis of one position, pool takes that and
    returns its mean again: two new tensors, each equal to what its call took, held by the two means in the order
    the calls ran."""
    x = X.reshape(2, 3, 1)
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]),
                          helper.make_node("ReduceMean", ["t"], ["a"], axes=[2], keepdims=1),
                          helper.make_node("ReduceMean", ["a"], ["p"], axes=[2], keepdims=1),
                          helper.make_node("Sin", ["p"], ["r"])], x)
    events = [Event(True, "block", (("x", x),)),
              Event(True, "block.act", (("t", values["t"]),)), Event(False, "block.act", (("a", values["a"].copy()),)),
              Event(True, "block.pool", (("a", values["a"]),)), Event(False, "block.pool", (("p", values["p"].copy()),)),
              Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    assert hold_boundaries({i: "block" for i in range(4)}, boundaries, set(), {}) == {1: "block.act", 2: "block.pool"}


def test_a_node_reading_what_a_call_making_no_call_did_not_take_is_not_that_calls():
    """branch returns zeros, conv returns tanh(x), and norm (folded into conv by the exporter: it runs no node)
    returns a new tensor equal to what it took; block adds the zeros to it. The Add is the one node after conv's
    result holding norm's value, but it reads the zeros, which norm did not take: a call computes from what it
    took, weights and constants alone, so the Add is not norm's."""
    graph, values = _run([helper.make_node("Mul", ["x", "zeros"], ["z"]), helper.make_node("Tanh", ["x"], ["c"]),
                          helper.make_node("Add", ["c", "z"], ["r"])], X, {"zeros": np.zeros(3, np.float32)})
    events = [Event(True, "block", (("x", X),)),
              Event(True, "block.branch", (("x", X),)), Event(False, "block.branch", (("z", values["z"]),)),
              Event(True, "block.conv", (("x", X),)), Event(False, "block.conv", (("c", values["c"]),)),
              Event(True, "block.norm", (("c", values["c"]),)), Event(False, "block.norm", (("n", values["c"].copy()),)),
              Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert all(region.module != "block.norm" for region in boundaries.regions)
    assert 2 not in hold_boundaries({0: "block.branch", 1: "block.conv", 2: "block"}, boundaries, set(), {})


def test_the_node_a_call_making_no_call_ran_is_settled_for_the_calls_enclosing_it():
    """act returns tanh(x); pool hands it to op, which averages it over an axis of one position, and returns a
    new tensor equal to op's result: op made no call and ran the mean, so pool ran it too (not pool or block
    alone)."""
    graph, values = _pooled_once(extra=False)
    x = X.reshape(2, 3, 1)
    events = [Event(True, "block", (("x", x),)), Event(True, "block.act", (("x", x),)),
              Event(False, "block.act", (("t", values["t"]),)), Event(True, "block.pool", (("t", values["t"]),)),
              Event(True, "block.pool.op", (("t", values["t"]),)), Event(False, "block.pool.op", (("p", values["p"]),)),
              Event(False, "block.pool", (("p2", values["p"].copy()),)), Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    assert 1 not in boundaries.unplaced
    assert hold_boundaries({0: "block.act", 1: "block", 2: "block"}, boundaries, constant_nodes(graph), {}) == \
        {1: "block.pool.op"}


@pytest.mark.parametrize("gate", ["pools", "computes", "pads", "weighs", "weighs a copy"])
def test_a_node_a_call_taking_a_new_tensor_equal_to_what_its_maker_took_computed_is_not_the_makers(gate):
    """norm returns a new tensor equal to what it took and ran no node (folded into the layer before it); gate
    takes that tensor and returns sin of a value equal to it, computed from it: tanh(x) * (1 + tanh(x) * 0) (an
    activation of faded values is equal to what it took within rounding), or tanh(x) padded by amounts its code
    computed, all zero. A tensor is made before a call takes it, but gate may have computed an equal one: the
    factor holds no call's value, the amounts were computed after tanh(x) was made, so nothing says norm ran them
    (their tags stay). Where the one node equal to it averages it over an axis of one position, reading nothing
    else (``pools``), or where the nodes read weights (``weighs``: a factor of its own parameter, zeros), norm
    ran them."""
    x = X.reshape(2, 3, 1)
    nodes = [helper.make_node("Tanh", ["x"], ["t"])]
    if gate == "weighs a copy":  # the exporter's copy of an initializer equal to two parameters
        nodes.insert(0, helper.make_node("Identity", ["zeros"], ["zeros copy"]))
    if gate.startswith(("computes", "weighs")):
        nodes += [helper.make_node("Mul", ["t", {"computes": "zero", "weighs": "zeros"}.get(gate, "zeros copy")], ["z"]),
                  helper.make_node("Add", ["z", "one"], ["f"]),
                  helper.make_node("Mul", ["t", "f"], ["p"])]
    elif gate == "pads":
        nodes += [helper.make_node("Constant", [], ["rank2"], value=numpy_helper.from_array(np.array([6], np.int64))),
                  helper.make_node("ConstantOfShape", ["rank2"], ["amounts"],
                                   value=numpy_helper.from_array(np.zeros(1, np.int64))),
                  helper.make_node("Pad", ["t", "amounts"], ["p"])]
    else:
        nodes.append(helper.make_node("ReduceMean", ["t"], ["p"], axes=[2], keepdims=1))
    nodes.append(helper.make_node("Sin", ["p"], ["r"]))
    graph, values = _run(nodes, x, {"zero": np.zeros(1, np.float32), "one": np.ones(1, np.float32),
                                    "zeros": np.zeros((3, 1), np.float32)})
    t = values["t"]
    events = [Event(True, "block", (("x", x),)), Event(True, "block.act", (("x", x),)),
              Event(False, "block.act", (("t", t),)), Event(True, "block.norm", (("t", t),)),
              Event(False, "block.norm", (("n", t.copy()),)), Event(True, "block.gate", (("n", t.copy()),)),
              Event(False, "block.gate", (("r", values["r"]),)), Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    first = 1 if gate == "weighs a copy" else 0  # the node computing tanh(x)
    tags = {i: "block.act" if i <= first else "block.gate" for i in range(len(nodes))}
    moved = hold_boundaries(tags, boundaries, constant_nodes(graph), {})
    normed = {i: "block.norm" for i in range(first + 1, len(nodes) - 1)}
    assert moved == (normed if gate in ("pools", "weighs", "weighs a copy") else {})


def test_a_call_making_no_call_whose_new_tensor_two_nodes_hold_is_not_placed():
    """As above, but block scales the mean by a constant of ones after pool returned it: two nodes computed from
    what pool took hold its value, and the values do not say which pool ran."""
    graph, values = _pooled_once(extra=True)
    x = X.reshape(2, 3, 1)
    events = [Event(True, "block", (("x", x),)), Event(True, "block.pool", (("t", values["t"]),)),
              Event(False, "block.pool", (("p", values["p"].copy()),)), Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    assert all(region.module != "block.pool" for region in boundaries.regions)
    assert hold_boundaries({i: "block" for i in range(5)}, boundaries, constant_nodes(graph), {}) == {}


def test_a_node_passing_on_what_a_call_returned_equal_to_what_it_took_reading_its_parameter_ran_in_it():
    """scale multiplies what first returned by its weight of ones and returns the product, equal to what it took;
    it made a call (handing back what it took), so the Mul is scale's or its caller's, and the values cannot say
    which. It reads a weight equal to scale's own
    parameter (merged with other's, also ones), and the caller owns none: scale ran it."""
    import torch

    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["a"]),
        helper.make_node("Mul", ["a", "ones"], ["s"]),
        helper.make_node("Sin", ["s"], ["r"]),
    ], X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("a", values["a"]),)),
              Event(True, "scale", (("a", values["a"]),)), *_handing_back("scale.inner", "a", values["a"]),
              Event(False, "scale", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.handed_on == {1: {"first", "scale"}} and 1 not in boundaries.between

    model = torch.nn.Module()
    model.first, model.scale, model.other = torch.nn.Tanh(), _owning(weight=np.ones(3)), _owning(weight=np.ones(3))
    owners = weight_owners(graph, model, {1: {"first", "scale", ""}})
    assert hold_boundaries({0: "first", 1: "", 2: ""}, boundaries, constant_nodes(graph), {}, owners) == {1: "scale"}


def test_a_node_computing_what_a_call_returned_equal_from_a_value_no_call_made_yet_reading_its_parameter_ran_in_it():
    """block computes tanh(x) itself; scale, the first call to take it, multiplies it by its weight of ones and
    returns the product, equal to what it took; norm then takes tanh(x) too and block adds the two. When scale
    ended no node was known to hold what it took (no call had returned it): norm's call tells which does, and the
    Mul reading it and holding scale's result is scale's or block's. It reads a weight equal to scale's own
    parameter (and norm's, merged: both ones), block owns none and norm is no candidate: scale ran it."""
    import torch

    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["a"]),
        helper.make_node("Mul", ["a", "ones"], ["s"]),
        helper.make_node("Cos", ["a"], ["n"]),
        helper.make_node("Add", ["s", "n"], ["r"]),
    ], X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "block", (("x", X),)),
              Event(True, "block.scale", (("a", values["a"]),)), *_handing_back("block.scale.inner", "a", values["a"]),
              Event(False, "block.scale", (("s", values["s"]),)),
              Event(True, "block.norm", (("a", values["a"]),)), Event(False, "block.norm", (("n", values["n"]),)),
              Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.handed_on == {1: {"block.scale"}}

    model = torch.nn.Module()
    model.block = torch.nn.Module()
    model.block.scale, model.block.norm = _owning(weight=np.ones(3)), _owning(weight=np.ones(3))
    owners = weight_owners(graph, model, {1: {"block.scale", "block"}})
    moved = hold_boundaries({0: "block", 1: "block.norm", 2: "block.norm", 3: "block"}, boundaries,
                            constant_nodes(graph), {}, owners)
    assert moved == {1: "block.scale"}


def test_a_value_a_call_takes_is_not_held_by_a_node_inside_a_call_that_ended():
    """block computes tanh(x); gate reshapes it for itself and returns sin of that; block then reshapes tanh(x)
    the same way and hands it to experts. Gate's Reshape holds a value equal to what experts took, but it is a node
    inside a call that ended (not its result): experts took block's Reshape, which ran before experts began, so
    it is block's even where experts' own values bound nothing (its input equals two values, neither computed
    from the other)."""
    shape = np.array([3, 2], dtype=np.int64)
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["g"]),
        helper.make_node("Sin", ["g"], ["gs"]),
        helper.make_node("Reshape", ["a", "shape"], ["r"]),
        helper.make_node("Cos", ["r"], ["e"]),
        helper.make_node("Add", ["gs", "e"], ["out"]),
    ], X, {"shape": shape})
    events = [Event(True, "block", (("x", X),)),
              Event(True, "block.gate", (("a", values["a"]),)), Event(False, "block.gate", (("gs", values["gs"]),)),
              Event(True, "block.experts", (("r", values["r"]),)),
              Event(False, "block.experts", (("e", values["e"]),)),
              Event(False, "block", (("out", values["out"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert 3 in boundaries.ran_before["block.experts"]
    moved = hold_boundaries({0: "block", 1: "block.gate", 2: "block.gate", 3: "block.experts", 4: "block.experts",
                             5: "block"}, boundaries, constant_nodes(graph), {})
    assert moved == {3: "block"}


def test_integers_a_call_computes_from_the_elements_of_a_model_input_it_took_ran_in_it():
    """embed takes the token ids, the model's input, counts positions from them (not padding: Equal, Not, Cast,
    CumSum, Mul) and returns its table's rows at those positions. The counting is integer arithmetic computed from
    the model's inputs alone, which exporters may move anywhere; but it reads the ids' elements, not their sizes,
    and only embed reads it: a caller computing it would have handed embed the positions, so embed ran it."""
    ids = np.array([[5, 7, 1, 1], [3, 1, 1, 1]], dtype=np.int64)
    graph, values = _run([
        helper.make_node("Equal", ["x", "pad"], ["m"]),
        helper.make_node("Not", ["m"], ["nm"]),
        helper.make_node("Cast", ["nm"], ["mi"], to=TensorProto.INT64),
        helper.make_node("CumSum", ["mi", "axis"], ["c"]),
        helper.make_node("Mul", ["c", "mi"], ["pos"]),
        helper.make_node("Gather", ["table", "pos"], ["emb"]),
        helper.make_node("Tanh", ["emb"], ["out"]),
    ], ids, {"pad": np.array(1, np.int64), "axis": np.array(1, np.int64),
             "table": np.arange(15, dtype=np.float32).reshape(5, 3) / 7 - 1})
    events = [Event(True, "embed", (("x", ids),)), Event(False, "embed", (("emb", values["emb"]),))]
    boundaries = call_regions(graph, values, events, [ids])
    moved = hold_boundaries({**{i: "" for i in range(5)}, 5: "embed", 6: ""}, boundaries, constant_nodes(graph), {})
    assert moved == {i: "embed" for i in range(5)}


def test_a_call_whose_input_equals_a_value_inside_a_call_that_ended_is_bounded():
    """first computes tanh(x) inside and returns sin of it; the caller computes tanh(x) again and hands it to
    second. second's input equals two values, neither computed from the other: but one is inside first's call,
    which ended without returning it, so it is no later call's input. second took the caller's, and is bounded."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["g0"]),
        helper.make_node("Sin", ["g0"], ["r0"]),
        helper.make_node("Tanh", ["x"], ["g1"]),
        helper.make_node("Cos", ["g1"], ["r1"]),
        helper.make_node("Add", ["r0", "r1"], ["out"]),
    ], X)
    events = [Event(True, "first", (("x", X),)), Event(False, "first", (("r0", values["r0"]),)),
              Event(True, "second", (("g1", values["g1"]),)), Event(False, "second", (("r1", values["r1"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "second" not in boundaries.unbounded
    assert [region.nodes for region in boundaries.regions if region.module == "second"] == [{3}]


def test_a_node_passing_a_result_on_reading_a_buffer_of_the_call_alone_ran_in_it():
    """norm returns tanh(x) plus a shift of zeros computed from its statistics (a buffer of zeros less its mean
    of zeros, broadcast over zeros of the input's size): the Add equals tanh(x), so the values cannot say whether
    norm or its caller added it. It reads a value made from norm's own buffers (merged with other's, also zeros)
    and the caller owns none: norm ran it, and the nodes making the shift from the buffers with it."""
    import torch

    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("Sub", ["shift", "mean"], ["d"]),
        helper.make_node("Shape", ["x"], ["size"]),
        helper.make_node("ConstantOfShape", ["size"], ["z"], value=numpy_helper.from_array(np.zeros(1, np.float32))),
        helper.make_node("Add", ["d", "z"], ["d2"]),
        helper.make_node("Add", ["h", "d2"], ["n"]),
        helper.make_node("Sin", ["n"], ["r"]),
    ], X, {"shift": np.zeros(3, dtype=np.float32), "mean": np.zeros(3, dtype=np.float32)})
    events = [Event(True, "norm", (("x", X),)), Event(False, "norm", (("n", values["n"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.handed_on == {5: {"norm"}}

    model = torch.nn.Module()
    model.norm, model.other = _owning(buffers=True, shift=np.zeros(3)), _owning(buffers=True, shift=np.zeros(3))
    owners = weight_owners(graph, model, {5: {"norm", ""}})
    # what made the shift from the buffers goes with the Add; zeros made from sizes alone say nothing of norm
    assert owners[5].modules == {"norm"} and owners[5].feeding == {1, 4}
    moved = hold_boundaries({0: "norm", **{i: "" for i in range(1, 7)}}, boundaries, constant_nodes(graph), {}, owners)
    assert moved == {1: "norm", 4: "norm", 5: "norm"}


def test_a_node_reading_a_calls_result_made_from_its_weights_reads_the_result_not_the_weights():
    """table returns its weight reshaped (a positional table); the caller casts it to the type it has and adds
    it to tanh(x). The Cast passes table's result on, so table or its caller ran it; what it reads is the value
    table handed out, not table's weight: it stays the caller's."""
    import torch

    graph, values = _run([
        helper.make_node("Reshape", ["w", "shape"], ["p"]),
        helper.make_node("Cast", ["p"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Add", ["t", "c"], ["s"]),
    ], X, {"w": np.arange(6, dtype=np.float32).reshape(1, 6) / 7, "shape": np.array([2, 3], dtype=np.int64)})
    events = [Event(True, "table", ()), Event(False, "table", (("p", values["p"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.handed_on == {1: {"table"}}

    model = torch.nn.Module()
    model.table = _owning(w=np.arange(6, dtype=np.float32).reshape(1, 6) / 7)
    assert weight_owners(graph, model, {1: {"table", ""}}, holding=boundaries.holding) == {}


def test_zeros_a_layer_computes_from_zeros_with_its_weights_are_no_longer_the_result_of_the_call_before():
    """attn returns zeros (its branch scaled by a weight of zeros); dense multiplies them by its weights and adds a
    bias of zeros, so the MatMul holds zeros too, computed from attn's result. Zeros running on through nodes that
    tell nothing place no node (which is the last step is not known), but a product with weights that tell
    something is a layer's step: the first node holding the zeros is attn's result, and the MatMul the strategy
    put into attn is pushed out of it."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Mul", ["t", "scale"], ["z"]),
        helper.make_node("MatMul", ["z", "w"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["q"]),
        helper.make_node("Add", ["q", "x"], ["s"]),
    ], X, {"scale": np.zeros(3, dtype=np.float32), "w": np.arange(9, dtype=np.float32).reshape(3, 3),
           "b": np.zeros(3, dtype=np.float32)})
    events = [Event(True, "attn", (("x", X),)), Event(False, "attn", (("z", values["z"]),)),
              Event(True, "dense", (("z", values["z"]),)), Event(False, "dense", (("q", values["q"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["attn"].nodes == {0, 1}
    moved = hold_boundaries({0: "attn", 1: "attn", 2: "attn", 3: "dense", 4: ""}, boundaries,
                            constant_nodes(graph), {})
    assert 2 in moved and moved[2] != "attn"
    # a graph held without its weights (streamed from the exporter): they are read where they lie
    weights = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    for tensor in graph.initializer:
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
    assert "attn" not in {r.module for r in call_regions(graph, values, events, [X]).regions}
    regions = {r.module: r for r in call_regions(graph, values, events, [X], lambda t: weights[t.name]).regions}
    assert regions["attn"].nodes == {0, 1}


def test_a_value_joined_with_an_empty_one_is_passed_on():
    """block computes tanh(x), then joins to it the rows of an empty selection it transformed (no row selected:
    a branch for tokens of a kind the input has none of), and returns the join, equal to tanh(x). Joining no
    elements passes the value on, so the join and the empty branch may be block's last steps: they are not
    pushed into the next call, which took the join."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Slice", ["x", "zero", "zero", "zero"], ["e"]),
        helper.make_node("Sin", ["e"], ["m"]),
        helper.make_node("Concat", ["t", "m"], ["r"], axis=0),
        helper.make_node("Cos", ["r"], ["s"]),
    ], X, {"zero": np.array([0], dtype=np.int64)})
    assert values["m"].size == 0
    events = [Event(True, "block", (("x", X),)), Event(False, "block", (("r", values["r"]),)),
              Event(True, "next", (("r", values["r"]),)), Event(False, "next", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "block", 1: "block", 2: "block", 3: "block", 4: "next"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}) == {}


def test_a_cast_between_a_layer_returning_a_value_and_the_next_taking_it_goes_to_their_common_ancestor():
    """layers.1 returns tanh(x) and layers.2 takes that very tensor; the file casts it to the type it has (a norm's
    cast to float32, recorded by the exporter though nothing changed) before layers.2's Sin. Either layer may have
    run the cast, and no weight says which: the strategy's layers.1 would put a node of layers.2 in a sibling
    layer, so it goes to the layers' common ancestor. (Between calls that are not two elements of one list, a
    node on either's line is in no sibling layer: the call computing with the cast took it.)"""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Cast", ["t"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Sin", ["c"], ["s"]),
    ], X)
    events = [Event(True, "layers.1", (("x", X),)), Event(False, "layers.1", (("t", values["t"]),)),
              Event(True, "layers.2", (("t", values["t"]),)), Event(False, "layers.2", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    moved = hold_boundaries({0: "layers.1", 1: "layers.1", 2: "layers.2"}, boundaries, constant_nodes(graph), {})
    assert moved == {1: ""}
    renamed = [Event(e.begins, {"layers.1": "embed", "layers.2": "norm"}[e.module], e.values) for e in events]
    boundaries = call_regions(graph, values, renamed, [X])
    assert hold_boundaries({0: "embed", 1: "embed", 2: "norm"}, boundaries, constant_nodes(graph), {}) == {1: "norm"}
    # a node equal to what it read by coincidence (a Relu of a value with no negative element) computes: it stays
    graph, values = _run([
        helper.make_node("Abs", ["x"], ["t"]),
        helper.make_node("Relu", ["t"], ["c"]),
        helper.make_node("Sin", ["c"], ["s"]),
    ], X)
    events = [Event(True, "layers.1", (("x", X),)), Event(False, "layers.1", (("t", values["t"]),)),
              Event(True, "layers.2", (("t", values["t"]),)), Event(False, "layers.2", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert hold_boundaries({0: "layers.1", 1: "layers.1", 2: "layers.2"}, boundaries, constant_nodes(graph), {}) == {}


def test_a_tensor_first_met_after_a_call_ended_was_made_after_it():
    """norm scales x by a weight of ones and returns a value equal to what it took, so its result places nothing
    (it is not bounded). Its caller transposes the result and hands it to lin: lin took a tensor no call had met,
    held by one node, so that node was made after the last call event, norm's end: the Transpose a strategy gave
    to norm (following the value on) is not norm's."""
    graph, values = _run([
        helper.make_node("Mul", ["x", "ones"], ["a"]),
        helper.make_node("Transpose", ["a"], ["t"]),
        helper.make_node("MatMul", ["t", "w"], ["l"]),
    ], X, {"ones": np.ones(3, dtype=np.float32), "w": np.array([[1.0, 2.0], [3.0, -1.0]], dtype=np.float32)})
    events = [Event(True, "norm", (("x", X),)), Event(False, "norm", (("a", values["a"]),)),
              Event(True, "lin", (("t", values["t"]),)), Event(False, "lin", (("l", values["l"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "norm" in boundaries.unbounded and boundaries.ran_after == {"norm": {1}}
    moved = hold_boundaries({0: "norm", 1: "norm", 2: "lin"}, boundaries, constant_nodes(graph), {})
    assert moved == {1: ""}


def test_a_node_read_only_after_a_call_ended_holding_no_shape_it_returned_ran_outside_it():
    """router returns a tensor no node holds (as a vector sorted among equal keys, which two runtimes order
    apart), so it is not bounded. Its caller unsqueezes what it returned, negates that and hands it to lin, which
    took a tensor met for the first time: the Neg ran after router ended. The Unsqueeze is read only there and holds
    a shape router returned no tensor of: a call hands on nothing but its results, so router did not run it. The Mul
    holds a value of the shape router returned: it may be router's result, and stays."""
    graph, values = _run([
        helper.make_node("Mul", ["x", "ones"], ["a"]),
        ints("axes", [1]),
        helper.make_node("Unsqueeze", ["a", "axes"], ["u"]),
        helper.make_node("Neg", ["u"], ["n"]),
        helper.make_node("MatMul", ["n", "w"], ["l"]),
    ], X, {"ones": np.full(3, 2.0, dtype=np.float32), "w": np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 1.0]],
                                                                      dtype=np.float32)})
    events = [Event(True, "router", (("x", X),)), Event(False, "router", (("r", values["a"] + 1),)),
              Event(True, "lin", (("n", values["n"]),)), Event(False, "lin", (("l", values["l"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "router" in boundaries.unbounded and boundaries.ran_after == {"router": {2, 3}}
    moved = hold_boundaries({0: "router", 2: "router", 3: "", 4: "lin"}, boundaries, constant_nodes(graph), {})
    assert moved == {2: ""}


def test_a_call_taking_a_faded_value_is_not_bounded_from_below():
    """The caller scales x by a weight of 1e-40 (activations fading layer after layer) and hands the faded value to
    c. Faded elements tell nothing of where they came from, so no node is known to hold what c took: its region ran
    back to the caller's Mul and pulled it in. The call is not bounded instead."""
    graph, values = _run([
        helper.make_node("Mul", ["x", "tiny"], ["f"]),
        helper.make_node("Add", ["f", "one"], ["g"]),
        helper.make_node("Tanh", ["g"], ["r"]),
    ], X, {"tiny": np.full(3, 1e-40, dtype=np.float32), "one": np.array([1.0, 2.0, 3.0], dtype=np.float32)})
    events = [Event(True, "c", (("f", values["f"]),)), Event(False, "c", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "c" in boundaries.unbounded
    assert hold_boundaries({0: "", 1: "c", 2: "c"}, boundaries, constant_nodes(graph), {}) == {}


def test_zeros_running_on_through_nodes_that_tell_nothing_place_no_node():
    """dense multiplies x by a weight of zeros and adds a bias of zeros: both nodes hold its result (zeros), the
    second computed from the first through nothing but zeros. Which of them is its last step the values cannot
    tell (activations faded to zeros run on so through every layer), so the result places no node and the bias's
    Add is not pushed out of the call."""
    graph, values = _run([
        helper.make_node("MatMul", ["x", "w"], ["z1"]),
        helper.make_node("Add", ["z1", "b"], ["z2"]),
    ], X, {"w": np.zeros((3, 3), dtype=np.float32), "b": np.zeros(3, dtype=np.float32)})
    events = [Event(True, "dense", (("x", X),)), Event(False, "dense", (("z2", values["z2"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert hold_boundaries({0: "dense", 1: "dense"}, boundaries, constant_nodes(graph), {}) == {}


def test_a_mask_computed_from_the_inputs_sizes_before_the_caller_began_stays_out_of_the_call_taking_it():
    """The root computes a mask from x's sizes first (positions above zero), then embed runs, then layer hands the
    mask to attn, whose Where reads it. The boundaries move the Where into attn, and sizes follow their readers, so
    the mask's arithmetic followed it: but attn took the mask, so what computed it ran before attn began, however
    long before (before its caller began too)."""
    graph, values = _run([
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "last"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["positions"]),
        helper.make_node("Greater", ["positions", "zero"], ["m"]),
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Where", ["m", "t", "nought"], ["r"]),
        helper.make_node("Sin", ["r"], ["s"]),
    ], X, {"last": np.array(1, dtype=np.int64), "zero": np.array(0, dtype=np.int64),
           "one": np.array(1, dtype=np.int64), "nought": np.array(0.0, dtype=np.float32)})
    t, m = values["t"], values["m"]
    events = [Event(True, "embed", (("x", X),)), Event(False, "embed", (("t", t),)),
              Event(True, "layer", (("t", t), ("m", m))), Event(True, "layer.attn", (("t", t), ("m", m))),
              Event(False, "layer.attn", (("r", values["r"]),)), Event(False, "layer", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    moved = hold_boundaries({0: "", 1: "", 2: "", 3: "", 4: "embed", 5: "", 6: "layer"}, boundaries,
                            constant_nodes(graph), {})
    assert moved == {5: "layer.attn"}


def test_a_result_of_one_number_repeated_computed_before_a_child_call_is_held_where_it_was_computed():
    """attn computes weights from scores of zeros (each 1/3: one number repeated), then calls proj, and returns
    proj's result beside the weights; the caller combines them and attn2 computes its own weights of 1/3 from
    that. The weights attn returned are the first node holding them after it began, though proj's result came
    later: taken after proj's result, they were attn2's, and the caller's Mul and attn2's nodes went into attn."""
    graph, values = _run([
        helper.make_node("MatMul", ["x", "w0"], ["s"]),
        helper.make_node("Softmax", ["s"], ["w"]),
        helper.make_node("Tanh", ["x"], ["p"]),
        helper.make_node("Mul", ["p", "w"], ["y"]),
        helper.make_node("MatMul", ["y", "w0"], ["s2"]),
        helper.make_node("Softmax", ["s2"], ["w2"]),
    ], X, {"w0": np.zeros((3, 3), dtype=np.float32)})
    events = [Event(True, "attn", (("x", X),)), Event(True, "attn.proj", (("x", X),)),
              Event(False, "attn.proj", (("p", values["p"]),)),
              Event(False, "attn", (("p", values["p"]), ("w", values["w"]))),
              Event(True, "attn2", (("y", values["y"]),)), Event(False, "attn2", (("w2", values["w2"]),))]
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "attn", 1: "attn", 2: "attn.proj", 3: "", 4: "attn2", 5: "attn2"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}) == {}


def _positions_made_again() -> tuple[onnx.GraphProto, dict[str, np.ndarray]]:
    """The caller counts positions from the sizes of tanh(x) (a Range) and hands them to table with it; table adds
    their cast to it, takes the sine and, to place the result, counts positions again from its sizes: two copies
    of the positions, the second computed from the first through table's own nodes."""
    zero, one = np.array(0, np.int64), np.array(1, np.int64)
    return _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("Shape", ["h"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["p"]),
        helper.make_node("Cast", ["p"], ["pf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["pf", "h"], ["a"]),
        helper.make_node("Sin", ["a"], ["e"]),
        helper.make_node("Shape", ["e"], ["s2"]),
        helper.make_node("Gather", ["s2", "one"], ["n2"]),
        helper.make_node("Range", ["zero", "n2", "one"], ["q"]),
        helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["e", "qf"], ["r"]),
    ], X, {"zero": zero, "one": one})


def test_a_copy_of_what_a_call_took_computed_from_another_copy_is_the_calls_own():
    """Which copy of data written for each reader a call took is not known, but one computed from another copy
    (through the sine) was made after it by what its reader computed: table took the first, so the cast, the add
    and the sine ran in table. The positions themselves were made before table began: they are not built for the
    cast reading them (integer arithmetic is written where it is used, but not a value a call took)."""
    graph, values = _positions_made_again()
    events = [Event(True, "", (("x", X),)), Event(True, "table", (("p", values["p"]), ("h", values["h"]))),
              Event(False, "table", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    moved = hold_boundaries({i: "" for i in range(12)}, boundaries, constant_nodes(graph), {})
    assert {4, 5, 6, 11} <= set(moved) and all(moved[i] == "table" for i in moved)
    assert 0 not in moved and 3 not in moved


def test_a_result_no_node_holds_leaves_the_call_bounded_by_the_others_pushing_nothing_out():
    """layer returns tanh(x) and a state the exporter dropped (nothing read it): no node holds the state, so it
    places none, but tanh(x) still bounds the call: the Tanh ran in layer. The sine the caller computed, tagged
    with layer, is not pushed out: what computed the state is not known."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Sin", ["t"], ["r"])], X)
    state = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) + 7
    events = [Event(True, "", (("x", X),)), Event(True, "layer", (("x", X),)),
              Event(False, "layer", (("t", values["t"]), ("state", state))), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "layer" in boundaries.unbounded
    assert hold_boundaries({0: "", 1: "layer"}, boundaries, constant_nodes(graph), {}) == {0: "layer"}


def test_a_view_of_the_models_input_a_call_took_still_goes_with_its_readers():
    """text views the token ids it took (a reshape to their own sizes) and hands the view to emb, which looks the
    ids up: the view holds the model's input run on, which exporters reshape where it is used, so it goes with its
    readers like the sizes it was made from (a value a call took is not built for its reader, but the model's
    input run on is read where it is used)."""
    ids = np.array([[1, 2, 0], [2, 1, 1]], dtype=np.int64)
    table = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    graph, values = _run([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["v"]),
                          helper.make_node("Gather", ["table", "v"], ["e"]), helper.make_node("Tanh", ["e"], ["r"])],
                         ids, {"table": table})
    events = [Event(True, "", (("x", ids),)), Event(True, "text", (("x", ids),)),
              Event(True, "text.emb", (("v", values["v"]),)), Event(False, "text.emb", (("e", values["e"]),)),
              Event(False, "text", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [ids])
    assert boundaries.sizes.get(1) == [2] and boundaries.sizes.get(0) == [2]


def test_a_copy_computed_from_a_copy_written_before_the_last_call_result_may_be_the_one_taken():
    """The caller counts positions from the sizes of tanh(x) before first runs, then, after first returned sin of
    it, adds their cast to that result and counts positions again from the sum's sizes, handing those to table:
    the second copy is computed from the first, but the first was written before the last call result before table
    began, so the second may be the one the caller handed over: the nodes computing it are not pulled into table."""
    zero, one = np.array(0, np.int64), np.array(1, np.int64)
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("Shape", ["h"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["p"]),
        helper.make_node("Cast", ["p"], ["pf"], to=TensorProto.FLOAT),
        helper.make_node("Sin", ["h"], ["g"]),
        helper.make_node("Add", ["pf", "g"], ["a"]),
        helper.make_node("Shape", ["a"], ["s2"]),
        helper.make_node("Gather", ["s2", "one"], ["n2"]),
        helper.make_node("Range", ["zero", "n2", "one"], ["q"]),
        helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["g", "qf"], ["r"]),
    ], X, {"zero": zero, "one": one})
    events = [Event(True, "", (("x", X),)), Event(True, "first", (("h", values["h"]),)),
              Event(False, "first", (("g", values["g"]),)),
              Event(True, "table", (("q", values["q"]), ("g", values["g"]))),
              Event(False, "table", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    moved = hold_boundaries({**{i: "" for i in range(12)}, 5: "first"}, boundaries, constant_nodes(graph), {})
    assert moved.get(11) == "table" and not {6, 7, 8, 9} & set(moved)


@pytest.mark.parametrize("attn_reads", [False, True])
def test_a_node_passing_on_what_a_call_returned_as_a_call_it_made_returned_it_ran_after_it(attn_reads):
    """attn returns the very tensor its proj returned (x times a weight); the layer scales it by a constant of one
    and adds x. attn ran nothing after proj returned it: the Mul ran in proj or after attn ended, never in attn
    alone (the layer's, here). Where attn computed with the scaled value itself (returning tanh of it beside), the
    Mul may be attn's: left as it is."""
    w = np.array([[0.5, -1.0, 0.25], [1.0, 0.5, -0.5], [0.25, 0.75, 1.0]], dtype=np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Mul", ["y", "one"], ["s"])]
    if attn_reads:
        nodes.append(helper.make_node("Tanh", ["s"], ["t"]))
    nodes.append(helper.make_node("Add", ["s", "x"], ["r"]))
    graph, values = _run(nodes, X, {"w": w})
    y = values["y"]
    events = [Event(True, "layer", (("x", X),)), Event(True, "layer.attn", (("x", X),)),
              Event(True, "layer.attn.proj", (("x", X),)), Event(False, "layer.attn.proj", (("y", y),)),
              Event(False, "layer.attn", (("y", y), *((("t", values["t"]),) if attn_reads else ()))),
              Event(False, "layer", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    tags = {0: "layer.attn.proj", 1: "layer.attn", 2: "layer.attn", **({3: "layer.attn"} if attn_reads else {}),
            len(nodes) - 1: "layer"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert moved == ({} if attn_reads else {1: "layer", 2: "layer"})


def test_a_node_passing_on_a_value_made_before_the_call_returning_it_as_its_inner_call_did_stays():
    """attn's pre projects x (weights of zeros added after it: its result is the product again), attn's norm returns
    a new tensor equal to what it took (at its initial weights: not bounded), and attn returns norm's tensor; the
    layer adds x. The Add of zeros holds norm's value, but it ran before norm returned (pre's): nothing moves it
    to the layer."""
    w = np.array([[0.5, -1.0, 0.25], [1.0, 0.5, -0.5], [0.25, 0.75, 1.0]], dtype=np.float32)
    graph, values = _run([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
                          helper.make_node("Add", ["z", "x"], ["r"])], X, {"w": w, "b": np.zeros(3, np.float32)})
    y = values["y"]
    events = [Event(True, "layer", (("x", X),)), Event(True, "layer.attn", (("x", X),)),
              Event(True, "layer.attn.pre", (("x", X),)), Event(False, "layer.attn.pre", (("z", values["z"]),)),
              Event(True, "layer.attn.norm", (("z", values["z"]),)),
              *_handing_back("layer.attn.norm.inner", "z", values["z"]),  # a call it made: no node is settled as its
              Event(False, "layer.attn.norm", (("n", y.copy()),)),
              Event(False, "layer.attn", (("n", y.copy()),)), Event(False, "layer", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    tags = {0: "layer.attn.pre", 1: "layer.attn.pre", 2: "layer"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}).get(1) != "layer"


def test_a_tag_of_a_module_that_never_ran_goes_to_its_nearest_ancestor_that_did_whichever_rule_gave_it():
    """Node 2 is a size read by nodes 0 and 1 alone: it goes where its readers go, their common ancestor. Node 0
    ran between layers.0 returning a tensor and taking it back (tagged off that line: it moves into layers.0), node
    1 is layers.1's, so that ancestor is the list of layers. A list runs no code: the size ran in the list's caller,
    model, where it was."""
    from modelexport_core.export.boundaries import Boundaries

    boundaries = Boundaries([], set(), called={"", "model", "model.layers.0", "model.layers.1", "other"},
                            between={0: ("model.layers.0", "model.layers.0")}, sizes={2: [0, 1]})
    tags = {0: "other", 1: "model.layers.1", 2: "model"}
    assert hold_boundaries(tags, boundaries, set(), {}) == {0: "model.layers.0"}


def test_a_module_called_once_ran_nothing_written_from_the_first_result_of_a_call_begun_after_it_ended():
    """router returns its logits (sin of x) and indices no node of the file holds (computed another way), so it
    bounds nothing: a strategy following its values gave it what the caller computed after it. proj began after
    router ended; its result (tanh) and every node written from it ran after router's call: out of router."""
    graph, values = _run([
        helper.make_node("Sin", ["x"], ["logits"]),
        helper.make_node("Tanh", ["x"], ["p"]),
        helper.make_node("Mul", ["p", "logits"], ["mixed"]),
        helper.make_node("Cos", ["mixed"], ["out"]),
    ], X)
    indices = np.array([3, 1, 4, 1, 5], dtype=np.int64)  # no node holds these
    events = [Event(True, "", (("x", X),)),
              Event(True, "router", (("x", X),)),
              Event(False, "router", (("logits", values["logits"]), ("indices", indices))),
              Event(True, "proj", (("x", X),)), Event(False, "proj", (("p", values["p"]),)),
              Event(False, "", (("out", values["out"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "router" in boundaries.unbounded and boundaries.ended_before["router"] == 1
    moved = hold_boundaries({0: "router", 1: "proj", 2: "router", 3: "router"}, boundaries, set(), {})
    assert moved == {2: "", 3: ""}


def test_a_node_inside_a_region_of_a_call_it_made_ran_in_that_call_whatever_ran_on_after_it():
    """attn takes relu(x) and a mask; its child idx returns tanh of the first; attn combines the mask with a mask it
    computes from that result that masks nothing (all true), which equals the mask it took, and selects by it. The
    mask may have been taken at either node, but the child's region holds the tanh: the child ran it, within attn;
    and attn's result was computed from the nodes computing from the tanh: they ran after the child began and
    before attn ended, in attn. Neither is left open between attn and its caller."""
    graph, values = _run([
        helper.make_node("Relu", ["x"], ["h"]),
        helper.make_node("Greater", ["x", "zero"], ["m"]),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("Greater", ["t", "five"], ["z"]),
        helper.make_node("Not", ["z"], ["nz"]),
        helper.make_node("And", ["m", "nz"], ["m2"]),
        helper.make_node("Where", ["m2", "t", "minus"], ["o"]),
    ], X, {"zero": np.zeros(1, dtype=np.float32), "five": np.full(1, 5, dtype=np.float32),
           "minus": np.full(1, -1, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)),
              Event(True, "attn", (("h", values["h"].copy()), ("m", values["m"].copy()))),
              Event(True, "attn.idx", (("h", values["h"]),)), Event(False, "attn.idx", (("t", values["t"]),)),
              Event(False, "attn", (("o", values["o"]),)), Event(False, "", (("o", values["o"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["attn.idx"].nodes == {2} and regions["attn"].nodes >= {2, 3, 4, 5, 6}
    assert not boundaries.unplaced
    moved = hold_boundaries({0: "", 1: "", 2: "", 3: "", 4: "", 5: "", 6: "attn"}, boundaries, set(), {})
    assert moved == {2: "attn.idx", 3: "attn", 4: "attn", 5: "attn"}


def test_counts_handed_to_a_call_as_a_list_were_computed_before_it_with_the_floats_they_were_summed_from():
    """The caller counts the positive elements of each column (a mask, as floats, cast to integers and summed)
    and hands the counts to experts as a list of numbers, with another tensor: the counts, in order, are one
    value; it and what computed it from nothing experts took, written before the tensor experts took, ran before
    experts began."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Greater", ["t", "zero"], ["g"]),
        helper.make_node("Cast", ["g"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["f"], ["c"], to=TensorProto.INT64),
        helper.make_node("ReduceSum", ["c", "axis"], ["counts"], keepdims=0),
        helper.make_node("Sin", ["t"], ["s"]),
        helper.make_node("Cast", ["counts"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["s", "cf"], ["o"]),
    ], X, {"zero": np.zeros(1, dtype=np.float32), "axis": np.zeros(1, dtype=np.int64)})
    counts = tuple(float(v) for v in values["counts"])
    events = [Event(True, "", (("x", X),)),
              Event(True, "experts", (("s", values["s"].copy()),), numbers=counts),
              Event(False, "experts", (("o", values["o"]),)), Event(False, "", (("o", values["o"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.ran_before["experts"] >= {1, 2, 3, 4}
    moved = hold_boundaries({0: "", 1: "experts", 2: "experts", 3: "experts", 4: "experts", 5: "", 6: "experts",
                             7: "experts"}, boundaries, set(), {})
    assert moved == {1: "", 2: "", 3: "", 4: ""}


def test_a_node_reading_a_slice_of_a_weight_and_a_weight_two_modules_own_ran_in_the_module_owning_both():
    """The exporter wrote a positional table less its first row, and that first row, as two weights of their own;
    a node adds both (through a concatenation) to a value. The table's module owns a tensor holding the first as a
    run of its elements and a tensor equal to the second; a norm owns a bias equal to the second alone (zeros):
    the table's module ran the node, and what made the value it read from those weights."""
    import torch

    table = np.arange(12, dtype=np.float32).reshape(1, 4, 3) / 10
    graph, values = _run([
        helper.make_node("Concat", ["first", "rest"], ["full"], axis=0),
        helper.make_node("Reshape", ["full", "shape"], ["positions"]),
        helper.make_node("Add", ["x", "positions"], ["a"]),
    ], np.ones((4, 3), dtype=np.float32), {"first": table[0, :1].copy(), "rest": table[0, 1:].copy(),
                                          "shape": np.array([4, 3], dtype=np.int64)})
    model = torch.nn.Module()
    model.embeddings = _owning(positions=table, token=table[0, :1].reshape(1, 1, 3))
    model.norm = _owning(bias=table[0, :1].reshape(3))
    owners = weight_owners(graph, model, {2: {"embeddings", "norm", ""}})
    assert owners[2].modules == {"embeddings"} and owners[2].feeding == {0, 1}
    model.embeddings = _owning(token=table[0, :1].reshape(1, 1, 3))  # without the table: the first row alone
    assert weight_owners(graph, model, {2: {"embeddings", "norm", ""}})[2].modules == {"embeddings", "norm"}


def test_a_node_no_holder_of_a_calls_result_was_computed_from_ran_outside_a_call_returning_what_it_took():
    """norm scales what it took by ones (at its initial weights), so it returns a new tensor equal to it and bounds
    nothing; its caller transposes the result, calls gate on what norm took, and hands the transpose to mix. The
    transpose is no node holding norm's result, nor is any such node computed from it: exporters drop what nothing
    reads, so norm did not run it."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["h"]), helper.make_node("Mul", ["h", "ones"], ["n"]),
                          helper.make_node("Transpose", ["n"], ["t"]), helper.make_node("Cos", ["h"], ["g"]),
                          helper.make_node("Sin", ["t"], ["m"])],
                         X, {"ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "norm", (("h", values["h"].copy()),)),
              Event(False, "norm", (("n", values["n"]),)), Event(True, "gate", (("h", values["h"]),)),
              Event(False, "gate", (("g", values["g"]),)), Event(True, "mix", (("t", values["t"]),)),
              Event(False, "mix", (("m", values["m"]),)), Event(False, "", (("m", values["m"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "norm" in boundaries.unbounded and 2 not in boundaries.feeding_results["norm"]
    moved = hold_boundaries({0: "", 1: "norm", 2: "norm", 3: "gate", 4: "mix"}, boundaries, constant_nodes(graph), {})
    assert moved == {2: ""}


def test_a_node_passing_the_value_on_that_reads_sizes_of_a_value_the_call_did_not_take_ran_before_it():
    """The caller pads tanh(x) by one column and reshapes the padded value to the sizes it reads of tanh(x) before
    the padding (one column more): the reshape passes the value on unchanged, and attn takes it. attn was handed no
    numbers and not the unpadded value, so it could read none of that value's sizes: the reshape ran before it,
    in the caller."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["a"]), ints("pads", [0, 0, 0, 1]),
        helper.make_node("Pad", ["a", "pads"], ["p"]), helper.make_node("Shape", ["a"], ["s"]),
        ints("i0", [0]), helper.make_node("Gather", ["s", "i0"], ["n0"]),
        ints("i1", [1]), helper.make_node("Gather", ["s", "i1"], ["n1"]),
        ints("one", [1]), helper.make_node("Add", ["n1", "one"], ["w"]),
        helper.make_node("Concat", ["n0", "w"], ["shape"], axis=0), helper.make_node("Reshape", ["p", "shape"], ["r"]),
        helper.make_node("Sin", ["r"], ["out"]),
    ], X)
    events = [Event(True, "", (("x", X),)), Event(True, "attn", (("r", values["r"].copy()),)),
              Event(False, "attn", (("out", values["out"]),)), Event(False, "", (("out", values["out"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["attn"].nodes == {12} and 11 not in regions["attn"].unsure
    moved = hold_boundaries({i: "attn" if i else "" for i in range(13)}, boundaries, constant_nodes(graph), {})
    assert moved.get(11) == "" and moved.get(2) == ""
    # so where a call attn made took that tensor first (the reshape is then known to pass it on): attn took it too
    events[2:2] = [Event(True, "attn.qkv", (("r", values["r"]),)), Event(False, "attn.qkv", (("out", values["out"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert all(11 not in region.unsure for region in boundaries.regions)
    moved = hold_boundaries({i: "attn" if i else "" for i in range(13)}, boundaries, constant_nodes(graph), {})
    assert moved.get(11) == ""


def test_a_call_taking_sizes_alone_ran_no_node_measuring_a_tensor_or_computing_it():
    """The caller measures its own tensor (tanh(x) doubled) and hands pe one of the sizes, as a tensor of one
    integer (as an exporter's trace makes it); pe scales a table by it. pe took no tensor of floats, so it read
    no size: the Shape, and the nodes computing what it measured, ran before it, in the caller."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["a"]), helper.make_node("Add", ["a", "a"], ["b"]),
        helper.make_node("Shape", ["b"], ["s"]), helper.make_node("Gather", ["s", "one"], ["g"]),
        helper.make_node("Cast", ["g"], ["f"], to=TensorProto.FLOAT), helper.make_node("Mul", ["f", "table"], ["r"]),
    ], X, {"one": np.array(1, dtype=np.int64), "table": np.array([1.0, 2.0, 4.0], dtype=np.float32)})
    events = [Event(True, "", (("x", X),)), Event(True, "pe", (("g", values["g"].copy()),)),
              Event(False, "pe", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert not {0, 1, 2} & (regions["pe"].nodes | regions["pe"].unsure)
    moved = hold_boundaries({i: "pe" for i in range(6)}, boundaries, constant_nodes(graph), {})
    assert {moved.get(i) for i in (0, 1, 2)} == {""} and 5 not in moved


def test_a_call_taking_the_models_integer_input_reads_sizes_of_what_it_computed_from_it():
    """enc takes the model's token ids (no node holds an input of the model), embeds them and scales the embedding
    by its width: the Shape measuring the embedding is enc's own, computed from what it took."""
    ids = np.array([[0, 1], [1, 0]], dtype=np.int64)
    graph, values = _run([
        helper.make_node("Gather", ["table", "x"], ["e"]), helper.make_node("Shape", ["e"], ["s"]),
        helper.make_node("Gather", ["s", "two"], ["g"]), helper.make_node("Cast", ["g"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["e", "f"], ["r"]),
    ], ids, {"table": np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]], dtype=np.float32),
             "two": np.array(2, dtype=np.int64)})
    events = [Event(True, "", (("x", ids),)), Event(True, "enc", (("x", ids),)),
              Event(False, "enc", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [ids])
    regions = {region.module: region for region in boundaries.regions}
    assert {1, 2, 3, 4} <= regions["enc"].nodes
    assert not hold_boundaries({i: "enc" for i in range(5)}, boundaries, constant_nodes(graph), {})


def _capped() -> tuple[onnx.GraphProto, dict[str, np.ndarray]]:
    """tanh(x); that cast to its own type; halved and doubled again (a cap that caps nothing: equal to it), then
    sin of it."""
    two = np.float32(2.0)
    return _run([helper.make_node("Tanh", ["x"], ["t"]),
                 helper.make_node("Cast", ["t"], ["u"], to=TensorProto.FLOAT),
                 helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(two)),
                 helper.make_node("Div", ["u", "two"], ["d"]),
                 helper.make_node("Mul", ["d", "two"], ["e"]),
                 helper.make_node("Sin", ["e"], ["s"])], X)


def test_a_call_making_no_call_ran_the_node_computing_its_equal_result_not_the_cast_before_it():
    """block computes tanh(x), casts it to the type it has (the very tensor: a cast returns it) and hands it to cap,
    which halves and doubles it and returns the product, a new tensor equal to what it took. The cast holds that
    value too but reads nothing other than the value: it passed the value on and computed none of it. The product,
    computed from it through a value that is not it, is the one node making cap's result: cap ran it and the
    halving, not the cast."""
    graph, values = _capped()
    events = [Event(True, "block", (("x", X),)),
              Event(True, "block.cap", (("t", values["t"]),)), Event(False, "block.cap", (("e", values["e"]),)),
              Event(False, "block", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    moved = hold_boundaries({i: "block" for i in range(6)}, boundaries, constant_nodes(graph), {})
    assert moved.get(3) == moved.get(4) == "block.cap"
    assert 1 not in moved


def test_nodes_a_call_making_no_call_ran_are_settled_inside_the_call_that_made_it():
    """block computes tanh(x) and hands it to act, which casts it to the type it has and hands it to cap: cap
    halves and doubles it, returning a new tensor equal to what it took; act returns sin of that. Read from act's
    values alone, the product may pass on what act took (its caller's, before act began); but cap, which act
    called, computed it: the halving and the product ran in cap, within act."""
    graph, values = _capped()
    events = [Event(True, "block", (("x", X),)),
              Event(True, "block.act", (("t", values["t"]),)),
              Event(True, "block.act.cap", (("t", values["t"]),)), Event(False, "block.act.cap", (("e", values["e"]),)),
              Event(False, "block.act", (("s", values["s"]),)), Event(False, "block", (("s", values["s"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert not {3, 4} & boundaries.unplaced
    moved = hold_boundaries({0: "block", **dict.fromkeys(range(1, 6), "block.act")}, boundaries,
                            constant_nodes(graph), {})
    assert moved.get(3) == moved.get(4) == "block.act.cap"


@pytest.mark.parametrize(("owned", "weight"), [(True, [0.5, -0.25, 0.75]), (False, [0.5, -0.25, 0.75]),
                                               (True, [0.5, 0.5, 0.5])])
def test_a_call_runs_no_node_reading_the_weights_of_a_module_off_its_line(owned, weight):
    """first returns tanh(x) transposed; second transposes it back, adds its weight and takes it away again, and
    transposes the difference again (the exporter cancelled the transposes): no node holds what first returned, but
    second's result equals it. Read from the values alone, first ran second's sum too; but that node reads a weight
    of second alone, which first, neither within second nor its caller, cannot have read: the values settle nothing
    about first, and its region is not taken (first is left unbounded). A weight of one number repeated names no
    owner (it equals part of many a module's bias): it settles nothing against the values."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Add", ["t", "w"], ["a"]),
                          helper.make_node("Sub", ["a", "w"], ["m"]),
                          helper.make_node("Transpose", ["m"], ["r"], perm=[1, 0])],
                         X, {"w": np.array(weight, np.float32)})
    events = [Event(True, "", (("x", X),)),
              Event(True, "first", (("x", X),)), Event(False, "first", (("f", values["t"].T.copy()),)),
              Event(True, "second", (("f", values["t"].T.copy()),)), Event(False, "second", (("s", values["r"]),)),
              Event(False, "", (("s", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X], owned={1: "second", 2: "second"} if owned else None)
    rejected = owned and len(set(weight)) > 1
    assert any(region.module == "first" and 1 in region.nodes for region in boundaries.regions) is not rejected
    assert ("first" in boundaries.unbounded) is rejected


def test_a_tensor_equal_to_a_model_input_that_is_another_tensor_was_made_before_the_call_took_it():
    """The model takes x and a weighting of twos; it computes sin(x), cuts the weighting to x's length (a slice starting at
    minus that length, equal to the whole mask) and hands both to conv, which multiplies the sine by the cut and
    returns tanh of that. The cut equals the weighting the model was given but is another tensor: made before conv
    took it, by the one node holding it, with the size arithmetic feeding that node. They stay the caller's; conv
    casts the cut and multiplies."""
    from onnx.reference import ReferenceEvaluator

    mask = np.full((1, 3), 2, dtype=np.int64)
    nodes = [helper.make_node("Sin", ["x"], ["h"]),
             helper.make_node("Shape", ["x"], ["length"], start=1), helper.make_node("Neg", ["length"], ["start"]),
             ints("end", [9]), ints("axis", [1]),
             helper.make_node("Slice", ["mask", "start", "end", "axis"], ["cut"]),
             helper.make_node("Cast", ["cut"], ["scale"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["h", "scale"], ["y"]), helper.make_node("Tanh", ["y"], ["r"])]
    outputs = [name for node in nodes for name in node.output]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 3])],
                              [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None) for name in outputs])
    found = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])).run(
        None, {"x": X, "mask": mask})
    values = dict(zip(outputs, found))
    events = [Event(True, "", (("x", X), ("mask", mask))),
              Event(True, "conv", (("h", values["h"]), ("cut", values["cut"]))),
              Event(False, "conv", (("r", values["r"]),)),
              Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X, mask])
    tags = {0: "", 1: "", 2: "", 3: "", 4: "", 5: "", 6: "", 7: "", 8: "conv"}
    moved = hold_boundaries(tags, boundaries, constant_nodes(graph), made_for_readers(graph, constant_nodes(graph)))
    assert moved == {6: "conv", 7: "conv"}


def test_a_tensor_a_call_running_nodes_returned_is_not_held_by_a_node_written_before_it_began():
    """embed returns tanh(x); block0 transposes it, hands it to inner (which scales it by its weights) and returns
    the transpose back of what it took plus inner's result scaled by 1e-6: equal to what embed returned within
    rounding, and held by no node (the exporter cancelled the two transposes, as block1's, which takes it and
    returns sin of it). block0 ran nodes, so the tensor it returned was made after it began: the node holding
    embed's result does not hold it, block1's call is not bounded by it, and block0's scaling and sum stay
    block0's (not the next layer's)."""
    weights = {"w": np.array([[0.7], [-1.3], [0.4]], np.float32), "small": np.array([1e-6], np.float32)}
    nodes = [helper.make_node("Tanh", ["x"], ["e"]), helper.make_node("Transpose", ["e"], ["et"]),
             helper.make_node("Mul", ["et", "w"], ["c"]), helper.make_node("Mul", ["c", "small"], ["s"]),
             helper.make_node("Add", ["et", "s"], ["a"]), helper.make_node("Sin", ["a"], ["b"]),
             helper.make_node("Transpose", ["b"], ["r"])]
    graph, values = _run(nodes, X, weights)
    returned = values["a"].T.copy()
    events = [Event(True, "embed", (("x", X),)), Event(False, "embed", (("e", values["e"]),)),
              Event(True, "block0", (("e", values["e"]),)),
              Event(True, "block0.inner", (("et", values["et"]),)), Event(False, "block0.inner", (("c", values["c"]),)),
              Event(False, "block0", (("a.T", returned),)),
              Event(True, "block1", (("a.T", returned),)), Event(False, "block1", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert all(region.module != "block1" for region in boundaries.regions)
    tags = {0: "embed", 1: "block0", 2: "block0.inner", 3: "block0", 4: "block0", 5: "block1", 6: "block1"}
    moved = hold_boundaries(tags, boundaries, constant_nodes(graph), {})
    assert not any(moved.get(i, tags[i]).startswith("block1") for i in range(5))


def test_a_call_casting_what_it_took_leaves_a_cast_of_a_result_a_call_it_made_returned_to_that_call():
    """block casts what it took to the type it has, scales it and hands it to attn, which computes softmax of it,
    casts that to the type it has (softmax in float32, cast back), hands it to drop (which returns it as it is) and
    returns sin of the cast beside the softmax; block returns both. block casting what it took says nothing about a
    cast of a tensor attn made and returned to it: the cast stays attn's."""
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["tc"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["tc", "w"], ["u"]),
             helper.make_node("Softmax", ["u"], ["p"]), helper.make_node("Cast", ["p"], ["pc"], to=TensorProto.FLOAT),
             helper.make_node("Sin", ["pc"], ["o"])]
    graph, values = _run(nodes, X, {"w": np.array([0.7, -1.3, 0.4], np.float32)})
    p = values["p"]
    events = [Event(True, "embed", (("x", X),)), Event(False, "embed", (("t", values["t"]),)),
              Event(True, "block", (("t", values["t"]),)), Event(True, "block.attn", (("u", values["u"]),)),
              Event(True, "block.attn.drop", (("p", p),)), Event(False, "block.attn.drop", (("p", p),)),
              Event(False, "block.attn", (("o", values["o"]), ("p", p))),
              Event(False, "block", (("o", values["o"]), ("p", p)))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.cast_back.get(4) != "block"
    tags = {0: "embed", 1: "block", 2: "block", 3: "block.attn", 4: "block.attn", 5: "block.attn"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}).get(4, "block.attn") == "block.attn"


def _merged_size(size_at: int) -> tuple[dict[int, str], Boundaries]:
    """A size (node ``size_at``) read by a node of layers.0 (4) and one of layers.1 (7): the exporter merged the
    second read into the first. encoder's call began after node 1 (it took that node's value) and kept nodes 2-8
    but the size; layers.0 kept 2 and 4 (it began after 1), layers.1 kept 6 and 7 (after 5). A strategy tagged
    nodes 2-8 encoder and the size encoder too; the regions move the readers into their layers."""
    regions = [CallRegion("encoder", set(range(2, 9)) - {size_at}, span=(2, 8), began=1),
               CallRegion("encoder.layers.0", {2, 4}, span=(2, 4), began=1),
               CallRegion("encoder.layers.1", {6, 7}, span=(6, 7), began=5)]
    boundaries = Boundaries(regions, set(), called={"", "encoder", "encoder.layers.0", "encoder.layers.1"},
                            sizes={size_at: [4, 7]})
    return {0: "", 1: "", **{i: "encoder" for i in range(2, 9)}}, boundaries


def test_a_size_two_layers_read_written_while_the_first_ran_is_the_first_layers():
    """Written at 3, between two nodes layers.0 kept, the size ran while layers.0 ran (exporters write nodes in
    the order they ran, and keep the first of two equal reads): it is layers.0's, not the common module of its
    readers (encoder.layers, a list never called, so encoder), though layers.1 reads it too."""
    tags, boundaries = _merged_size(3)
    assert hold_boundaries(tags, boundaries, set(), {}).get(3) == "encoder.layers.0"


def test_a_size_written_before_every_call_of_its_readers_module_began_is_out_of_it():
    """Written at 0, before encoder's call began (after node 1), the size ran before it: not in encoder, where its
    readers' common module would put it, but in the root, whose call was running."""
    tags, boundaries = _merged_size(0)
    tags[0] = "encoder"
    assert hold_boundaries(tags, boundaries, set(), {}).get(0) == ""


def test_constants_that_ran_before_every_call_of_a_layer_ran_before_every_call_within_it():
    """Constants (0) and a node (1) that computed what every call of encoder.layer took ran before each of them
    began, so before every call of its attention too: out of both, wherever a strategy placed them in the layer."""
    boundaries = Boundaries([], set(), ran_before={"encoder.layer": {0, 1}})
    tags = {0: "encoder.layer.attention", 1: "encoder.layer.attention", 2: "encoder.layer.attention"}
    assert hold_boundaries(tags, boundaries, {0}, {}) == {0: "encoder", 1: "encoder"}


def _table_computed_again() -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """encoder computes a table of sines from constants amid its own work and scales what it took by it; decoder
    computes the same table again and hands it, with encoder's result, to its layer, which adds the two."""
    def table(suffix: str) -> list[onnx.NodeProto]:
        return [helper.make_node("Range", ["start", "n", "step"], [f"ids{suffix}"]),
                helper.make_node("Cast", [f"ids{suffix}"], [f"f{suffix}"], to=TensorProto.FLOAT),
                helper.make_node("Sin", [f"f{suffix}"], [f"table{suffix}"])]

    graph, values = _run([
        helper.make_node("Relu", ["x"], ["a"]), *table(""), helper.make_node("Mul", ["a", "table"], ["e"]),
        *table("2"), helper.make_node("Add", ["e", "table2"], ["out"]),
    ], X, {"start": np.array(1), "n": np.array(4), "step": np.array(1)})
    e, out = values["e"], values["out"]
    events = [Event(True, "", (("x", X),)), Event(True, "encoder", (("x", X),)), Event(False, "encoder", (("e", e),)),
              Event(True, "decoder", (("e", e),)),
              Event(True, "decoder.layer", (("e", e), ("table", values["table2"].copy()))),
              Event(False, "decoder.layer", (("out", out),)), Event(False, "decoder", (("out", out),)),
              Event(False, "", (("out", out),))]
    return graph, events, values


def test_of_equal_tables_a_call_took_none_computed_amid_a_call_that_ended():
    """The file holds the table twice: the first copy was computed amid encoder's call (between its first node and
    its result), so it is encoder's own and no later call took it. The layer took the second, so that copy and what
    computed it ran before the layer began: in decoder, not in the layer a strategy put them in."""
    graph, events, values = _table_computed_again()
    boundaries = call_regions(graph, values, events, [X])
    constant = constant_nodes(graph)
    assert {5, 6, 7} <= constant and {5, 6, 7} <= boundaries.ran_before["decoder.layer"]
    tags = {i: "encoder" for i in range(5)} | {5: "decoder.layer", 6: "decoder.layer", 7: "decoder.layer",
                                              8: "decoder.layer"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert {i: moved.get(i) for i in (5, 6, 7)} == {5: "decoder", 6: "decoder", 7: "decoder"}


def _positions_measured(embed_key: str) -> tuple[onnx.GraphProto, list[Event], dict[str, np.ndarray]]:
    """x -> relu, returned by pre; then embed is handed x (under ``embed_key``: the model's own tensor where it is
    "x") and counts positions along its rows (Shape, Gather, Range: integers from x's sizes alone), adding them
    to what it took."""
    graph, values = _run([
        ints("axis", 1), ints("zero", 0), ints("step", 1), helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "axis"], ["n"]),
        helper.make_node("Range", ["zero", "n", "step"], ["p"]),
        helper.make_node("Cast", ["p"], ["pf"], to=helper.np_dtype_to_tensor_dtype(X.dtype)),
        helper.make_node("Add", ["x", "pf"], ["r"]), helper.make_node("Mul", ["a", "r"], ["y"]),
    ], X)
    events = [Event(True, "", (("x", X),)), Event(True, "pre", (("x", X),)), Event(False, "pre", (("a", values["a"]),)),
              Event(True, "embed", ((embed_key, X.copy()),)), Event(False, "embed", (("r", values["r"]),)),
              Event(False, "", (("y", values["y"]),))]
    return graph, events, values


@pytest.mark.parametrize("embed_key, moves", [("x", True), ("a view of x", False)])
def test_sizes_of_a_model_input_a_call_took_itself_read_within_it_alone_are_its_own(embed_key, moves):
    """embed measured the model's input it was handed: the sizes (4-6), written after pre's result and read by
    embed's cast alone, go into embed though no reader moved. Handed a view of x (another tensor, equal), embed may
    have been given what its caller measured: they stay."""
    graph, events, values = _positions_measured(embed_key)
    boundaries = call_regions(graph, values, events, [X], input_names=["x"])
    constant = constant_nodes(graph)
    tags = {i: "" for i in range(len(graph.node))} | {3: "pre", 7: "embed", 8: "embed"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    assert {i: moved.get(i) for i in (4, 5, 6)} == ({4: "embed", 5: "embed", 6: "embed"} if moves
                                                    else {4: None, 5: None, 6: None})


def test_an_empty_tensor_a_call_takes_right_after_its_caller_began_was_made_by_the_caller():
    """The root hands x to layer; layer's own code computes m from it, cuts no row out of m (a boolean index that
    selects nothing) and hands that empty tensor to norm, its first call. An empty tensor is equal to every other
    of its shape and type, and the first written after the nodes holding what layer took is the one: the cut ran
    in layer, though a strategy gave it to the root."""
    graph, values = _run([helper.make_node("Sin", ["x"], ["m"]), ints("zero", [0]), ints("axis", [0]),
                          helper.make_node("Slice", ["m", "zero", "zero", "axis"], ["e"]),
                          helper.make_node("Relu", ["e"], ["n"]), helper.make_node("Tanh", ["m"], ["y"])], X)
    assert values["e"].shape == (0, X.shape[1])
    events = [Event(True, "", (("x", X),)), Event(True, "layer", (("x", X),)),
              Event(True, "layer.norm", (("e", values["e"]),)), Event(False, "layer.norm", (("n", values["n"]),)),
              Event(False, "layer", (("y", values["y"]),)), Event(False, "", (("y", values["y"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.shaped_within.get(3) == "layer"
    tags = {0: "", 1: "", 2: "", 3: "", 4: "layer.norm", 5: "layer"}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}).get(3) == "layer"


def test_windows_one_window_covers_are_cut_by_the_caller_not_the_call_taking_them():
    """block pads norm's result by amounts computed from its sizes (all zero) and cuts it into windows by those
    sizes (one window covers the map): the windows equal norm's result, but they are a tensor no call returned,
    and the node holding norm's result holds that one. The windows are held where they were cut, so the padding, the
    cut and the sizes they read are block's; attn, and the inner call that took the windows first, ran none of
    them, and the cut bounds them both (the sizes it reads are of a tensor neither took)."""
    nodes = [helper.make_node("Tanh", ["x"], ["n"]),  # block.norm
             helper.make_node("Shape", ["n"], ["sh"]),
             helper.make_node("Sub", ["sh", "sh"], ["z"]),
             helper.make_node("Concat", ["z", "z"], ["pads"], axis=0),
             helper.make_node("Pad", ["n", "pads"], ["p"]),
             helper.make_node("Reshape", ["p", "sh"], ["r"]),
             helper.make_node("Sin", ["r"], ["s"]),  # block.attn.inner
             helper.make_node("Mul", ["s", "two"], ["o"])]  # block.attn
    graph, values = _run(nodes, X, {"two": np.full(3, 2.0, np.float32)})
    r = values["r"]
    events = [Event(True, "block", (("x", X),)),
              Event(True, "block.norm", (("x", X),)), Event(False, "block.norm", (("n", values["n"]),)),
              Event(True, "block.attn", (("r", r),)), Event(True, "block.attn.inner", (("r", r),)),
              Event(False, "block.attn.inner", (("s", values["s"]),)),
              Event(False, "block.attn", (("o", values["o"]),)), Event(False, "block", (("o", values["o"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["block.attn"].unsure == regions["block.attn.inner"].unsure == set()
    constant = constant_nodes(graph)
    tags = {0: "block.norm", **{i: "block.attn" for i in (1, 2, 3, 4, 5, 7)}, 6: "block.attn.inner"}
    assert hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant)) == \
        {i: "block" for i in range(1, 6)}


def test_a_split_holds_every_part_it_makes():
    """block splits x in two; a takes the first part, b the second, and b casts it to the type it has (a norm
    computing in float32) before its sine. The split holds both parts: that it holds the part a took does not
    say b took its part from the cast, so b's cast stays b's."""
    x = np.concatenate([X, X[::-1] * 0.5], axis=1)
    nodes = [helper.make_node("Split", ["x"], ["s0", "s1"], axis=1),
             helper.make_node("Tanh", ["s0"], ["t"]),  # block.a
             helper.make_node("Cast", ["s1"], ["c"], to=TensorProto.FLOAT),  # block.b
             helper.make_node("Sin", ["c"], ["n"]),  # block.b
             helper.make_node("Add", ["t", "n"], ["r"])]
    graph, values = _run(nodes, x)
    events = [Event(True, "block", (("x", x),)),
              Event(True, "block.a", (("s0", values["s0"]),)), Event(False, "block.a", (("t", values["t"]),)),
              Event(True, "block.b", (("s1", values["s1"]),)), Event(False, "block.b", (("n", values["n"]),)),
              Event(False, "block", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [x])
    constant = constant_nodes(graph)
    tags = {0: "block", 1: "block.a", 2: "block.b", 3: "block.b", 4: "block"}
    assert 2 not in hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))


ROW = np.array([[0.5, -1.5, 2.5]], dtype=np.float32)


@pytest.mark.parametrize("weight", [True, False])
def test_a_weight_a_call_took_is_held_by_no_node(weight):
    """interp takes a weight equal to the row repeated (the exporter wrote the row alone) and returns a new tensor of
    that value, expanded to the sizes of x (which the caller read). No node computes a weight: the node holding that
    value is interp's result, and interp is bounded. Where what it took is not a weight but a tensor code made, equal
    to its result, interp may have handed it back: it is not bounded."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Shape", ["x"], ["s"]),
                          helper.make_node("Expand", ["row", "s"], ["w2"]), helper.make_node("Add", ["a", "w2"], ["c"])],
                         X, {"row": ROW})
    taken = np.repeat(ROW, 2, axis=0)
    events = [Event(True, "", (("x", X),)), Event(True, "first", (("x", X),)),
              Event(False, "first", (("a", values["a"]),)),
              Event(True, "interp", (("W", taken),), (), frozenset({"W"} if weight else ())),
              Event(False, "interp", (("w2", values["w2"]),)), Event(False, "", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    if weight:
        assert regions["interp"].nodes == {2} and "interp" not in boundaries.unbounded
    else:
        assert "interp" in boundaries.unbounded


def test_a_result_of_one_number_repeated_is_held_before_what_later_calls_took_was_made():
    """interp takes a weight of zeros and returns zeros expanded to the sizes of x; the caller adds them to first's
    result and hands that to second, and later computes zeros of its own (x minus x). Of the nodes holding zeros,
    interp's result was written before the node that made what second took (one of those holding its value)."""
    zeros = np.zeros((1, 3), dtype=np.float32)
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Shape", ["x"], ["s"]),
                          helper.make_node("Expand", ["zero", "s"], ["w2"]), helper.make_node("Add", ["a", "w2"], ["c"]),
                          helper.make_node("Sub", ["x", "x"], ["z"]), helper.make_node("Tanh", ["c"], ["t"]),
                          helper.make_node("Concat", ["t", "z"], ["u"], axis=0)], X, {"zero": zeros})
    events = [Event(True, "", (("x", X),)), Event(True, "first", (("x", X),)),
              Event(False, "first", (("a", values["a"]),)),
              Event(True, "interp", (("W", np.zeros((2, 3), dtype=np.float32)),), (), frozenset({"W"})),
              Event(False, "interp", (("w2", values["w2"]),)),
              Event(True, "second", (("c", values["c"]),)), Event(False, "second", (("t", values["t"]),)),
              Event(False, "", (("u", values["u"]),))]
    boundaries = call_regions(graph, values, events, [X])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["interp"].nodes == {2} and "interp" not in boundaries.unbounded
    assert regions["second"].nodes == {5}


def test_what_computed_a_node_that_ran_before_a_call_ran_before_it_and_before_the_calls_it_made():
    """The caller expands a constant mask of zeros (its sizes computed from constants) and hands it to second, which
    hands it to inner. The expand moves nothing, so its value equals the mask's: it ran before second (a tensor
    second took, new to it, passing an earlier value on). So did the sizes it read, and so neither they nor the
    expand went into inner, although inner's nodes alone read them."""
    graph, values = _run([helper.make_node("Relu", ["x"], ["a"]),
                          helper.make_node("Constant", [], ["z"],
                                           value=numpy_helper.from_array(np.zeros((2, 3), np.float32))),
                          ints("shape", [2, 3]), helper.make_node("Abs", ["shape"], ["sizes"]),
                          helper.make_node("Expand", ["z", "sizes"], ["m"]),
                          helper.make_node("Concat", ["a", "m"], ["s"], axis=0), helper.make_node("Tanh", ["s"], ["t"]),
                          helper.make_node("Neg", ["t"], ["r"])], X)
    taken = (("a", values["a"]), ("m", values["m"]))
    events = [Event(True, "", (("x", X),)), Event(True, "first", (("x", X),)),
              Event(False, "first", (("a", values["a"]),)), Event(True, "second", taken),
              Event(True, "second.inner", taken), Event(False, "second.inner", (("t", values["t"]),)),
              Event(False, "second", (("r", values["r"]),)), Event(False, "", (("r", values["r"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert {2, 3, 4} <= boundaries.ran_before["second"]
    constant = constant_nodes(graph)
    tags = {0: "first", 1: "", 2: "", 3: "", 4: "", 5: "second.inner", 6: "second.inner", 7: "second"}
    assert hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant)) == {}


@pytest.mark.parametrize("owned", [True, False])
def test_a_node_reading_a_weight_of_a_call_made_inside_holds_none_of_the_callers_own_new_tensors(owned):
    """block takes tanh(x); mixer scales it, ref adds its own tiny weight to it (a norm at its initial statistics:
    a new tensor equal to what it took); block subtracts ref's result from mixer's, scales the difference by a
    tiny weight of its own and adds that to what it took (a new tensor equal to it again), which after takes.
    block's result equals the value ref's node holds, but that node reads ref's weight: ref ran it, so block's own
    code made its result after, by the add computed from it; after ran none of block's nodes. Without owners the
    values do not tell the two apart."""
    graph, values = _run([helper.make_node("Tanh", ["x"], ["h"]), helper.make_node("Mul", ["h", "wm"], ["m"]),
                          helper.make_node("Add", ["h", "wr"], ["r"]), helper.make_node("Sub", ["m", "r"], ["d"]),
                          helper.make_node("Mul", ["d", "ws"], ["s"]), helper.make_node("Add", ["h", "s"], ["y"]),
                          helper.make_node("Sin", ["y"], ["z"])],
                         X, {"wm": np.array([2.0, 3.0, 4.0], np.float32),
                             "wr": np.array([1e-9, -2e-9, 3e-9], np.float32),
                             "ws": np.array([1e-9, 2e-9, -1e-9], np.float32)})
    assert np.array_equal(values["r"], values["h"]) and np.array_equal(values["y"], values["h"])
    events = [Event(True, "", (("x", X),)), Event(True, "block", (("h", values["h"]),)),
              Event(True, "block.mixer", (("h", values["h"]),)), Event(False, "block.mixer", (("m", values["m"]),)),
              Event(True, "block.ref", (("h", values["h"]),)), Event(False, "block.ref", (("r", values["r"].copy()),)),
              Event(False, "block", (("y", values["y"].copy()),)),
              Event(True, "after", (("y", values["y"].copy()),)), Event(False, "after", (("z", values["z"]),)),
              Event(False, "", (("z", values["z"]),))]
    boundaries = call_regions(graph, values, events, [X],
                              owned={1: "block.mixer", 2: "block.ref", 4: "block"} if owned else None)
    after = {i for region in boundaries.regions if region.module == "after" for i in region.nodes}
    block = {i for region in boundaries.regions if region.module == "block" for i in region.nodes}
    assert (5 in block and not {3, 4, 5} & after) is owned


SHIFT = np.array([1e-8, -2e-8, 3e-8], dtype=np.float32)


def _scaled_norm(scale: float, rounded: bool) -> tuple[onnx.GraphProto, dict[str, np.ndarray], list[Event]]:
    """conv returns tanh(x); norm scales it by ``scale`` and adds its shift (:data:`SHIFT`); mixer takes norm's
    result. ``rounded``: norm's result as PyTorch computed it, off by rounding from each node holding it."""
    graph, values = _run([
        helper.make_node("Tanh", ["x"], ["h"]),
        helper.make_node("Mul", ["h", "scale"], ["s"]),
        helper.make_node("Add", ["s", "shift"], ["n"]),
        helper.make_node("Sin", ["n"], ["m"]),
    ], X, {"scale": np.full(3, scale, dtype=np.float32), "shift": SHIFT})
    normed = (values["h"] + values["n"]) / 2 if rounded else values["n"]
    events = [Event(True, "", (("x", X),)),
              Event(True, "conv", (("x", X),)), Event(False, "conv", (("h", values["h"]),)),
              Event(True, "norm", (("h", values["h"]),)), Event(False, "norm", (("n", normed),)),
              Event(True, "mixer", (("n", normed),)), Event(False, "mixer", (("m", values["m"]),)),
              Event(False, "", (("m", values["m"]),))]
    return graph, values, events


def test_what_computed_the_data_a_node_of_one_call_read_ran_in_that_call_where_it_may_have():
    """conv returns tanh(x); norm scales it by a constant just under one (computed from its statistics, equal to
    no parameter) and adds its own shift, returning a new tensor equal to what it took; mixer takes that very
    tensor. The values leave the scaling and the shift between the calls. The shift reads norm's own bias, so norm
    ran it, and so did the scaling that computed the data it read: norm took tanh(x), held by conv's node, not the
    scaled value; not the node holding tanh(x), which norm took. Where the owner is their caller, a call it made may
    have run the scaling: it stays."""
    import torch

    graph, values, events = _scaled_norm(0.9999995, rounded=True)
    boundaries = call_regions(graph, values, events, [X])
    assert {1, 2} <= set(boundaries.between) | set(boundaries.handed_on)
    tags = {0: "conv", 1: "", 2: "mixer", 3: "mixer"}
    open_in = {1: {"norm", "mixer", ""}, 2: {"norm", "mixer", ""}}
    model = torch.nn.Module()
    model.conv, model.norm, model.mixer = _owning(weight=np.ones(4)), _owning(bias=SHIFT), _owning(weight=np.ones(4))
    owners = weight_owners(graph, model, open_in)
    assert owners[2].modules == {"norm"} and owners[2].computing == {1}
    assert hold_boundaries(tags, boundaries, constant_nodes(graph), {}, owners) == {1: "norm", 2: "norm"}
    # the node holding what norm took made it before norm began, even where the values leave it open too (a
    # layer's last add, equal to what a scale of ones after it returns): the walk stops there
    assert 0 in boundaries.took["norm"]
    open_too = {**open_in, 0: {"conv", "norm", ""}}
    assert weight_owners(graph, model, open_too, took=boundaries.took)[2].computing == {1}
    assert weight_owners(graph, model, open_too)[2].computing == {0, 1}
    model.norm = _owning(weight=np.ones(4))
    model.register_parameter("shift", torch.nn.Parameter(torch.from_numpy(SHIFT.copy())))
    owners = weight_owners(graph, model, open_in)
    assert owners[2].modules == {""} and owners[2].computing == set()


def test_a_value_read_inside_a_branch_is_read_by_the_node_holding_that_branch():
    """A constant read only by the bodies of an If (an outer value the branch captures, as exporters write a
    dynamic repeat) is made for that If: where the If goes, it goes, not out of every call for want of a reader."""
    then_branch = helper.make_graph([helper.make_node("Tile", ["a", "reps"], ["t"], name="tile")], "then", [],
                                    [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", ["a"], ["e"], name="same")], "else", [],
                                    [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Constant", [], ["reps"], name="reps", value=numpy_helper.from_array(np.array([1, 2]))),
        helper.make_node("Constant", [], ["cond"], name="cond", value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["cond"], ["b"], name="if", then_branch=then_branch, else_branch=else_branch),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    constant = constant_nodes(graph)
    made_for = made_for_readers(graph, constant)
    assert made_for[1] == [3]
    boundaries = call_regions(graph, {}, [], [])
    boundaries.regions.append(CallRegion("outer", {0, 3}))
    moved = hold_boundaries({0: "inner", 1: "inner", 2: "inner", 3: "inner"}, boundaries, constant, made_for)
    assert moved[1] == "outer" == moved[3]


@pytest.mark.parametrize("caller_takes", ["the callee's result", "the view"])
def test_a_view_a_call_took_that_its_caller_was_not_handed_ran_in_the_caller(caller_takes):
    """``first`` ends with a squeeze and a transpose; ``second`` begins with a transpose and an unsqueeze and hands
    the view to ``second.inner``. The exporter cancelled the two transposes, so no node holds what ``second`` took,
    and the unsqueeze, equal to ``first``'s tanh, is left open between ``second.inner`` and its caller: ``second``
    was not handed that view, so it made it. Where ``second`` was handed the view itself, its caller made it."""
    x = np.array([[[0.5, -1.0, 2.0]], [[1.5, 0.25, -3.0]]], dtype=np.float32)
    graph, values = _run([helper.make_node("Tanh", ["x"], ["a"]), helper.make_node("Squeeze", ["a", "one"], ["q"]),
                          helper.make_node("Unsqueeze", ["q", "one"], ["u"]), helper.make_node("Sin", ["u"], ["s"]),
                          helper.make_node("Cos", ["s"], ["c"])], x, {"one": np.array([1], dtype=np.int64)})
    returned = ("r", values["q"].T.copy())
    taken = returned if caller_takes == "the callee's result" else ("u", values["u"].copy())
    events = [Event(True, "", (("x", x),)), Event(True, "first", (("x", x),)), Event(False, "first", (returned,)),
              Event(True, "second", (taken,)), Event(True, "second.inner", (("u", values["u"].copy()),)),
              Event(False, "second.inner", (("s", values["s"]),)), Event(False, "second", (("c", values["c"]),)),
              Event(False, "", (("c", values["c"]),))]
    boundaries = call_regions(graph, values, events, [x])
    assert 2 in boundaries.unplaced  # the values alone leave it open
    moved = hold_boundaries({0: "first", 1: "first", 2: "", 3: "second.inner", 4: "second"}, boundaries, set(), {})
    assert moved == ({2: "second"} if caller_takes == "the callee's result" else {})


def test_a_size_read_before_a_call_ended_is_no_later_calls():
    """The caller reads x's first size, calls ``first``, then hands the size to ``second`` as a plain number;
    ``second`` halves it and shapes what it took by it. The call's values pull ``second``'s nodes in, and sizes
    follow their readers, but the read is written before ``first``'s result: it ran before ``second`` began, so it
    stays the caller's, though only ``second``'s code reads it (without the rule it went into ``second``)."""
    graph, values = _run([helper.make_node("Shape", ["x"], ["s"]), ints("i", 0),
                          helper.make_node("Gather", ["s", "i"], ["h"]), helper.make_node("Tanh", ["x"], ["t"]),
                          ints("two", 2), helper.make_node("Div", ["h", "two"], ["d"]), ints("axes", [0]),
                          helper.make_node("Unsqueeze", ["d", "axes"], ["u"]), ints("rest", [-1]),
                          helper.make_node("Concat", ["u", "rest"], ["shape"], axis=0),
                          helper.make_node("Reshape", ["t", "shape"], ["r"]), helper.make_node("Sin", ["r"], ["y"])],
                         X)
    events = [Event(True, "", (("x", X),)), Event(True, "first", (("x", X),)), Event(False, "first", (("t", values["t"]),)),
              Event(True, "second", (("t", values["t"]),)), Event(False, "second", (("y", values["y"]),)),
              Event(False, "", (("y", values["y"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.began_after == {"second": 3}
    tags = {0: "", 1: "", 2: "", 3: "first", **{i: "" for i in range(4, 12)}}  # the passes left it all to the caller
    moved = hold_boundaries(tags, boundaries, constant_nodes(graph), made_for_readers(graph, constant_nodes(graph)))
    assert moved.get(11) == "second" and not {i for i in moved if i <= 2}, moved


def test_a_node_computing_with_a_weight_made_no_tensor_a_call_took_however_equal():
    """As above, with norm's scale exactly one (a frozen norm at its initial statistics, its scale folded by the
    exporter into one weight): the scaling passes tanh(x) on unchanged in value, yet norm took conv's very tensor,
    and a node computing with a weight makes a new one. So the walk from norm's shift does not stop at the scaling:
    norm ran both (before, the scaling was taken for the node holding what norm took, and left to the caller)."""
    import torch

    graph, values, events = _scaled_norm(1.0, rounded=False)
    boundaries = call_regions(graph, values, events, [X])
    assert boundaries.took["norm"] == {0}
    model = torch.nn.Module()
    model.conv, model.norm, model.mixer = _owning(weight=np.ones(4)), _owning(bias=SHIFT), _owning(weight=np.ones(4))
    open_in = {0: {"conv", "norm", ""}, 1: {"norm", "mixer", ""}, 2: {"norm", "mixer", ""}}
    owners = weight_owners(graph, model, open_in, took=boundaries.took)
    assert owners[2].modules == {"norm"} and owners[2].computing == {1}
    moved = hold_boundaries({0: "conv", 1: "", 2: "mixer", 3: "mixer"}, boundaries, constant_nodes(graph), {}, owners)
    assert moved == {1: "norm", 2: "norm"}


def _biased_then_scaled() -> tuple[onnx.GraphProto, dict[str, np.ndarray], list[Event]]:
    """proj multiplies x by its weight and adds its bias of zeros; scale multiplies proj's result by its weight of
    ones; head takes scale's result. Each returns a new tensor, the last two equal to what they took."""
    graph, values = _run([
        helper.make_node("MatMul", ["x", "w"], ["p"]),
        helper.make_node("Add", ["p", "bias"], ["y"]),
        helper.make_node("Mul", ["y", "ones"], ["s"]),
        helper.make_node("Sin", ["s"], ["m"]),
    ], X, {"w": np.arange(9, dtype=np.float32).reshape(3, 3) / 7, "bias": np.zeros(3, dtype=np.float32),
           "ones": np.ones(3, dtype=np.float32)})
    events = [Event(True, "", (("x", X),)),
              Event(True, "proj", (("x", X),)), Event(False, "proj", (("y", values["y"]),)),
              Event(True, "scale", (("y", values["y"]),)), Event(False, "scale", (("s", values["s"]),)),
              Event(True, "head", (("s", values["s"]),)), Event(False, "head", (("m", values["m"]),)),
              Event(False, "", (("m", values["m"]),))]
    return graph, values, events


def test_a_node_computing_with_a_weight_of_the_call_that_returned_the_tensor_made_that_tensor():
    """scale took proj's very tensor. proj's bias add passes the product on unchanged in value and computes with a
    weight, yet that weight equals proj's own bias: proj's call ran it before scale began, and it holds what scale
    took. A weight equal to no parameter of proj (or of no module known) leaves the add out, as a node computing
    with a weight makes a new tensor."""
    graph, values, events = _biased_then_scaled()
    weighing = {1: {"proj", "elsewhere.proj"}}
    assert call_regions(graph, values, events, [X], weighing=weighing).took["scale"] == {0, 1}
    assert call_regions(graph, values, events, [X], weighing={1: {"elsewhere.proj"}}).took["scale"] == {0}
    assert call_regions(graph, values, events, [X]).took["scale"] == {0}


def test_a_result_run_on_before_the_calls_last_result_ran_in_the_call():
    """settle returns exp(x), then normalized again and again after it settled (two nodes each passing the value
    on unchanged), and sin(x), written after both: nodes are written as they ran, so the repeats ran in settle's
    call, the last of them holding what it returned; they join its region, not left unsure for its caller."""
    graph, values = _run([
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node("Relu", ["e"], ["r1"]),
        helper.make_node("Relu", ["r1"], ["r2"]),
        helper.make_node("Sin", ["x"], ["o"]),
        helper.make_node("Mul", ["r2", "o"], ["z"]),
    ], X)
    events = [Event(True, "", (("x", X),)),
              Event(True, "settle", (("x", X),)),
              Event(False, "settle", (("comb", values["e"]), ("other", values["o"]))),
              Event(False, "", (("z", values["z"]),))]
    boundaries = call_regions(graph, values, events, [X])
    (region,) = [region for region in boundaries.regions if region.module == "settle"]
    assert {0, 1, 2, 3} <= region.nodes and not region.unsure & {1, 2}
    moved = hold_boundaries({0: "settle", 1: "", 2: "", 3: "settle", 4: ""}, boundaries, constant_nodes(graph), {})
    assert moved == {1: "settle", 2: "settle"}


def test_a_repeat_of_the_node_holding_a_result_is_no_other_value_the_call_returned():
    """inner returns exp(x) + sin(x) and its code computes that sum once more (an exporter that does not merge equal
    values writes it twice): the second node repeats the first (one operator, the same inputs), so it holds no
    value apart from the first's and inner is bounded, its result at the first. Two equal values computed apart
    (a sum and a product that happen to agree) still leave it unsettled."""
    graph, values = _run([
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node("Sin", ["x"], ["s"]),
        helper.make_node("Add", ["e", "s"], ["r1"]),
        helper.make_node("Add", ["e", "s"], ["r2"]),
        helper.make_node("Mul", ["r1", "r2"], ["z"]),
    ], X)
    events = [Event(True, "", (("x", X),)),
              Event(True, "inner", (("x", X),)), Event(False, "inner", (("r", values["r1"]),)),
              Event(False, "", (("z", values["z"]),))]
    boundaries = call_regions(graph, values, events, [X])
    assert "inner" not in boundaries.unbounded
    (region,) = [region for region in boundaries.regions if region.module == "inner"]
    assert 2 in region.nodes
    apart, _ = _run([
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node("Sin", ["x"], ["s"]),
        helper.make_node("Add", ["e", "s"], ["r1"]),
        helper.make_node("Sum", ["e", "s"], ["r2"]),
        helper.make_node("Mul", ["r1", "r2"], ["z"]),
    ], X)
    assert "inner" in call_regions(apart, values, events, [X]).unbounded

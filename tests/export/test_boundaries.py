"""Call boundaries (``modelexport_core.export.boundaries``) on a four-node graph built by hand, with its values
and the calls that ran: each call's region, the nodes a value runs on unchanged through, what is not settled,
and the tags moved in and out."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelexport_core.export.boundaries import (
    Event,
    call_regions,
    constant_nodes,
    hold_boundaries,
    made_for_readers,
)

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


def test_an_input_passed_on_unchanged_is_the_first_of_its_run():
    graph, values, x = _graph()
    # second takes a new tensor equal to a and to a2 (a plus zero): it took a, or a2 in its own code
    boundaries = call_regions(graph, values, _events(values, x, second_takes=("a2", "a copy")), [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["second"].nodes == {2} and regions["second"].unsure == {1}


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
    assert "second" in boundaries.unbounded
    assert all(region.module != "second" for region in boundaries.regions)

"""Call boundaries: the values each module call took and returned bound where its nodes lie.

The unit tests build a four-node graph by hand with its values and the calls that ran; the model tests export
small models whose parameter-free modules and caller-side ops parameters and data flow alone leave open (a
pooling mixer, a residual wrapper around a sequence, a caller transposing what its child returned), and hold
every recorded node to PyTorch's record.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn
from usage_based_support import assert_every_recorded_node, measure_case

from modelexport_usage_based.boundaries import (
    Event,
    call_regions,
    constant_nodes,
    hold_boundaries,
    made_for_readers,
)


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


@pytest.mark.unit
def test_a_calls_region_runs_from_what_it_took_to_what_it_returned():
    graph, values, x = _graph()
    boundaries = call_regions(graph, values, _events(values, x), [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["first"].nodes == {0} and regions["second"].nodes == {2}
    assert regions[""].nodes == {0, 1, 2, 4}  # the constant is left to the other passes
    # the zero added changes nothing: the first call's result may end before or after it
    assert regions["first"].unsure == {1} and regions["second"].unsure == {1}
    assert boundaries.unbounded == set()


@pytest.mark.unit
def test_tags_move_into_the_call_that_ran_them_and_out_of_calls_that_did_not():
    graph, values, x = _graph()
    boundaries = call_regions(graph, values, _events(values, x), [x])
    constant = constant_nodes(graph)
    tags = {0: "", 1: "", 2: "first", 3: "second", 4: "second"}
    moved = hold_boundaries(tags, boundaries, constant, made_for_readers(graph, constant))
    # Relu in; Tanh out of first and into second; Mul out of second, and the constant read by Mul alone with it
    assert moved == {0: "first", 2: "second", 4: "", 3: ""}


@pytest.mark.unit
def test_an_input_passed_on_unchanged_is_the_first_of_its_run():
    graph, values, x = _graph()
    # second takes a new tensor equal to a and to a2 (a plus zero): it took a, or a2 in its own code
    boundaries = call_regions(graph, values, _events(values, x, second_takes=("a2", "a copy")), [x])
    regions = {region.module: region for region in boundaries.regions}
    assert regions["second"].nodes == {2} and regions["second"].unsure == {1}


@pytest.mark.unit
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


@pytest.mark.unit
def test_a_call_returning_what_it_took_is_not_bounded():
    graph, values, x = _graph()
    events = _events(values, x)
    events[4] = Event(False, "second", (("second result", values["a"].copy()),))  # returns a value equal to its input
    boundaries = call_regions(graph, values, events, [x])
    assert "second" in boundaries.unbounded
    assert all(region.module != "second" for region in boundaries.regions)


class Pooling(nn.Module):
    """A parameter-free token mixer: pooling less its input."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)

    def forward(self, x):
        return self.pool(x) - x


class PoolingBlock(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.norm1 = nn.GroupNorm(1, channels)
        self.mixer = Pooling()
        self.norm2 = nn.GroupNorm(1, channels)
        self.fc1 = nn.Conv2d(channels, 2 * channels, 1)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(2 * channels, channels, 1)
        for norm in (self.norm1, self.norm2):  # trained norms: neither weight one nor bias zero
            nn.init.uniform_(norm.weight, 0.5, 1.5)
            nn.init.uniform_(norm.bias, -0.5, 0.5)

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class PoolingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.blocks = nn.Sequential(PoolingBlock(), PoolingBlock())
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Residual(nn.Module):
    """Adds what the wrapped sequence computes to its input: no parameter of its own."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x) + x


class ResidualMixer(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 4, 4), nn.GELU(), nn.BatchNorm2d(channels))
        self.blocks = nn.Sequential(*[
            nn.Sequential(
                Residual(nn.Sequential(nn.Conv2d(channels, channels, 3, groups=channels, padding=1), nn.GELU(),
                                       nn.BatchNorm2d(channels))),
                nn.Conv2d(channels, channels, 1), nn.GELU(), nn.BatchNorm2d(channels),
            )
            for _ in range(2)
        ])
        self.head = nn.Linear(channels, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Inner(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x)


class TransposingCaller(nn.Module):
    """Works on its child's result in its own forward: transposes, scales, squashes, transposes back."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.inner = Inner(width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        y = self.inner(x).transpose(1, 2)
        return self.out(torch.tanh(y * 2).transpose(1, 2))


class TwoCallers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = TransposingCaller()
        self.b = TransposingCaller()

    def forward(self, x):
        return self.b(self.a(x))


CASES = {
    "pooling_mixer": (PoolingNet, lambda: {"x": torch.randn(2, 3, 16, 16)}),
    "residual_wrapper": (ResidualMixer, lambda: {"x": torch.randn(2, 3, 16, 16)}),
    "caller_works_on_childs_result": (TwoCallers, lambda: {"x": torch.randn(2, 5, 8)}),
}


@pytest.mark.parametrize("name", CASES)
def test_every_recorded_node_gets_the_recorded_module(name, tmp_path):
    assert_every_recorded_node(measure_case(CASES, name, tmp_path))

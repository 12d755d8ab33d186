"""The parts on their own: discovery, parameter matching, sharing out, the module tree, failures."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from modelexport_core import get_strategy, make_context
from modelexport_core.errors import ModelMismatchError
from modelexport_core.plugin.strategy import StrategyFailed
from modelexport_usage_based.assignment import min_cost_assignment
from modelexport_usage_based.module_tree import ModuleTree
from modelexport_usage_based.parameters import ParameterIndex
from modelexport_usage_based.strategy import UsageBasedStrategy

pytestmark = pytest.mark.unit  # the fast tier, run first

SOURCE = Path(__file__).parents[1] / "src" / "modelexport_usage_based"
MODEL_WORDS = re.compile(
    r"\b(bert|gpt2?|llama|vit|resnet|t5|roberta|qwen|embeddings?|encoder|decoder|pooler|attention)\b", re.IGNORECASE
)


def test_discovered_through_its_entry_point():
    info = get_strategy("usage_based")
    assert info.distribution == "modelexport-usage-based"
    assert info.strategy is UsageBasedStrategy
    assert info.priority == 50


def test_source_names_no_model_architecture():
    for path in SOURCE.glob("*.py"):
        assert not MODEL_WORDS.search(path.read_text()), path.name


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(3, 4)
        self.second = torch.nn.Linear(3, 4, bias=False)
        with torch.no_grad():
            self.second.weight.copy_(self.first.weight)
            self.first.bias.copy_(torch.arange(4.0))
        self.register_buffer("steps", torch.arange(5))


def test_parameters_match_by_value_as_stored_or_transposed():
    model = Pair()
    index = ParameterIndex(model)
    weight = model.first.weight.detach().numpy()
    assert index.owners(weight).modules == {"first", "second"}
    assert index.owners(np.ascontiguousarray(weight.T)).modules == {"first", "second"}
    assert index.owners(np.arange(4.0, dtype=np.float32)).modules == {"first"}
    assert index.owners(np.arange(5)).modules == {""}  # a buffer of the root
    assert index.owners(np.ones((3, 4), dtype=np.float32)) is None


def test_a_parameter_viewed_with_axes_of_one_is_matched_by_its_elements():
    """An exporter folding ``scale.reshape(-1, 1, 1)`` (a per-channel scale broadcast over an image) stores the
    same elements in another shape; a parameter held with axes of one is found from its elements alone."""
    model = Pair()
    model.token = torch.nn.Parameter(torch.arange(1.0, 5.0).reshape(1, 1, 4))
    index = ParameterIndex(model)
    assert index.owners(np.arange(4.0, dtype=np.float32).reshape(4, 1, 1)).modules == {"first"}
    assert index.owners(np.arange(1.0, 5.0, dtype=np.float32)).modules == {""}
    assert index.owners(np.arange(4.0, dtype=np.float32).reshape(2, 2)) is None  # other axes: another tensor


class Norms(torch.nn.Module):
    """Two norms' weights of one number each: ones, and zeros applied as ``1 + weight``."""

    def __init__(self):
        super().__init__()
        self.plain, self.offset = torch.nn.LayerNorm(4), torch.nn.LayerNorm(4)
        torch.nn.init.zeros_(self.offset.weight)


def test_a_tensor_of_one_number_may_be_any_such_parameter_plus_a_constant():
    """An exporter folds ``1 + weight`` of a weight of zeros into a tensor of ones, equal to another norm's weight of
    ones: unnamed, where the file does not hold the weight of zeros, its value does not say which; named after a
    parameter it equals, it is that one; where the file holds every tensor of one number, it is the one equal."""
    model = Norms()
    index = ParameterIndex(model)
    ones, zeros = np.ones(4, dtype=np.float32), np.zeros(4, dtype=np.float32)
    held = index.owners(ones).covers | index.owners(zeros).covers  # every tensor of the model, as it is
    assert index.owners(ones, "", held).modules == {"plain"}
    assert index.owners(ones, "", index.owners(ones).covers).modules == {"plain", "offset"}  # no zeros held
    assert index.owners(ones, "plain.weight", set()).modules == {"plain"}
    assert index.owners(ones).modules == {"plain"}


def test_a_name_is_a_hint_only_when_the_value_agrees():
    model = Pair()
    index = ParameterIndex(model)
    weight = model.first.weight.detach().numpy()
    assert index.owners(weight, "model.second.weight").named == "second"
    assert index.owners(weight, "model.first.bias").named is None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4).flatmap(lambda rows: st.tuples(
    st.just(rows),
    st.integers(rows, 5).flatmap(lambda cols: st.lists(
        st.lists(st.integers(0, 9), min_size=cols, max_size=cols), min_size=rows, max_size=rows)),
)))
def test_assignment_is_the_cheapest_one(case):
    rows, costs = case
    columns = len(costs[0])
    chosen = min_cost_assignment(rows, columns, lambda r, c: costs[r][c])
    assert len(set(chosen)) == rows
    best = min(sum(costs[r][c] for r, c in enumerate(p)) for p in itertools.permutations(range(columns), rows))
    assert sum(costs[r][c] for r, c in enumerate(chosen)) == best


def test_module_tree_knows_containers_and_modules_that_make_no_nodes():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.GELU(), torch.nn.Dropout(0.5))
    model.stack = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    tree = ModuleTree.of(model.eval())
    assert tree.containers == {"stack"}
    assert tree.pass_through == {"2"}
    assert tree.parameter_free_helpers("") == ["1"]
    assert tree.common(["stack.0"]) == "stack.0"
    assert tree.distance("stack.0", "0") == 2  # siblings once the container is skipped


def test_an_in_place_activation_computes_something():
    """ReLU(inplace=True) hands back its input object, changed: it is a helper, not a pass-through."""
    tree = ModuleTree.of(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(inplace=True)).eval())
    assert tree.pass_through == set() and tree.parameter_free_helpers("") == ["1"]


def test_a_helper_applied_twice_per_call_is_counted():
    from modelexport_usage_based.helper_sizes import helper_exports, module_calls

    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(self.act(x)))

    model = torch.nn.Sequential(Twice(), Twice()).eval()
    counts, _ = module_calls(model, lambda: model(torch.ones(1, 2)))
    assert counts["0"] == 1 and counts["0.act"] == 2
    exports = helper_exports(model, ModuleTree.of(model), 17, counts)
    assert exports["0.act"].per_call == 2 and exports["0.act"].ops_in_order == ("Relu",)


class Unexportable(torch.nn.Module):
    def forward(self, x):
        return torch.special.erfcx(x)  # no TorchScript ONNX translation


def test_export_failure_is_reported_as_strategy_failed(tmp_path):
    ctx = make_context(Unexportable(), {"x": torch.ones(2, 3)}, options={"exporter": "torchscript"})
    with pytest.raises(StrategyFailed, match="erfcx") as failure:
        UsageBasedStrategy().export(ctx, tmp_path / "unexportable.onnx")
    assert "\n" not in str(failure.value)


def test_a_graph_of_another_model_is_declined(tmp_path):
    """Without a single tensor equal to one of the model's parameters the file is another model's: the chain stops."""
    first = make_context(torch.nn.Linear(3, 4).eval(), {"x": torch.ones(2, 3)})
    UsageBasedStrategy().export(first, tmp_path / "first.onnx")
    other = make_context(torch.nn.Linear(3, 4).eval(), {"x": torch.ones(2, 3)})
    with pytest.raises(ModelMismatchError, match="no tensor of the graph equals a parameter"):
        UsageBasedStrategy().tag_onnx(other, onnx.load(str(tmp_path / "first.onnx")))


class TwoTowers(torch.nn.Module):
    """A small text tower the input reaches and a larger image tower it does not (no image given)."""

    def __init__(self):
        super().__init__()
        self.text = torch.nn.Linear(8, 8)
        self.image = torch.nn.Sequential(*(torch.nn.Linear(8, 8) for _ in range(6)))

    def forward(self, x, pixels=None):
        return self.text(x) if pixels is None else self.text(x) + self.image(pixels)


def test_weights_of_modules_the_run_never_called_are_not_missing_from_its_graph(tmp_path):
    """Six of the seven weight tensors belong to a tower these inputs never reach: the graph cannot hold them, so
    they do not count against the file (before, "only 1 of the 7 weight tensors appear" refused it)."""
    torch.manual_seed(0)
    ctx = make_context(TwoTowers().eval(), {"x": torch.randn(2, 8)}, options={"exporter": "torchscript"})
    result = UsageBasedStrategy().export(ctx, tmp_path / "towers.onnx")
    assert set(result.node_modules.values()) == {"text"}


def test_each_helper_runs_on_the_sibling_before_it_and_a_folded_norm_on_its_layer():
    from modelexport_usage_based.helper_claims import find_helpers, folded_into

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.act1 = torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2), torch.nn.ReLU()
            self.conv2, self.bn2, self.act2 = torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2), torch.nn.ReLU()
            self.pool = torch.nn.AdaptiveAvgPool2d(1)

    tree = ModuleTree.of(Block().eval())
    # equal norms: each layer's tensors may hold either; the one registered right after it is taken
    folded = folded_into({"conv1": frozenset({"bn1", "bn2"}), "conv2": frozenset({"bn1", "bn2"})}, tree)
    assert folded == {"bn1": "conv1", "bn2": "conv2"}
    helpers = find_helpers(tree, {"conv1", "conv2"}, {}, folded)
    assert helpers.of[""] == ("act1", "act2", "pool")
    assert helpers.feeding == {"act1": "conv1", "act2": "conv2", "pool": "act2"}


def test_a_graph_tensor_is_owned_by_the_parameter_it_equals_as_stored_or_transposed_and_by_no_reordering():
    linear = torch.nn.Linear(6, 40)
    model = torch.nn.Sequential(linear, torch.nn.ReLU())
    index = ParameterIndex(model)
    weight = linear.weight.detach().numpy()
    for stored in (weight, np.ascontiguousarray(weight.T)):
        assert index.owners(stored).modules == {"0"}
    assert index.owners(stored).value == index.owners(weight).value  # one value, read either way
    reordered = np.ascontiguousarray(weight[::-1])  # the same elements, so the same checksum: not the same value
    assert index.owners(reordered) is None


def _propagation_state(monkeypatch, tmp_path, case: str = "stacked_blocks"):
    """The :class:`State` usage_based builds for a case (as it is before any pass), and its tags."""
    import copy

    from modelexport_core.testing import build_case
    from modelexport_usage_based import propagation

    captured = []
    original = propagation.propagate

    def capture(state, passes=None):
        captured.append(copy.deepcopy(state))
        return original(state, passes)

    monkeypatch.setattr(propagation, "propagate", capture)
    result = UsageBasedStrategy().export(make_context(*build_case(case)), tmp_path / "m.onnx")
    return captured[0], result


def test_the_passes_run_in_the_order_of_their_table(monkeypatch, tmp_path):
    from modelexport_usage_based.propagation import PASSES, propagate

    state, result = _propagation_state(monkeypatch, tmp_path)
    ran: list[str] = []

    def recorded(name, run):
        return name, lambda s: (ran.append(name), run(s))

    names = [name for name, _ in PASSES]
    assert len(set(names)) == len(names)
    propagation = propagate(state, tuple(recorded(name, run) for name, run in PASSES))
    assert ran == names
    keys = [node.name for node in state.graph.node]
    tagged = {keys[i]: module for i, module in propagation.modules.items()}
    assert all(result.node_modules[key] == module for key, module in tagged.items())


def test_a_pass_runs_alone_on_the_state_the_earlier_ones_leave(monkeypatch, tmp_path):
    """First guesses never leave a node's bound (the deepest module holding a parameter node on each side)."""
    from modelexport_core.format.tags import is_ancestor
    from modelexport_usage_based.propagation import PASSES

    state, _ = _propagation_state(monkeypatch, tmp_path)
    names = [name for name, _ in PASSES]
    for _, run in PASSES[: names.index("bound") + 1]:
        run(state)
    assert state.free and not state.pinned
    dict(PASSES)["first guesses"](state)
    assert all(is_ancestor(state.limits[i], state.modules[i]) for i in state.free)
    assert any(state.modules[i].startswith("blocks.1") for i in state.free)


def test_modules_are_ordered_as_they_ran_not_as_they_were_registered():
    """A model registering its final norm before its layers runs it after them; a container of layers, never
    called itself, runs where its first layer does; a module that never ran comes last."""
    from modelexport_usage_based.ownership import run_order

    names = ["", "embed", "norm", "unused", "layers", "layers.0", "layers.1"]
    first_call = {"": 0, "embed": 1, "layers.0": 2, "layers.1": 3, "norm": 4}
    order = run_order(names, first_call)
    assert sorted(names, key=order.__getitem__) == ["", "embed", "layers", "layers.0", "layers.1", "norm", "unused"]
    assert run_order(names, {}) == {name: i for i, name in enumerate(names)}  # nothing ran: as registered


class Table(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.arange(12.0).reshape(1, 4, 3))
        self.zeros = torch.nn.Parameter(torch.zeros(1, 5, 2))


def test_a_run_of_a_parameters_positions_along_one_axis_is_that_parameters():
    """An exporter folds a parameter sliced by constant bounds (``table[:, 1:]``) into a tensor of its own."""
    index = ParameterIndex(Table())
    rows = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    assert index.owners(rows[1:]).modules == {""}
    assert index.owners(rows[None, 1:3]).modules == {""}
    assert index.owners(np.zeros((4, 2), dtype=np.float32)).modules == {""}  # zeros: a part of the zero table only
    assert index.owners(rows[[0, 2]]) is None  # not a run
    assert index.owners(rows[1:, :2]) is None  # two axes cut


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Pair()

    def forward(self, x):
        return self.inner(x)


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block() for _ in range(2))


def test_a_node_between_nodes_of_two_sibling_calls_is_bounded_by_their_common_caller():
    """Node 2 reads a node of each block and is read by a node of each (blocks reused around it): it lies between
    two nodes of layers.0 and between two of layers.1, so neither bounds it, whatever order sets are read in."""
    from modelexport_usage_based.contexts import bounds
    from modelexport_usage_based.data_flow import DataGraph

    producers = [[], [], [0, 1], [2], [2]]
    consumers = [[2], [2], [3, 4], [], []]
    data = DataGraph(producers, consumers, [False] * 5, [[] for _ in range(5)], {}, {}, frozenset())
    modules = {0: "layers.0.inner", 1: "layers.1.inner", 3: "layers.0.inner", 4: "layers.1.inner"}
    limits = bounds(5, data, ModuleTree.of(TwoBlocks()), set(modules), modules, [frozenset()] * 5)
    assert limits[2] == ""


def test_arithmetic_on_moved_sizes_written_after_its_call_began_ran_in_that_call():
    """Node 0 measures the model's input for a block that never sees it, so it ran in the caller; node 2, computed
    from it before the block's call began (node 3), did too; node 4, computed from it after, ran in the call (an
    exporter measures each size once, at the start of the graph, for every tensor of that size)."""
    from modelexport_usage_based.data_flow import DataGraph
    from modelexport_usage_based.order import call_starts, settings_where_measured

    producers = [[], [], [], [1], [], [3]]
    consumers = [[], [3], [], [5], [], []]
    readers = {"input": [1], "h": [3], "q": [5]}
    data = DataGraph(producers, consumers, [False, True, False, False, False, False],
                     [[], ["input"], [], ["h"], [], ["q"]], readers, {"h": 1, "q": 3}, frozenset())
    inner = "layers.0.inner"
    sources = [frozenset({"input"}), frozenset(), frozenset({"input"}), frozenset(), frozenset({"input"}), frozenset()]
    inputs_from = [[], [], [0], [1], [0], [3, 2, 4]]

    def placed(began: bool) -> dict[int, str]:
        modules = {0: inner, 1: "", 2: inner, 3: inner, 4: inner, 5: inner}
        settings_where_measured([0, 2, 4], sources, inputs_from, {0}, data, ModuleTree.of(TwoBlocks()), modules,
                                call_starts([1, 3, 5], modules) if began else None)
        return modules

    assert [placed(True)[i] for i in (0, 2, 4)] == ["", "", inner]
    assert [placed(False)[i] for i in (0, 2, 4)] == ["", "", ""]  # without where calls began: all moved


def test_arithmetic_both_elements_of_a_stack_read_written_after_the_first_began_is_the_first_ones():
    """An exporter computes a view's shape once and hands it to the same view in the next element of the stack:
    written after the first element's call began, it ran there (its first reader's module); written before, it is
    the caller's (their common module)."""
    from onnx import helper

    from modelexport_core.format.graph import GraphIndex
    from modelexport_usage_based.data_flow import DataGraph, NodeKind, NodeKinds
    from modelexport_usage_based.propagation import _tag_readers_of

    def tag_of_shape(shape_first: bool) -> str:
        relu = helper.make_node("Relu", ["x"], ["a"])
        shape = helper.make_node("Concat", ["s0", "s1"], ["shape"], axis=0)
        first, second = (shape, relu) if shape_first else (relu, shape)
        nodes = [first, second, helper.make_node("Reshape", ["a", "shape"], ["b"]),
                 helper.make_node("Reshape", ["b", "shape"], ["c"])]
        graph = helper.make_graph(nodes, "g", [], [])
        at = nodes.index(shape)
        kinds = NodeKinds([NodeKind.SHAPE if i == at else NodeKind.DATA for i in range(4)], {"shape"}, {})
        data = DataGraph([[] for _ in range(4)], [[] for _ in range(4)], [False] * 4, [[] for _ in range(4)], {}, {},
                         frozenset())
        modules = {1 - at: "layers.0.inner", 2: "layers.0.inner", 3: "layers.1.inner"}
        _tag_readers_of(graph, GraphIndex.of(graph), kinds, data, ModuleTree.of(TwoBlocks()), modules, {}, set())
        return modules[at]

    assert tag_of_shape(shape_first=False) == "layers.0.inner"
    assert tag_of_shape(shape_first=True) == ""

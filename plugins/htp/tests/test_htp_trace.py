"""The trace half: what one run records, and what the projection does with it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from htp_support import build

from modelexport_core import make_context
from modelexport_core.sdk import export_torchscript
from modelexport_htp.trace import trace_execution

pytestmark = pytest.mark.unit  # the fast tier, run first


def test_every_call_carries_its_module_stack():
    model, inputs = build("stacked_blocks")
    trace = trace_execution(make_context(model, inputs))
    linear = [r for r in trace.records if r.op == "linear"]
    assert [r.module for r in linear] == ["inp", "blocks.0.proj", "blocks.1.proj", "blocks.2.proj", "head.gate"]
    assert linear[1].stack == ("", "blocks.0", "blocks.0.proj")
    assert linear[1].params == ("blocks.0.proj.weight", "blocks.0.proj.bias")
    assert trace.records[linear[2].inputs[0]].module == "blocks.0.norm"


def test_in_place_updates_and_aliases_are_followed():
    model, inputs = build("in_place")
    trace = trace_execution(make_context(model, inputs))
    add_ = next(r for r in trace.records if r.op.endswith("add_"))
    assert add_.params == ("offset",)
    relu = next(r for r in trace.records if r.op == "relu")
    assert relu.inputs == (add_.index,)  # the in-place update is what the activation read
    assert not add_.alias


def test_values_read_into_python_are_noted_with_the_module_that_read_them():
    model, inputs = build("counted_moe")
    trace = trace_execution(make_context(model, inputs))
    counted = next(r for r in trace.records if r.op.endswith(".sum") and r.module == "router")
    module, when = trace.value_reads[counted.index]
    assert module == "router" and when == counted.index + 1  # read right after the sum, before any other call
    assert all(trace.records[i].module == "router" for i in trace.value_reads)


def test_calls_returning_their_input_are_marked():
    class Passthrough(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.float32).contiguous() * 2

    trace = trace_execution(make_context(Passthrough().eval(), {"x": torch.ones(2, 3)}))
    flags = {r.op.rpartition(".")[2]: r.alias for r in trace.records[1:]}
    assert flags == {"to": True, "contiguous": True, "mul": False}


def test_ancestors_follow_data_flow_only():
    model, inputs = build("same_class_siblings")
    trace = trace_execution(make_context(model, inputs))
    ancestors = trace.ancestors()
    left = [r.index for r in trace.records if r.module.startswith("left")]
    right = [r.index for r in trace.records if r.module.startswith("right")]
    assert not any(ancestors[r] >> left_call & 1 for r in right for left_call in left)


def test_a_matrix_is_measured_once_for_both_ways_it_is_looked_up():
    import numpy as np

    from modelexport_core.sdk import ValueIndex, measure, transposed_measure

    weight = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    assert transposed_measure(measure(weight))[0] == measure(np.ascontiguousarray(weight.T))[0]
    index: ValueIndex[str] = ValueIndex()
    index.add("stored transposed", np.ascontiguousarray(weight.T))
    index.add("other", np.ascontiguousarray(weight.T) + 1)
    assert index.find(weight.T, transposed_measure(measure(weight))) == ["stored transposed"]  # a view, not a copy
    assert index.find(weight) == []


def test_a_faded_value_is_a_candidate_for_every_output_of_its_shape():
    """Subnormal values are flushed differently by each runtime: their elements say nothing, so every
    recorded output of the shape stays a candidate and data flow decides."""
    import numpy as np

    from modelexport_core.sdk import ValueIndex, faded

    tiny = np.full((4, 8), 1e-41, dtype=np.float32)
    flushed = np.zeros((4, 8), dtype=np.float32)
    assert faded(tiny) and faded(flushed) and not faded(np.full((4, 8), 1e-30, dtype=np.float32))
    index: ValueIndex[int] = ValueIndex()
    index.add(1, tiny)
    index.add(2, np.ones((4, 8), dtype=np.float32))
    index.add(3, np.ones((4, 9), dtype=np.float32))
    assert index.find(flushed) == [1]  # subnormals another runtime flushed to zero equal them ...
    assert index.of_shape(flushed) == [1, 2]  # ... and the shape keeps every output a candidate


def test_elements_apart_by_less_than_the_smallest_normal_float_are_equal():
    """A value whose largest element is barely normal (its variance underflowed, its elements mostly subnormal)
    differs between runtimes by flushed subnormals: by less than the smallest normal float, however small a part
    of its own scale that is. It is found; one apart by more is not."""
    import numpy as np

    from modelexport_core.sdk import ValueIndex

    rng = np.random.default_rng(0)
    recorded = (rng.standard_normal((8, 64)) * 4e-39).astype(np.float32)
    recorded[0, 0] = 1.7e-38
    produced = recorded + (rng.standard_normal((8, 64)) * 4e-40).astype(np.float32)
    index: ValueIndex[str] = ValueIndex()
    index.add("recorded", recorded)
    index.add("apart", recorded + np.float32(3e-38))
    assert index.find(produced) == ["recorded"]


def _exported_and_traced(case: str):
    """A test model's context, its plain TorchScript export (the graph) and its trace."""
    import onnx

    model, inputs = build(case)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.onnx"
        ctx = make_context(model, inputs)
        export_torchscript(ctx, path)
        graph = onnx.load(str(path))
    return ctx, graph, trace_execution(ctx)


def test_a_parameter_reshaped_to_broadcast_is_found_as_its_parameter():
    """The exporter stores a ``(C,)`` scale applied as ``(C, 1, 1)`` as a new ``(C, 1, 1)`` initializer."""

    from modelexport_htp.project import read_initializers

    ctx, graph, trace = _exported_and_traced("near_identity_stages")
    facts = read_initializers(graph, trace)
    shaped = [name for name in facts.params if name.startswith("onnx::Mul")]
    assert shaped and all(any(p.endswith(".scale") or p.endswith(".weight") for p in facts.params[name])
                          for name in shaped), {name: facts.params[name] for name in shaped}


def test_every_output_of_a_split_node_is_matched_to_the_one_split_call():
    """One call of several outputs is one node: its second output stays the split's, though a later call
    (a block whose branch adds zeros) holds the same value and the split is already matched."""

    from modelexport_core.sdk import intermediate_values
    from modelexport_htp.project import project, read_initializers

    ctx, graph, trace = _exported_and_traced("split_stage")
    values = intermediate_values(graph, ctx.input_names, tuple(ctx.args), None)
    projection = project(graph, values, trace, read_initializers(graph, trace))
    split = next(i for i, node in enumerate(graph.graph.node) if node.op_type == "Split")
    assert trace.records[projection.matched[split]].op.endswith("split")
    second = graph.graph.node[split].output[1]
    readers = [i for i, node in enumerate(graph.graph.node) if second in node.input and node.op_type == "Conv"]
    assert readers and all(trace.records[projection.matched[i]].module == "blocks.0.conv1.conv" for i in readers)


def test_a_few_elements_that_cancelled_may_keep_the_rounding_of_large_terms():
    """Values in the thousands: an element summing large terms to nearly zero differs by float32's rounding of
    those terms. A few such elements keep two values equal; many do not, and a sentinel mask widens nothing."""
    import numpy as np

    from modelexport_core.sdk import ValueIndex, same_values

    rng = np.random.default_rng(0)
    loud = (rng.standard_normal((4, 64, 8)) * 3000).astype(np.float32)
    rounded = loud.copy()
    rounded.flat[[5, 700, 1500]] = loud.flat[[5, 700, 1500]] * 0 + 1e-3  # three elements cancelled to ~0
    loud.flat[[5, 700, 1500]] = 0.0
    assert same_values(loud, rounded)
    index: ValueIndex[str] = ValueIndex()
    index.add("loud", loud)
    assert index.find(rounded) == ["loud"]
    zeros, many = loud.copy(), loud.copy()
    zeros.flat[::20], many.flat[::20] = 0.0, 1e-3  # one element in twenty: not a few
    assert not same_values(zeros, many)
    scores = rng.standard_normal((4, 64, 8)).astype(np.float32)
    masked = np.where(rng.random((4, 64, 8)) < 0.9, np.float32(-3.4e38), scores)  # mostly masked
    other = np.where(masked < -1e30, masked, masked + 0.5)  # the same mask, other scores
    assert not same_values(masked, other)


def test_a_value_holding_a_recorded_one_in_another_order_is_found_as_it():
    """``topk(sorted=False)`` leaves the order to the runtime: the rows computed from it come in another
    order, and only their elements, sorted, equal the recorded value."""
    import numpy as np

    from modelexport_core.sdk import ValueIndex

    rng = np.random.default_rng(0)
    rows = rng.standard_normal((6, 16)).astype(np.float32)
    index: ValueIndex[str] = ValueIndex()
    index.add("rows", rows)
    index.add("other", rng.standard_normal((6, 16)).astype(np.float32))
    swapped = rows[[1, 0, 3, 2, 5, 4]]
    assert index.find(swapped) == []
    assert index.find_permuted(swapped) == ["rows"]
    assert index.find_permuted(swapped, limit=0) == []  # too many candidates to sort: none


def test_a_repeat_reading_a_tensor_keeps_its_wrappers_only_merged_shapes_move():
    """Two blocks each invert a shared mask of two rows (Cast, then 1 - mask): the second block's Cast is its
    own node, not a read the exporter merged into the first block (only scalars and shapes are merged), so
    it stays in the second block; a repeat reading a shape element still has its wrappers moved."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from modelexport_core.sdk import GraphIndex
    from modelexport_htp.fill import _follow_first_occurrences
    from modelexport_htp.project import Projection

    def graph_reading(dtype: int, shape: list[int]) -> onnx.GraphProto:
        nodes = [helper.make_node("Identity", ["x"], ["read"], name="root_read"),
                 helper.make_node("Cast", ["read"], ["c0"], to=TensorProto.FLOAT, name="a_cast"),
                 helper.make_node("Sub", ["one", "c0"], ["s0"], name="a_sub"),
                 helper.make_node("Cast", ["read"], ["c1"], to=TensorProto.FLOAT, name="b_cast"),
                 helper.make_node("Sub", ["one", "c1"], ["s1"], name="b_sub")]
        return helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, shape)], [],
                                 initializer=[helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])

    for read, dtype, shape, value, moves in [
        ("mask", TensorProto.FLOAT, [2, 1, 1, 1], np.ones((2, 1, 1, 1), np.float32), False),
        ("extent", TensorProto.INT64, [1], np.array([4]), True),
    ]:
        graph = graph_reading(dtype, shape)
        values = {"read": value, "c0": value.astype(np.float32), "s0": 1 - value.astype(np.float32),
                  "c1": value.astype(np.float32), "s1": 1 - value.astype(np.float32)}
        modules = {0: "", 1: "a", 2: "a", 3: "b", 4: "b"}
        index = GraphIndex.of(graph)
        how = {key: "consumer" for key in index.keys}
        projection = Projection(small_initializers={"one": np.array(1.0, np.float32)})
        _follow_first_occurrences(graph, index, projection, values, modules, {"": 0, "a": 1, "b": 2}, how, {})
        assert modules[4] == "b"  # the repeat itself stays
        assert (modules[3] == "a") is moves, read  # its Cast: moved only where it wraps a merged shape read


def test_calls_whose_value_nothing_used_are_unread() -> None:
    """A block pools and projects its input, then hands the unpooled input to a child doing the same: its own
    pooling and projection are read by nothing (the exporter writes no node for them); the child's are."""
    import numpy as np

    from modelexport_htp.trace import OpRecord, Trace

    out = np.arange(4.0)
    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "max_pool2d", ("tree.pool",), (0,), ()),
               OpRecord(2, "conv2d", ("tree.project",), (1,), ("tree.project.weight",)),
               OpRecord(3, "max_pool2d", ("tree.child.pool",), (0,), ()),
               OpRecord(4, "size", ("tree.child",), (3,), (), shape_read=True),
               OpRecord(5, "conv2d", ("tree.child.project",), (3,), ("tree.child.project.weight",), outputs=[out])]
    trace = Trace(records=records, execution_trace=["", "tree", "tree.child"], param_owners={}, param_values={},
                  model_outputs=[out.copy()])
    assert trace.unread() == {1, 2}


def test_a_value_read_only_in_other_modules_was_handed_over() -> None:
    """The root builds a table (through a ``contiguous``, which passes it on) that only its layers read: handed
    over. A value its own module reads again is not, nor one nothing read."""
    from modelexport_htp.trace import OpRecord, Trace

    records = [OpRecord(0, "input:x", (), (), ()), OpRecord(1, "arange", (), (), ()),
               OpRecord(2, "mul", (), (1,), ("slopes",)), OpRecord(3, "contiguous", (), (2,), ()),
               OpRecord(4, "baddbmm", ("layers.0",), (3, 0), ()), OpRecord(5, "baddbmm", ("layers.1",), (3, 4), ()),
               OpRecord(6, "add", (), (1, 5), ()), OpRecord(7, "neg", (), (6,), ())]
    trace = Trace(records=records, execution_trace=["", "layers.0", "layers.1"], param_owners={}, param_values={})
    assert trace.handed_over(2)
    assert not trace.handed_over(1)  # the root reads the positions again
    assert trace.handed_over(4)
    assert not trace.handed_over(7)  # nothing read it


def test_a_factory_may_take_its_size_from_an_earlier_shape_read() -> None:
    """``torch.ones(ids.shape) * pad``: the trace sees the shape read and the factory apart (the sizes travel as
    Python numbers); with ``sized`` what is computed from the factory descends from the shape read."""
    from modelexport_htp.trace import OpRecord, Trace

    records = [OpRecord(0, "input:ids", (), (), ()), OpRecord(1, "size", (), (0,), (), shape_read=True),
               OpRecord(2, "ones", (), (), ()), OpRecord(3, "mul", (), (2,), ()),
               OpRecord(4, "embedding", ("tags",), (3,), ("tags.weight",))]
    trace = Trace(records=records, execution_trace=["", "tags"], param_owners={}, param_values={})
    assert trace.ancestors()[4] == 1 << 2 | 1 << 3
    assert trace.ancestors(sized=True)[4] == 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3
    assert trace.ancestors(sized=True)[1] == 1 << 0  # a call reading a tensor depends on what it read only
    assert trace.ancestors(sized=True)[2] == 0  # which of equal factories a node is, only time tells

"""The trace half: what one run records, and what the projection does with it."""

from __future__ import annotations

import pytest
import torch
from htp_support import build

from modelexport_core import make_context
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
    assert not any(ancestors[r] >> l & 1 for r in right for l in left)


def test_a_matrix_is_measured_once_for_both_ways_it_is_looked_up():
    import numpy as np

    from modelexport_htp.value_index import ValueIndex, measure, transposed_measure

    weight = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    assert transposed_measure(measure(weight))[0] == measure(np.ascontiguousarray(weight.T))[0]
    index: ValueIndex[str] = ValueIndex()
    index.add("stored transposed", np.ascontiguousarray(weight.T))
    index.add("other", np.ascontiguousarray(weight.T) + 1)
    assert index.find(weight.T, transposed_measure(measure(weight))) == ["stored transposed"]  # a view, not a copy
    assert index.find(weight) == []

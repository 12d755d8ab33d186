"""The judgement every figure rests on: contamination is a node given to a sibling layer of its recorded one."""

from __future__ import annotations

import pytest

from modelexport_core.measure.agreement import sibling_contamination

pytestmark = pytest.mark.unit


def test_a_node_of_layer_one_tagged_layer_zero_is_contaminated():
    assert sibling_contamination({"n": "layers.0.attn"}, {"n": "layers.1.attn"}) == ["n"]


@pytest.mark.parametrize("given", ["layers.1", "layers.1.attn.q", "", "head"])
def test_an_ancestor_a_descendant_or_another_branch_is_wrong_at_most_never_contaminated(given):
    assert sibling_contamination({"n": given}, {"n": "layers.1.attn"}) == []


def test_nodes_without_a_record_or_a_tag_are_not_judged():
    assert sibling_contamination({"a": "layers.0"}, {"a": None, "b": "layers.1"}) == []

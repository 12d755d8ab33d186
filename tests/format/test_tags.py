"""The tag builder: format, torch.nn filtering, sibling disambiguation, and properties over random trees."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from modelexport_core.format.tags import HierarchyTags, ModuleRecord, common_ancestor
from modelexport_core.prepare.presets import build_preset
from modelexport_core.testing import HARD_CASES

pytestmark = pytest.mark.unit  # the fast tier, run first

TAG_FORMAT = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*)+$")


def test_bert_tags_follow_the_class_path_with_indices():
    tags = HierarchyTags.from_model(build_preset("bert"))
    assert tags.tag_of("") == "/BertModel"
    assert tags.tag_of("encoder.layer.1.attention.self") == "/BertModel/BertEncoder/BertLayer.1/BertAttention/BertSelfAttention"
    # a torch.nn Linear inside it folds into its kept parent
    assert tags.tag_of("encoder.layer.1.attention.self.query") == tags.tag_of("encoder.layer.1.attention.self")
    assert tags.kept_module("encoder.layer.0.output.dense") == "encoder.layer.0.output"


def test_torch_modules_are_left_out_unless_kept():
    model = build_preset("bert")
    torch_classes = {type(m).__name__ for m in model.modules() if type(m).__module__.startswith("torch.")}
    assert {"Linear", "LayerNorm", "Embedding", "ModuleList"} <= torch_classes
    default = HierarchyTags.from_model(model)
    segments = {s.split(".")[0] for tag in default.kept_tags.values() for s in tag.split("/")[1:]}
    assert not segments & torch_classes
    kept = HierarchyTags.from_model(model, keep_torch_modules=True)
    assert kept.tag_of("encoder.layer.0.attention.self.query") == (
        "/BertModel/BertEncoder/ModuleList/BertLayer.0/BertAttention/BertSelfAttention/Linear.query"
    )


def test_same_class_siblings_get_their_attribute_names():
    model, _ = HARD_CASES["same_class_siblings"]()
    tags = HierarchyTags.from_model(model)
    assert tags.tag_of("q_norm") == "/SameClassSiblings/Scale.q_norm"
    assert tags.tag_of("k_norm") == "/SameClassSiblings/Scale.k_norm"
    assert tags.tag_of("left.proj") == "/SameClassSiblings/Block.left"


def test_module_dict_and_two_lists_of_the_same_class_stay_distinct():
    model, _ = HARD_CASES["routed_heads"]()
    tags = HierarchyTags.from_model(model)
    assert tags.tag_of("heads.cls") == "/RoutedHeads/Gate.heads.cls"
    assert tags.tag_of("first.0") == "/RoutedHeads/Block.first.0"
    assert tags.tag_of("second.0") == "/RoutedHeads/Block.second.0"


def test_a_lone_named_child_keeps_the_plain_class_name():
    model, _ = HARD_CASES["stacked_blocks"]()
    tags = HierarchyTags.from_model(model)
    assert tags.tag_of("head") == "/StackedBlocks/Gate"
    assert tags.tag_of("blocks.2.scale") == "/StackedBlocks/Block.2/Scale"


def test_a_torch_root_is_still_tagged():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    tags = HierarchyTags.from_model(model)
    assert tags.tag_of("0") == "/Sequential"


def test_common_ancestor():
    assert common_ancestor(["a.b.c", "a.b.d"]) == "a.b"
    assert common_ancestor(["a.b", "a.bc"]) == "a"
    assert common_ancestor(["x", "y"]) == ""
    assert common_ancestor(["a.b"]) == "a.b"


# --- properties over random module trees ---------------------------------------------------

_NAMES = st.sampled_from(["0", "1", "2", "10", "a", "b", "q_norm", "k_norm", "layers", "block"])
_CLASSES = st.sampled_from(
    [("Block", "mypkg.blocks"), ("Norm", "mypkg.norms"), ("Linear", "torch.nn.modules.linear"),
     ("ModuleList", "torch.nn.modules.container"), ("Block", "otherpkg.blocks")]
)


@st.composite
def module_trees(draw) -> list[ModuleRecord]:
    records = [ModuleRecord("", "Root", "mypkg.model")]
    names = [""]
    for _ in range(draw(st.integers(0, 25))):
        parent = draw(st.sampled_from(names))
        child = draw(_NAMES)
        qualname = f"{parent}.{child}" if parent else child
        if qualname in names:
            continue
        class_name, class_module = draw(_CLASSES)
        records.append(ModuleRecord(qualname, class_name, class_module))
        names.append(qualname)
    return records


@settings(max_examples=300, deadline=None)
@given(module_trees(), st.booleans())
def test_tags_are_unique_well_formed_and_deterministic(records, keep_torch):
    tags = HierarchyTags(records, keep_torch)
    kept = tags.kept_tags
    assert len(set(kept.values())) == len(kept), "two kept modules share a tag"
    for qualname in (r.qualname for r in records):
        tag = tags.tag_of(qualname)
        assert TAG_FORMAT.match(tag), tag
        assert tag.startswith("/Root")
        # a module's tag extends its kept ancestor's tag
        kept_module = tags.kept_module(qualname)
        if kept_module:
            parent = tags.kept_module(kept_module.rpartition(".")[0])
            assert tag.startswith(tags.tag_of(parent) + "/")
    assert HierarchyTags(list(reversed(records)), keep_torch).kept_tags == kept
    if not keep_torch:
        for record in records:
            if record.qualname and record.is_torch_module:
                assert record.qualname not in kept

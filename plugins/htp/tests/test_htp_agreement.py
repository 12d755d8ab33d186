"""htp against PyTorch's own scope records: per-node agreement, coverage, cross-layer contamination."""

from __future__ import annotations

import pytest
from htp_models import ARCHITECTURES
from htp_support import CASES, PRESETS, initializer_owners

from modelexport_core.format.tags import is_ancestor


def check(measured, threshold: float = 0.99) -> None:
    assert measured.coverage == 1.0
    assert measured.agreement >= threshold, measured.report()
    assert measured.contaminated == [], measured.report()
    modules = {name for name, _ in measured.ctx.model.named_modules()}
    fake = {k: v for k, v in measured.result.node_modules.items() if v not in modules}
    assert not fake, f"tags that are not modules of the model: {fake}"


@pytest.mark.parametrize("name", PRESETS)
def test_presets_agree_with_pytorch(measured, name):
    check(measured(name))


@pytest.mark.parametrize("name", PRESETS)
def test_presets_static_shapes_agree_with_pytorch(measured, name):
    check(measured(name, dynamic=False))


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
@pytest.mark.parametrize("name", list(CASES))
def test_hard_and_custom_cases_agree_with_pytorch(measured, name, dynamic):
    check(measured(name, dynamic=dynamic), threshold=1.0)


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_more_architectures_agree_with_pytorch(measured, name):
    check(measured(name))


def test_equal_zeros_scattered_by_each_layer_in_a_dynamo_file(measured):
    """Every layer makes zeros of the same sizes: the dynamo exporter merges them into one node. Zeros are faded
    (they equal any output of their shape within tolerance), but only the layers' own zeros equal them exactly:
    matched to the first layer's output instead, the first layer was carried into the second (13 nodes)."""
    check(measured("masked_slice_stack", exporter="dynamo"), threshold=1.0)


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_every_layers_expansion_of_one_merged_mask_slice_stays_in_its_layer(measured, dynamic):
    """The exporter merges each layer's equal slice of one mask into the first layer's node; each later layer's
    expansion of it descends, in the graph, from that node alone, so its value is first matched to the first
    layer's expansion (equal values): 2 nodes in a sibling layer with dynamic axes, 16 with static ones. The
    match goes back in time (the first layer's call was recorded before the node written before it), so it
    takes the equal call recorded where the node was written: the layer's own."""
    check(measured("shared_mask_stack", dynamic=dynamic), threshold=1.0)


def test_a_merged_slice_read_by_every_run_of_a_block_goes_to_the_first_run(measured):
    """The exporter merges each run's slice of one mask into one node; walked back from the last run reading
    it, it went to the last run's call (2 nodes in a sibling block, with dynamic axes as with static ones)."""
    check(measured("repeated_funnel", dynamic=False))


def test_each_half_of_a_chunk_written_as_its_own_slice_is_the_chunks(measured):
    """A chunk along a dynamic axis is one call of two outputs, written as two slices. The first slice used the
    chunk up; the second then went to the child's no-op ``float`` of the second half (the same values, a call
    not used yet), and the child's first node to its grandchild (9 nodes). A call of several outputs is used
    output by output."""
    check(measured("chunked_gate"), threshold=1.0)


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_t5_agrees_with_pytorch(measured, dynamic):
    # one node short of 1.0: the Cast of the mask the exporter shares between both stacks (see report)
    check(measured("t5", dynamic=dynamic))


@pytest.mark.parametrize("name", ["cross_stack", "t5"])
def test_merged_shape_reads_follow_their_first_occurrence(measured, name):
    """TorchScript merges equal shape reads of sibling blocks into the first block and builds there
    the scalars wrapped for the later blocks: htp puts those wrappers in the first block too, and
    lists the block using them beside it."""
    m = measured(name, dynamic=True)
    assert m.result.details["tagged_by"].get("first occurrence", 0) > 0
    wrappers = [k for k in m.scoped if any(not is_ancestor(m.reference[k], o) for o in m.result.also.get(k, []))]
    assert wrappers and all(m.result.node_modules[k] == m.reference[k] for k in wrappers), m.report()


@pytest.mark.parametrize("name", PRESETS + ["stacked_blocks", "tied_weights"])
def test_initializer_identities_go_to_their_owner_or_a_consumer(measured, name):
    """The Identity nodes PyTorch leaves unscoped: the parameter's owner, or a module reading it."""
    m = measured(name)
    owners = initializer_owners(m)
    assert owners or name == "tied_weights"
    for key, allowed in owners.items():
        assert m.result.node_modules[key] in allowed, (key, m.result.node_modules[key], allowed)


def test_reused_module_calls_share_its_tag(measured):
    m = measured("reused_module")
    tagged = {m.result.node_modules[k] for k in m.scoped if m.reference[k].startswith("shared")}
    assert tagged and all(t.startswith("shared") for t in tagged)
    assert m.result.details["module_calls"]["shared"] == 3
    assert m.result.details["module_calls"]["gate"] == 2


def test_ops_at_the_root_stay_at_the_root(measured):
    m = measured("stacked_blocks")
    root = [k for k in m.scoped if m.reference[k] == ""]
    assert root and all(m.result.node_modules[k] == "" for k in root)


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_a_constant_node_holding_a_folded_table_is_its_readers(measured, exporter):
    """Each layer's child computes the same table from its buffers alone; the exporter folds it into Constant nodes
    written where the layer reads it. Matched to a call none of whose readers ran within it, a Constant node goes
    with its readers. Matched to the first of the equal calls, every later layer's table went to the first layer's
    child (3 nodes in a sibling layer)."""
    check(measured("tabled_stack", exporter=exporter), threshold=1.0)


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_a_read_of_sizes_merged_into_an_earlier_one_is_the_earlier_readers(measured, dynamic):
    """Each layer reads its input's sizes, then hands the input to a child that reads them again and uses them
    first. The exporter writes one Shape node where the layer read them: exporters write nodes in the order they
    ran, so the read recorded between the calls of the matched nodes around it is the one it holds. Matched to the
    read of the first call using it, both layers' reads went to their children (4 nodes)."""
    check(measured("reread_sizes", dynamic=dynamic), threshold=1.0)

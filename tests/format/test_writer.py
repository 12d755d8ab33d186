"""The bulk tag writer and renaming give byte for byte the file the per-entry versions gave."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from modelexport_core.format.graph import node_key, strip_wrapper_names
from modelexport_core.format.writer import NodeTag, write_tags

pytestmark = pytest.mark.unit  # the fast tier, run first

OWN = {"modelexport.tag", "modelexport.module", "namespace", "layer_ann", "pkg.torch.onnx.namespace"}


def _set(node: onnx.NodeProto, key: str, value: str) -> None:
    for prop in node.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    node.metadata_props.add(key=key, value=value)


def _get(node: onnx.NodeProto, key: str) -> str | None:
    return next((p.value for p in node.metadata_props if p.key == key), None)


def _reference_tag(node: onnx.NodeProto, tag: NodeTag, doc_string: bool, strategy: str, viewer_keys: bool) -> None:
    """The writer before it merged prebuilt fields: each entry set or added one call at a time."""
    if any(p.key in OWN for p in node.metadata_props):
        _set(node, "modelexport.tag", tag.tag)
        _set(node, "modelexport.module", tag.module)
        if viewer_keys and tag.tag:
            previous = _get(node, "namespace")
            if previous is not None and previous != tag.tag and _get(node, "pkg.torch.onnx.namespace") is None:
                _set(node, "pkg.torch.onnx.namespace", previous)
            _set(node, "namespace", tag.tag)
            _set(node, "layer_ann", tag.tag.rstrip("/") + "/")
    else:
        node.metadata_props.add(key="modelexport.tag", value=tag.tag)
        node.metadata_props.add(key="modelexport.module", value=tag.module)
        if viewer_keys and tag.tag:
            node.metadata_props.add(key="namespace", value=tag.tag)
            node.metadata_props.add(key="layer_ann", value=tag.tag.rstrip("/") + "/")
    if doc_string:
        tags = [tag.tag, *tag.also]
        node.doc_string = json.dumps({"hierarchy_tags": tags, "hierarchy_path": tag.tag,
                                      "hierarchy_count": len(tags), "hierarchy_method": strategy})
    for attribute in node.attribute:
        for subgraph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
            for sub_node in subgraph.node:
                _reference_tag(sub_node, tag, doc_string, strategy, viewer_keys)


def _reference_strip(graph: onnx.GraphProto) -> None:
    """The renaming before it was done in bulk: every value of every node looked at."""
    def unwrapped(name: str) -> str:
        if name.startswith("/model/"):
            return name[len("/model"):]
        return name[len("model."):] if name.startswith("model.") else name

    def graphs(g):
        found = [g]
        for node in g.node:
            for attribute in node.attribute:
                for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                    found.extend(graphs(sub))
        return found

    all_graphs = graphs(graph)
    values = set()
    for g in all_graphs:
        for node in g.node:
            values.update(node.input)
            values.update(node.output)
        values |= {h.name for h in (*g.input, *g.output, *g.value_info, *g.initializer)}
    values.discard("")
    value_map = {v: unwrapped(v) for v in values if unwrapped(v) != v}
    value_map = {o: n for o, n in value_map.items() if n not in values or n in value_map}
    names = {node.name for g in all_graphs for node in g.node}
    node_map = {n: unwrapped(n) for n in names if unwrapped(n) != n and unwrapped(n) not in names}
    for g in all_graphs:
        for node in g.node:
            if node.name in node_map:
                node.name = node_map[node.name]
            node.input[:] = [value_map.get(v, v) for v in node.input]
            node.output[:] = [value_map.get(v, v) for v in node.output]
        for holder in (*g.input, *g.output, *g.value_info, *g.initializer):
            holder.name = value_map.get(holder.name, holder.name)


def _graph() -> onnx.ModelProto:
    """Fresh nodes, an unnamed one, one with PyTorch's namespace, one tagged before, an If with a body,
    wrapper-prefixed names and values, and a stripped name that is already taken."""
    then_body = helper.make_graph(
        [helper.make_node("Identity", ["/model/a/Relu_output_0"], ["/model/then_out"], name="/model/a/then/Identity")],
        "then", [], [helper.make_tensor_value_info("/model/then_out", TensorProto.FLOAT, [2])])
    else_body = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["/model/else_out"], name="/model/a/else/Neg")],
        "else", [], [helper.make_tensor_value_info("/model/else_out", TensorProto.FLOAT, [2])])
    nodes = [
        helper.make_node("Add", ["x", "model.a.bias"], ["/model/a/Add_output_0"], name="/model/a/Add"),
        helper.make_node("Relu", ["/model/a/Add_output_0"], ["/model/a/Relu_output_0"], name="/model/a/Relu"),
        helper.make_node("Relu", ["/model/a/Relu_output_0"], ["/b/Relu_output_0"], name="/model/b/Relu"),
        helper.make_node("Relu", ["/b/Relu_output_0"], ["/model/b/Relu_output_0"], name="/b/Relu"),
        helper.make_node("Neg", ["/model/b/Relu_output_0"], ["neg"]),
        helper.make_node("ReduceSum", ["neg"], ["cond_f"], name="node_ReduceSum_1", keepdims=0),
        helper.make_node("Cast", ["cond_f"], ["cond"], name="node_Cast_2", to=TensorProto.BOOL),
        helper.make_node("If", ["cond"], ["y"], name="/model/c/If", then_branch=then_body, else_branch=else_body),
    ]
    nodes[0].metadata_props.add(key="pkg.torch.onnx.stack_trace", value="model.py:3")
    nodes[1].metadata_props.add(key="namespace", value="torch: a.Relu")
    nodes[3].metadata_props.add(key="modelexport.tag", value="/Old")
    nodes[3].metadata_props.add(key="other", value="kept")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("model.a.bias", TensorProto.FLOAT, [2], [1.0, 2.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("doc_string", [False, True])
@pytest.mark.parametrize("viewer_keys", [True, False])
def test_bulk_renaming_and_tag_writing_give_the_same_file(doc_string, viewer_keys):
    new, old = _graph(), _graph()
    renamed = strip_wrapper_names(new.graph)
    _reference_strip(old.graph)
    assert new.SerializeToString() == old.SerializeToString()
    assert renamed["/model/a/Add"] == "/a/Add" and "/model/b/Relu" not in renamed  # /b/Relu is taken
    shared = NodeTag("/M/A", "a")  # one NodeTag per module, as the core builds them
    tags = [shared, shared, NodeTag("/M/B", "b"), NodeTag("/M/B", "b", ("/M/A",)), NodeTag("", ""),
            NodeTag("/M", ""), NodeTag("/M", ""), NodeTag("/M/C", "c")]
    node_tags = {node_key(node, i): tag for i, (node, tag) in enumerate(zip(new.graph.node, tags))}
    write_tags(new, node_tags, doc_string=doc_string, strategy="s", viewer_keys=viewer_keys)
    for node, tag in zip(old.graph.node, tags):
        _reference_tag(node, tag, doc_string, "s", viewer_keys)
    assert new.SerializeToString() == old.SerializeToString()
    onnx.checker.check_model(new)
    if_node = new.graph.node[-1]
    assert _get(if_node.attribute[0].g.node[0], "modelexport.tag") == "/M/C"
    if viewer_keys:
        assert _get(new.graph.node[1], "pkg.torch.onnx.namespace") == "torch: a.Relu"
        assert [p.key for p in new.graph.node[3].metadata_props][:2] == ["modelexport.tag", "other"]


def test_a_node_without_a_tag_is_an_error():
    model = _graph()
    with pytest.raises(KeyError, match="no tag for node"):
        write_tags(model, {}, strategy="s")


def test_every_node_keeps_its_own_other_modules():
    import torch

    from modelexport_core.export.pipeline import node_tags_from_result
    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.plugin.strategy import TaggingResult

    class Part(torch.nn.Module):
        pass

    class Whole(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = Part(), Part(), Part()

    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="n1"), helper.make_node("Relu", ["y"], ["z"], name="n2"),
         helper.make_node("Relu", ["z"], ["w"], name="n3")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])]))
    result = TaggingResult(node_modules={"n1": "a", "n2": "a", "n3": "a"}, also={"n1": ["b"], "n3": ["c"]},
                           exporter="test")
    tags = HierarchyTags.from_model(Whole())
    node_tags = node_tags_from_result(model, result, tags)
    assert node_tags["n1"].also == (tags.tag_of("b"),)
    assert node_tags["n2"].also == ()
    assert node_tags["n3"].also == (tags.tag_of("c"),)


def test_outputs_an_exporter_named_its_own_way_are_given_the_model_s_names():
    from modelexport_core.format.graph import name_outputs

    def graph(outputs):
        nodes = [helper.make_node("Relu", ["x"], ["onnx::Relu_7"], name="relu"),
                 helper.make_node("Neg", ["onnx::Relu_7"], ["12"], name="neg")]
        return helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [f"Relu{name}_dim_0" if name != "x" else 2])
            for name in outputs])

    g = graph(["onnx::Relu_7", "12"])
    assert name_outputs(g, ["hidden", "logits"])
    assert [o.name for o in g.output] == ["hidden", "logits"]
    assert [list(n.output) for n in g.node] == [["hidden"], ["logits"]] and list(g.node[1].input) == ["hidden"]
    assert [o.type.tensor_type.shape.dim[0].dim_param for o in g.output] == ["Reluhidden_dim_0", "Relulogits_dim_0"]

    assert not name_outputs(graph(["12"]), ["hidden", "logits"])  # one name per output, or none
    passthrough = graph(["x", "12"])
    assert name_outputs(passthrough, ["input_again", "logits"])
    assert [o.name for o in passthrough.output] == ["x", "logits"]  # an input keeps its name
    taken = graph(["onnx::Relu_7", "12"])
    assert name_outputs(taken, ["x", "logits"]) and [o.name for o in taken.output] == ["onnx::Relu_7", "logits"]

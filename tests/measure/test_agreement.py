"""The judgement every figure rests on: contamination is a node given to a sibling layer of its recorded one."""

from __future__ import annotations

import pytest
import torch

from modelexport_core.measure.agreement import sibling_contamination

pytestmark = pytest.mark.unit


def test_a_node_of_layer_one_tagged_layer_zero_is_contaminated():
    assert sibling_contamination({"n": "layers.0.attn"}, {"n": "layers.1.attn"}) == ["n"]


@pytest.mark.parametrize("given", ["layers.1", "layers.1.attn.q", "", "head"])
def test_an_ancestor_a_descendant_or_another_branch_is_wrong_at_most_never_contaminated(given):
    assert sibling_contamination({"n": given}, {"n": "layers.1.attn"}) == []


def test_nodes_without_a_record_or_a_tag_are_not_judged():
    assert sibling_contamination({"a": "layers.0"}, {"a": None, "b": "layers.1"}) == []


class _Inner(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 3.0 + 1.0  # ops of this module's own forward, beside its children's
        for layer in self.layers:
            x = layer(x)
        return x


class _Outer(torch.nn.Module):
    """A head over a body held as ``model``, the attribute the export wrapper holds the user's model as."""

    def __init__(self) -> None:
        super().__init__()
        self.model = _Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).sum(-1)


@pytest.mark.filterwarnings("ignore")
def test_a_published_file_is_read_with_the_models_own_names(tmp_path):
    """``export`` names nodes as a plain export of the user's model does (``/model/Mul`` for the body's own op):
    read against the wrapper's names, the body's own nodes would read as the root's."""
    import onnx

    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.format.writer import NodeTag
    from modelexport_core.measure.agreement import measure_agreement, reference_modules
    from modelexport_core.prepare.models import LoadedModel

    model = _Outer().eval()
    loaded = LoadedModel(model, "test", "factory", inputs={"x": torch.randn(2, 4)})
    out = tmp_path / "m.onnx"
    report = export_model(loaded, out, ExportOptions(strategies=["builtin_tracking"]))
    graph = onnx.load(str(out))
    names = [name for name, _ in model.named_modules()]
    recorded = reference_modules(graph, "torchscript", names, wrapped=False)
    body_own = [node.name for node in graph.graph.node if node.op_type in ("Mul", "Add") and "layers" not in node.name]
    assert body_own and all(recorded[name] == "model" for name in body_own)
    node_tags = {name: NodeTag(entry["tag"], entry["module"]) for name, entry in report.sidecar["nodes"].items()}
    tags = HierarchyTags.from_model(model, False)
    measured = measure_agreement(graph, node_tags, "torchscript", tags, names, wrapped=False)
    assert measured.agreement == 1.0 and measured.contaminated == 0

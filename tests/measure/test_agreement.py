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


class _Scale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gain = torch.nn.Parameter(torch.rand(4) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gain


class _NoGradBranch(torch.nn.Module):
    """A forward run under ``torch.no_grad`` calling a child of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = _Scale()

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale(x).relu()


class _WithNoGradBranch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.out = _Scale()
        self.branch = _NoGradBranch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x) - self.branch(x)


@pytest.mark.filterwarnings("ignore")
def test_a_record_stopping_at_an_inlined_forward_accepts_its_children_and_nothing_outside() -> None:
    """The dynamo exporter records the nodes of a ``no_grad`` forward at the module that entered it, not at the
    child that ran them (it inlines a graph it generated): a tag naming that child agrees with such a record; a
    tag outside the module does not, and a node recorded as usual still needs its exact module."""
    import contextlib
    import io

    from modelexport_core.format.reference import dynamo_node_modules, inlined_nodes
    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.format.writer import NodeTag
    from modelexport_core.measure.agreement import measure_agreement

    model = _WithNoGradBranch().eval()
    wrapper = torch.nn.Module()  # exported as this tool does: the model held as ``model`` (its records say so)
    wrapper.model = model
    wrapper.forward = lambda x: model(x)
    with contextlib.redirect_stdout(io.StringIO()):
        graph = torch.onnx.export(wrapper, (torch.randn(2, 4),), dynamo=True, opset_version=18).model_proto
    recorded = dynamo_node_modules(graph)
    inlined = inlined_nodes(graph)
    product = next(n.name for n in graph.graph.node if n.op_type == "Mul" and recorded[n.name] == "branch")
    assert product in inlined  # the child's product, recorded at the branch
    assert not inlined & {name for name, module in recorded.items() if module != "branch"}
    tags = HierarchyTags.from_model(model)
    truth = {name: ("branch.scale" if name == product else module or "") for name, module in recorded.items()}

    def agreement(modules: dict[str, str]) -> float | None:
        node_tags = {name: NodeTag(tags.tag_of(module), module) for name, module in modules.items()}
        return measure_agreement(graph, node_tags, "dynamo", tags, []).agreement

    assert agreement(truth) == 1.0
    assert agreement({**truth, product: "out"}) < 1.0
    other = next(name for name, module in recorded.items() if module == "out")
    assert agreement({**truth, other: "branch.scale"}) < 1.0


def test_the_test_kit_judges_inlined_records_as_compare_does() -> None:
    """The kit's strict agreement lets a node recorded inside an inlined forward be tagged with a child of the
    recorded module, and nothing else: the same judgement as ``measure_agreement``."""
    from modelexport_core.plugin.strategy import TaggingResult
    from modelexport_core.testing.kit import Measured

    result = TaggingResult(node_modules={"a": "branch.scale", "b": "out", "c": "branch.scale"}, exporter="dynamo")
    reference: dict[str, str | None] = {"a": "branch", "b": "branch", "c": "branch"}
    measured = Measured("m", None, None, result, reference, inlined=frozenset({"a", "b"}))  # type: ignore[arg-type]
    assert measured.disagreeing == ["b", "c"]  # b: outside the module; c: recorded as usual

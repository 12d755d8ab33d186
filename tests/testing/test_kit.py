"""The test kit catches what a user would: tags that are not the modules PyTorch recorded, and sibling layers."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from modelexport_core import make_context
from modelexport_core.sdk import ExportContext, TaggingResult, TaggingStrategy, export_torchscript
from modelexport_core.testing import assert_every_recorded_node, build_case, measure_export

pytestmark = pytest.mark.unit  # the fast tier, run first


class _Rewriting(TaggingStrategy):
    """A TorchScript export whose node modules are PyTorch's own scopes passed through ``rewrite``."""

    name = "rewriting"

    def rewrite(self, module: str) -> str:
        return module

    def export(self, ctx: ExportContext, onnx_path: Path) -> TaggingResult:
        from modelexport_core.format.reference import torchscript_node_modules

        export_torchscript(ctx, onnx_path)
        graph = onnx.load(str(onnx_path))
        names = [qualname for qualname, _ in ctx.module.named_modules()]
        recorded = torchscript_node_modules(graph, names)
        return TaggingResult({node: self.rewrite(module or "") for node, module in recorded.items()}, "torchscript")


class _AtTheRoot(_Rewriting):
    name = "at_the_root"

    def rewrite(self, module: str) -> str:
        return ""


class _OneLayerDown(_Rewriting):
    name = "one_layer_down"

    def rewrite(self, module: str) -> str:
        return module.replace("blocks.1", "blocks.0")


def _measure(strategy: type[TaggingStrategy], directory: Path):
    return measure_export(strategy, make_context(*build_case("stacked_blocks")), directory / "m.onnx")


def test_exact_tags_pass(tmp_path):
    measured = _measure(_Rewriting, tmp_path)
    assert measured.coverage == 1.0 and measured.agreement == 1.0
    assert_every_recorded_node(measured)


def test_tags_at_the_root_are_measured_as_disagreeing(tmp_path):
    measured = _measure(_AtTheRoot, tmp_path)
    assert measured.agreement < 0.5 and measured.contaminated == []
    with pytest.raises(AssertionError, match="agreement"):
        assert_every_recorded_node(measured)


def test_a_node_given_to_a_sibling_layer_is_contamination(tmp_path):
    measured = _measure(_OneLayerDown, tmp_path)
    assert measured.contaminated and all(measured.reference[node].startswith("blocks.1") for node in measured.contaminated)
    with pytest.raises(AssertionError):
        assert_every_recorded_node(measured)


def test_the_fixture_exports_each_model_once(modelexport_measured):
    first = modelexport_measured("builtin_tracking", "routed_heads")
    assert modelexport_measured("builtin_tracking", "routed_heads") is first
    assert first.tag_agreement == 1.0 and first.contaminated == []

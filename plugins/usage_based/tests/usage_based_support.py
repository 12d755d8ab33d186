"""Exporting the test models and measuring usage_based's tags against PyTorch's own records."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import onnx
import torch

from modelexport_core import HierarchyTags, make_context, reference
from modelexport_core.inputs import inputs_from_config
from modelexport_core.presets import build_preset
from modelexport_core.strategy import ExportContext, TaggingResult
from modelexport_core.testing import HARD_CASES, sibling_contamination
from modelexport_usage_based.strategy import UsageBasedStrategy

PRESET_MODELS = ["bert", "gpt2", "vit", "llama"]
ALL_MODELS = PRESET_MODELS + list(HARD_CASES)
EXPORTED_MODELS = ALL_MODELS + ["t5"]
"""Models measured on usage_based's own export; the dynamo exporter itself fails on the t5 preset."""
MIN_AGREEMENT = 0.95


@dataclass
class Measured:
    """One model's tags and PyTorch's records for the same graph."""

    ctx: ExportContext
    onnx_model: onnx.ModelProto
    result: TaggingResult
    reference: dict[str, str | None]

    @property
    def scoped(self) -> list[str]:
        """Nodes PyTorch recorded a module for."""
        return [node for node, module in self.reference.items() if module is not None]

    def agreement(self) -> float:
        """Share of recorded nodes tagged with exactly the module PyTorch recorded."""
        return sum(self.result.node_modules[node] == self.reference[node] for node in self.scoped) / len(self.scoped)

    def tag_agreement(self) -> float:
        """Share of recorded nodes that get the same hierarchy tag (torch.nn modules folded as the core does)."""
        tags = HierarchyTags.from_model(self.ctx.model)
        same = sum(
            tags.tag_of(self.result.node_modules[node]) == tags.tag_of(self.reference[node]) for node in self.scoped
        )
        return same / len(self.scoped)

    def contamination(self) -> list[str]:
        """Nodes of layer i tagged as a sibling layer j."""
        return sibling_contamination(self.result.node_modules, self.reference)

    def disagreements(self, limit: int = 10) -> list[tuple[str, str | None, str]]:
        """A few nodes where the tag differs from the record, for failure messages."""
        wrong = [(n, self.reference[n], self.result.node_modules[n]) for n in self.scoped]
        return [row for row in wrong if row[1] != row[2]][:limit]


def model_and_inputs(name: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    if name in HARD_CASES:
        return HARD_CASES[name]()
    model = build_preset(name)
    return model, inputs_from_config(model)


def context_for(name: str) -> ExportContext:
    return make_context(*model_and_inputs(name))


def measure_export(name: str, directory: Path) -> Measured:
    """usage_based's own export of a model (TorchScript), against the scopes in its node names."""
    return measure_context(context_for(name), name, directory)


def measure_context(ctx: ExportContext, name: str, directory: Path) -> Measured:
    """usage_based's own export of ``ctx`` to ``directory/name.onnx``, against the scopes in its node names."""
    path = directory / f"{name}.onnx"
    with contextlib.redirect_stderr(io.StringIO()):
        result = UsageBasedStrategy().export(ctx, path)
    onnx_model = onnx.load(str(path))
    names = [qualname for qualname, _ in ctx.module.named_modules()]
    return Measured(ctx, onnx_model, result, reference.torchscript_node_modules(onnx_model, names))


def measure_dynamo(name: str, directory: Path) -> Measured:
    """usage_based tagging a graph the dynamo exporter wrote, against its ``name_scopes`` metadata."""
    ctx = context_for(name)
    path = directory / f"{name}.dynamo.onnx"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(ctx.module, ctx.args, str(path), dynamo=True)
    onnx_model = onnx.load(str(path))
    result = UsageBasedStrategy().tag_onnx(ctx, onnx_model)
    return Measured(ctx, onnx_model, result, reference.dynamo_node_modules(onnx_model))


def measure_case(cases: dict, name: str, directory: Path) -> Measured:
    """usage_based's own export of one small pattern model (``cases[name]``: its class and a maker of its inputs)."""
    build, inputs = cases[name]
    torch.manual_seed(0)
    model = build().eval()
    return measure_context(make_context(model, inputs()), name, directory)


def assert_every_recorded_node(measured: Measured) -> None:
    """Every node PyTorch recorded gets the recorded module's tag, and none goes to a sibling layer."""
    assert measured.tag_agreement() == 1.0, measured.disagreements()
    assert measured.contamination() == []


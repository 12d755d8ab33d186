"""Comparing strategies on one model: coverage, agreement with PyTorch's own records, contamination."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .context import make_context
from .errors import AllStrategiesFailedError, ModelExportError
from .export import ExportOptions, example_inputs, node_tags_from_result, run_strategies, strategy_chain
from .models import LoadedModel
from .onnx_file import load_graph
from .reference import dynamo_node_modules, torchscript_node_modules
from .tags import HierarchyTags
from .testing import sibling_contamination


@dataclass
class StrategyComparison:
    """How one strategy did on the model."""

    strategy: str
    status: str  # "ok" or "failed"
    reason: str = ""
    exporter: str = ""
    nodes: int = 0
    coverage: float = 0.0
    reference_nodes: int = 0  # nodes for which PyTorch recorded a module
    agreement: float | None = None  # share of those whose tag matches PyTorch's record
    contaminated: int = 0  # nodes given to a sibling layer (layer.i instead of layer.j)
    seconds: float = 0.0


def reference_modules(onnx_model, exporter: str, module_names: list[str]) -> dict[str, str | None]:
    """PyTorch's own record of each node's module, read the way the exporter wrote it."""
    if exporter == "dynamo":
        return dynamo_node_modules(onnx_model)
    return torchscript_node_modules(onnx_model, module_names)


def compare_strategies(loaded: LoadedModel, options: ExportOptions | None = None) -> list[StrategyComparison]:
    """Export with each strategy in turn and measure its tags against PyTorch's records of the same graph."""
    options = options or ExportOptions()
    chain = strategy_chain(options.strategies)
    inputs = example_inputs(loaded, options.input_specs)
    ctx = make_context(loaded.model, inputs, dynamic=options.dynamic, opset=options.opset, by_keyword=loaded.by_keyword)
    tags = HierarchyTags.from_model(loaded.model, options.keep_torch_modules)
    module_names = [name for name, _ in ctx.module.named_modules()]
    comparisons = []
    workdir = Path(tempfile.mkdtemp(prefix="modelexport-compare-"))
    try:
        for info in chain:
            started = time.perf_counter()
            try:
                _, result, onnx_path, _ = run_strategies(
                    ctx, [info], workdir, "model.onnx", {k: v for k, v in options.strategy_options.items() if k == info.name}
                )
            except AllStrategiesFailedError as error:
                reason = str(error).split(f"{info.name}: ", 1)[-1].rstrip(")")
                comparisons.append(StrategyComparison(info.name, "failed", reason,
                                                      seconds=time.perf_counter() - started))
                continue
            except ModelExportError as error:
                comparisons.append(StrategyComparison(info.name, "failed", str(error)))
                continue
            model = load_graph(onnx_path)
            node_tags = node_tags_from_result(model, result, tags)
            reference = reference_modules(model, result.exporter, module_names)
            known = {node: module for node, module in reference.items() if module is not None}
            agreeing = sum(1 for node, module in known.items() if node_tags[node].tag == tags.tag_of(module))
            comparisons.append(
                StrategyComparison(
                    strategy=info.name,
                    status="ok",
                    exporter=result.exporter,
                    nodes=len(model.graph.node),
                    coverage=sum(1 for node in model.graph.node if node.name in result.node_modules) / max(len(model.graph.node), 1),
                    reference_nodes=len(known),
                    agreement=agreeing / len(known) if known else None,
                    contaminated=len(sibling_contamination({n: t.module for n, t in node_tags.items()},
                                                           {n: tags.kept_module(m) for n, m in known.items()})),
                    seconds=time.perf_counter() - started,
                )
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return comparisons

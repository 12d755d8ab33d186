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
from .reference import dynamo_node_modules, torchscript_node_modules
from .tags import HierarchyTags
from .testing import sibling_contamination
from .wrapper import export_settings
from .writer import NodeTag


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


@dataclass
class Agreement:
    """How a graph's node tags match PyTorch's records of the same graph."""

    reference_nodes: int  # nodes for which PyTorch recorded a module
    agreement: float | None  # share of those whose tag matches the record
    contaminated: int  # nodes given to a sibling layer


def measure_agreement(
    onnx_model, node_tags: dict[str, NodeTag], exporter: str, tags: HierarchyTags, module_names: list[str]
) -> Agreement:
    """Compare ``node_tags`` with PyTorch's records in ``onnx_model``; ``module_names`` are the wrapper's."""
    reference = reference_modules(onnx_model, exporter, module_names)
    known = {node: module for node, module in reference.items() if module is not None}
    agreeing = sum(1 for node, module in known.items() if node_tags[node].tag == tags.tag_of(module))
    contaminated = sibling_contamination({n: t.module for n, t in node_tags.items()},
                                         {n: tags.kept_module(m) for n, m in known.items()})
    return Agreement(len(known), agreeing / len(known) if known else None, len(contaminated))


def compare_strategies(loaded: LoadedModel, options: ExportOptions | None = None) -> list[StrategyComparison]:
    """Export with each strategy in turn and measure its tags against PyTorch's records of the same graph."""
    options = options or ExportOptions()
    chain = strategy_chain(options.strategies)
    with export_settings(loaded.model):
        return _compare(loaded, options, chain)


def _compare(loaded: LoadedModel, options: ExportOptions, chain: list) -> list[StrategyComparison]:
    import onnx

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
            model = onnx.load(str(onnx_path), load_external_data=False)
            node_tags = node_tags_from_result(model, result, tags)
            measured = measure_agreement(model, node_tags, result.exporter, tags, module_names)
            comparisons.append(
                StrategyComparison(
                    strategy=info.name,
                    status="ok",
                    exporter=result.exporter,
                    nodes=len(model.graph.node),
                    coverage=sum(1 for node in model.graph.node if node.name in result.node_modules) / max(len(model.graph.node), 1),
                    reference_nodes=measured.reference_nodes,
                    agreement=measured.agreement,
                    contaminated=measured.contaminated,
                    seconds=time.perf_counter() - started,
                )
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return comparisons

"""Comparing strategies on one model: coverage, agreement with PyTorch's own records, contamination."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from modelexport_core.errors import ModelExportError
from modelexport_core.export.pipeline import (
    ExportOptions,
    export_attempt,
    node_evidence,
    node_tags_from_result,
    prepare_export,
    strategy_chain,
)
from modelexport_core.format.onnx_file import check_graph, load_graph, save_graph
from modelexport_core.format.tags import HierarchyTags
from modelexport_core.format.writer import write_tags
from modelexport_core.measure.agreement import measure_agreement
from modelexport_core.plugin.discovery import StrategyInfo
from modelexport_core.plugin.strategy import ExportContext
from modelexport_core.prepare.models import LoadedModel
from modelexport_core.prepare.wrapper import export_settings


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
    seconds: float = 0.0  # export and tag writing (with measure_cost: model loading excluded)
    peak_mb: float | None = None  # peak resident memory of the strategy's own process (measure_cost)
    plain_seconds: float | None = None  # a plain torch.onnx.export of the same model, same exporter
    plain_peak_mb: float | None = None
    time_ratio: float | None = None  # seconds / plain_seconds
    memory_ratio: float | None = None  # peak_mb / plain_peak_mb
    evidence: dict[str, float] = field(default_factory=dict)  # share of the nodes decided by each kind of evidence


def evidence_shares(evidence: dict[str, str]) -> dict[str, float]:
    """The share of the nodes each kind of evidence decided, largest first."""
    counts = Counter(evidence.values())
    total = sum(counts.values()) or 1
    return {kind: round(count / total, 4) for kind, count in counts.most_common()}


def format_evidence(shares: dict[str, float]) -> str:
    """``record 96%, neighbours 4%``: for people."""
    return ", ".join(f"{kind} {share:.0%}" for kind, share in shares.items())


def compare_one(
    info: StrategyInfo, ctx: ExportContext, tags: HierarchyTags, options: ExportOptions, workdir: Path,
    started: float,
) -> tuple[StrategyComparison, float, float]:
    """One strategy's export, tagged as the core tags it, and its tags against PyTorch's records.

    Returns the comparison, the clock when the export and tagging were done and the
    process's peak memory (MiB) at that moment, before the comparison's own work.
    """
    from modelexport_core.measure.cost import peak_mb

    attempt_dir = workdir / info.name
    attempt_dir.mkdir()
    attempt = export_attempt(info, ctx, attempt_dir, "model.onnx", options.strategy_options.get(info.name, {}))
    if not attempt.ok:
        return StrategyComparison(info.name, "failed", attempt.reason, seconds=time.perf_counter() - started), 0.0, 0.0
    result, onnx_path = attempt.made()
    model = load_graph(onnx_path)
    node_tags = node_tags_from_result(model, result, tags)
    write_tags(model, node_tags, strategy=info.name)
    check_graph(model, onnx_path)
    save_graph(model, onnx_path, onnx_path.with_name("tagged.onnx"))
    finished, peak = time.perf_counter(), peak_mb()
    module_names = [name for name, _ in ctx.module.named_modules()]
    measured = measure_agreement(model, node_tags, result.exporter, tags, module_names)
    comparison = StrategyComparison(
        strategy=info.name,
        status="ok",
        exporter=result.exporter,
        nodes=len(model.graph.node),
        coverage=sum(1 for node in model.graph.node if node.name in result.node_modules) / max(len(model.graph.node), 1),
        reference_nodes=measured.reference_nodes,
        agreement=measured.agreement,
        contaminated=measured.contaminated,
        seconds=finished - started,
        evidence=evidence_shares(node_evidence(model, result)),
    )
    return comparison, finished, peak


def _child_options(options: ExportOptions) -> dict:
    return {
        "keep_torch_modules": options.keep_torch_modules, "opset": options.opset, "dynamic": options.dynamic,
        "verify": False, "input_specs": str(options.input_specs) if options.input_specs else None,
        "strategy_options": options.strategy_options,
    }


def _with_costs(loaded: LoadedModel, options: ExportOptions, chain: list[StrategyInfo]) -> list[StrategyComparison]:
    """Each strategy, then a plain export with each exporter they used, every one in a process of its own."""
    from modelexport_core.measure.cost import run_child

    request = {"source": loaded.source, "options": _child_options(options)}
    comparisons = []
    plain: dict[str, dict] = {}
    for info in chain:
        answer = run_child({**request, "strategy": info.name})
        comparison = StrategyComparison(**answer["comparison"])
        if comparison.status == "ok" and comparison.exporter not in plain:
            try:
                plain[comparison.exporter] = run_child({**request, "exporter": comparison.exporter})
            except ModelExportError as error:
                plain[comparison.exporter] = {"error": str(error)}
        baseline = plain.get(comparison.exporter, {})
        if comparison.status == "ok" and "seconds" in baseline:
            comparison.plain_seconds = round(baseline["seconds"], 3)
            comparison.plain_peak_mb = round(baseline["peak_mb"], 1)
            comparison.time_ratio = round(comparison.seconds / baseline["seconds"], 3)
            comparison.memory_ratio = round(comparison.peak_mb / baseline["peak_mb"], 3)
        comparisons.append(comparison)
    return comparisons


def compare_strategies(
    loaded: LoadedModel, options: ExportOptions | None = None, *, measure_cost: bool = False
) -> list[StrategyComparison]:
    """Export with each strategy in turn and measure its tags against PyTorch's records of the same graph.

    With ``measure_cost`` (and a model a process can load again from its source), each
    strategy runs in a process of its own and is set against a plain ``torch.onnx.export``
    of the same model with the same exporter: seconds, peak memory and their ratios.
    """
    from modelexport_core.measure.cost import can_reload

    options = options or ExportOptions()
    chain = strategy_chain(options.strategies)
    if measure_cost and can_reload(loaded):
        return _with_costs(loaded, options, chain)
    with export_settings(loaded.model):
        return _compare(loaded, options, chain)


def _compare(loaded: LoadedModel, options: ExportOptions, chain: list[StrategyInfo]) -> list[StrategyComparison]:
    ctx, tags = prepare_export(loaded, options, keep_outputs=True)
    comparisons = []
    workdir = Path(tempfile.mkdtemp(prefix="modelexport-compare-"))
    try:
        for info in chain:
            comparisons.append(compare_one(info, ctx, tags, options, workdir, time.perf_counter())[0])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return comparisons

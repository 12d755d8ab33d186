"""The HTML report of a tagged file: the module tree with its figures, a hierarchy chart and each module's nodes.

One self-contained file: the figures as JSON, d3-hierarchy and d3-selection (ISC) and the page's own
script and styles are inlined, so it opens from ``file://`` with no network and can be attached to a
bug report. The figures are those of the other tools: node counts and op types as ``inspect`` reads
them, time as ``profile`` measures it, error as ``numerics`` finds it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import OutputPathError
from modelexport_core.format.graph import node_key
from modelexport_core.format.tagged import TaggedFile, load_tagged
from modelexport_core.tools.inspect_tags import TagNode, recorded_evidence, tag_tree_of

if TYPE_CHECKING:
    import onnx

    from modelexport_core.measure.numerics import NumericsReport
    from modelexport_core.tools.profiling import ProfileReport

ASSETS = "report_assets"
SCRIPTS = ("d3-hierarchy.min.js", "d3-selection.min.js", "report.js")


@dataclass
class ModuleFigures:
    """One module (one tag) of the report; ``nodes``/``op_types`` are its own, ``total_*`` include descendants."""

    tag: str
    module: str  # named_modules() name; "" for the root and for a tag no kept module owns
    parent: int  # index in HierarchyReport.modules, -1 for the root
    nodes: int
    total_nodes: int
    op_types: dict[str, int]
    parameters: int  # elements of the initializers its own nodes read
    parameter_bytes: int
    total_parameters: int  # of the initializers read by it or a descendant, each counted once
    total_parameter_bytes: int
    time_self_us: float | None = None
    time_us: float | None = None
    time_share: float | None = None
    time_nodes: int | None = None
    error_max_abs: float | None = None
    error_max_rel: float | None = None
    error_input_max_abs: float | None = None
    diverges: bool | None = None
    error_enters: bool | None = None


@dataclass
class NodeRow:
    """One top-level node of the graph: its module is an index into HierarchyReport.modules (-1 untagged)."""

    name: str
    op_type: str
    module: int
    inputs: list[str]
    outputs: list[str]


@dataclass
class ReportHeader:
    """What the file is and how it was made, from the sidecar and the ONNX model."""

    file: str
    model: str
    source: str
    strategy: str
    nodes: int
    tagged: int
    exporter: str
    opset: str
    producer: str
    modelexport_version: str
    verification: str
    evidence: dict[str, float] | None
    profile: str | None = None
    numerics: str | None = None
    first_divergent: list[str] = field(default_factory=list)


@dataclass
class HierarchyReport:
    """Everything the HTML page shows; ``modules`` are depth-first, parents before children."""

    header: ReportHeader
    modules: list[ModuleFigures]
    nodes: list[NodeRow]


_ELEMENT_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64, 15: 128,
                 16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4}  # onnx.TensorProto.DataType -> bits


def _size(dims, data_type: int) -> tuple[int, int]:
    """Elements and bytes of a tensor of shape ``dims`` (4-bit types pack two to a byte)."""
    elements = 1
    for dim in dims:
        elements *= dim
    return elements, (elements * _ELEMENT_BITS.get(data_type, 32) + 7) // 8


def _initializer_sizes(model: "onnx.ModelProto") -> dict[str, tuple[int, int]]:
    """Initializer name -> (elements, bytes), from their shapes and types: external weights need not be read."""
    sizes = {tensor.name: _size(tensor.dims, tensor.data_type) for tensor in model.graph.initializer}
    for sparse in model.graph.sparse_initializer:
        sizes[sparse.values.name] = _size(sparse.dims, sparse.values.data_type)
    return sizes


def _header(tagged: TaggedFile, node_count: int, untagged: int) -> ReportHeader:
    sidecar = tagged.sidecar or {}
    model_info = sidecar.get("model", {})
    export_info = sidecar.get("export", {})
    check = export_info.get("verification")
    if check is None:
        verification = "not verified" if sidecar else "unknown (no sidecar)"
    elif check.get("skipped"):
        verification = f"not verified: {check['skipped']}"
    else:
        diff = check.get("max_abs_diff")
        measured = f"max abs diff {diff:.2e}" if isinstance(diff, (int, float)) else f"max abs diff {diff}"
        verification = (f"{'passed' if check.get('passed') else 'failed'}, {measured} "
                        f"(atol {check.get('atol')}) over {len(check.get('shapes', []))} input shape(s)")
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in tagged.model.opset_import)
    producer = " ".join(p for p in (tagged.model.producer_name, tagged.model.producer_version) if p)
    return ReportHeader(
        file=tagged.path.name,
        model=model_info.get("class", ""),
        source=model_info.get("source", ""),
        strategy=sidecar.get("strategy", ""),
        nodes=node_count,
        tagged=node_count - untagged,
        exporter=export_info.get("exporter", ""),
        opset=opsets,
        producer=producer,
        modelexport_version=export_info.get("modelexport_version", ""),
        verification=verification,
        evidence=recorded_evidence(tagged.path),
    )


def _natural(tag: str) -> list[str | int]:
    """Sort key that puts BertLayer.2 before BertLayer.10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", tag)]


def _walk(root: TagNode) -> list[tuple[TagNode, int]]:
    """The tags depth-first, parents before children, each with its parent's position (-1 for the root);
    siblings in natural order."""
    order: list[tuple[TagNode, int]] = []
    stack: list[tuple[TagNode, int]] = [(root, -1)]
    while stack:
        node, parent = stack.pop()
        order.append((node, parent))
        here = len(order) - 1
        children = sorted(node.children.values(), key=lambda child: _natural(child.tag), reverse=True)
        stack.extend((child, here) for child in children)
    return order


def build_report(
    onnx_path: Path, profile: "ProfileReport | None" = None, numerics: "NumericsReport | None" = None
) -> HierarchyReport:
    """The figures of every module of the tagged file at ``onnx_path``, with time and error where given."""
    tagged = load_tagged(onnx_path)
    root, node_count, untagged = tag_tree_of(tagged.model)
    order = _walk(root)
    position = {node.tag: i for i, (node, _) in enumerate(order)}
    names = {tag: name for name, tag in tagged.module_tags().items()}
    sizes = _initializer_sizes(tagged.model)

    rows: list[NodeRow] = []
    reads: list[set[str]] = [set() for _ in order]
    for i, node in enumerate(tagged.graph.node):
        tag = tagged.node_tags.get(node_key(node, i))
        index = position.get(tag, -1) if tag is not None else -1
        rows.append(NodeRow(node.name, node.op_type, index, list(node.input), list(node.output)))
        if index >= 0:
            reads[index].update(name for name in node.input if name in sizes)

    below: list[set[str]] = [set(r) for r in reads]
    for i in range(len(order) - 1, 0, -1):  # children come after their parents: fold upwards
        below[order[i][1]] |= below[i]

    modules = []
    for i, (node, parent) in enumerate(order):
        own = [sizes[name] for name in reads[i]]
        total = [sizes[name] for name in below[i]]
        modules.append(ModuleFigures(
            tag=node.tag,
            module=names.get(node.tag, ""),
            parent=parent,
            nodes=node.own_nodes,
            total_nodes=node.total_nodes,
            op_types=dict(Counter(node.op_types).most_common()),
            parameters=sum(e for e, _ in own),
            parameter_bytes=sum(b for _, b in own),
            total_parameters=sum(e for e, _ in total),
            total_parameter_bytes=sum(b for _, b in total),
        ))

    header = _header(tagged, node_count, untagged)
    if profile is not None:
        _add_time(modules, position, profile)
        header.profile = (f"{profile.total_us / 1000:.3f} ms per run over {profile.runs} runs, onnxruntime "
                          f"optimization {profile.level}, {profile.fused} nodes onnxruntime's own")
    if numerics is not None:
        _add_error(modules, position, numerics)
        header.numerics = f"PyTorch against onnxruntime, atol {numerics.atol:g}, rtol {numerics.rtol:g}"
        header.first_divergent = list(numerics.first_divergent)
    return HierarchyReport(header, modules, rows)


def _add_time(modules: list[ModuleFigures], position: dict[str, int], profile: "ProfileReport") -> None:
    for figures in modules:
        figures.time_self_us = figures.time_us = figures.time_share = 0.0
        figures.time_nodes = 0
    for row in profile.modules:
        index = position.get(row.tag)
        if index is None:
            continue  # a tag only onnxruntime's own nodes carry cannot be in the file's tree
        figures = modules[index]
        figures.time_self_us, figures.time_us, figures.time_share, figures.time_nodes = (
            row.self_us, row.total_us, row.share, row.nodes)


def _add_error(modules: list[ModuleFigures], position: dict[str, int], numerics: "NumericsReport") -> None:
    for row in numerics.modules:
        index = position.get(row.tag)
        if index is None:
            continue
        figures = modules[index]
        figures.error_max_abs, figures.error_max_rel, figures.error_input_max_abs = row.max_abs, row.max_rel, row.input_max_abs
        figures.diverges, figures.error_enters = row.diverges, row.error_enters


def _finite(figures: dict[str, Any]) -> dict[str, Any]:
    # JSON has no infinity (a relative error over a zero reference is one): it travels as text
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in figures.items()}


def report_data(report: HierarchyReport) -> dict[str, Any]:
    """The JSON document the page reads: modules as objects, nodes as columns (a 100k-node graph stays small)."""
    return {
        "header": asdict(report.header),
        "modules": [_finite(asdict(m)) for m in report.modules],
        "nodes": {
            "name": [n.name for n in report.nodes],
            "op_type": [n.op_type for n in report.nodes],
            "module": [n.module for n in report.nodes],
            "inputs": [n.inputs for n in report.nodes],
            "outputs": [n.outputs for n in report.nodes],
        },
    }


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(ASSETS).joinpath(name).read_text(encoding="utf-8")


def _inline_script(text: str) -> str:
    # a literal "</script" would end the element early; "<\/" is the same string to JSON and JavaScript
    return text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def render_html(report: HierarchyReport) -> str:
    """The report as one HTML document with everything it needs inline."""
    from html import escape

    data = json.dumps(report_data(report), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    scripts = "\n".join(f"<script>\n{_inline_script(_asset(name))}\n</script>" for name in SCRIPTS)
    return (
        _asset("report.html")
        .replace("{{title}}", escape(f"{report.header.model or report.header.file}: modelexport report"))
        .replace("{{style}}", _asset("report.css"))
        .replace("{{data}}", data)
        .replace("{{scripts}}", scripts)
    )


def write_report(report: HierarchyReport, output: Path) -> Path:
    """Write the HTML report to ``output`` atomically (a temporary file beside it, then a rename)."""
    output = Path(output).expanduser()
    if output.is_dir():
        raise OutputPathError(f"{output} is a folder; give the report's file name, such as {output / 'report.html'}")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        temporary = output.with_name(f".{output.name}.tmp")
        temporary.write_text(render_html(report), encoding="utf-8")
        os.replace(temporary, output)
    except OSError as error:
        raise OutputPathError(f"cannot write {output}: {error.strerror or error}") from error
    return output

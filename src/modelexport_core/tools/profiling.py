"""Time per module: onnxruntime's profiler on generated inputs, its node times summed by tag.

onnxruntime profiles the graph it runs, after its own optimizations: fused nodes get new
names and carry no metadata. The session saves that optimized graph, and its nodes get
tags the way ``tag --from`` finds them (same name, else the modules of the nodes a fusion
replaced, else their neighbours'); the times of a fused node are its module's.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelexport_core.errors import ToolRunError, first_line
from modelexport_core.format.tagged import TaggedFile, load_graph, load_tagged
from modelexport_core.tools.derived import derive_tags
from modelexport_core.tools.run_inputs import generated_inputs

LEVELS = ("disabled", "basic", "extended", "all")


@dataclass
class ModuleTime:
    """Time of one module per run, in microseconds: its own nodes, and with its descendants."""

    tag: str
    module: str
    self_us: float
    total_us: float
    share: float  # of the whole run
    nodes: int  # nodes that ran with this tag, descendants included


@dataclass
class ProfileReport:
    """What onnxruntime spent, per module and per node, averaged over the timed runs."""

    path: Path
    runs: int
    level: str
    total_us: float
    modules: list[ModuleTime]  # depth-first, parents before children
    node_us: dict[str, float]  # node name as onnxruntime ran it -> time per run
    node_tags: dict[str, str]  # node name as onnxruntime ran it -> tag
    fused: int  # nodes onnxruntime ran that are not in the file under their name
    original_node_us: dict[str, float] = field(default_factory=dict)  # node of the file -> its share of the time


def _session_options(level: str, folder: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "profile")
    options.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    options.optimized_model_filepath = str(folder / "optimized.onnx")
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "optimized.data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    options.log_severity_level = 3
    return options


def kernel_times(trace: list[dict[str, Any]]) -> tuple[dict[str, float], int]:
    """Microseconds per node over the timed runs (the first run, a warm-up, left out), and how many runs."""
    runs = sorted((e for e in trace if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda e: e["ts"])
    if not runs:
        return {}, 0
    warm_up_end = runs[0]["ts"] + runs[0]["dur"]
    times: dict[str, float] = defaultdict(float)
    for event in trace:
        name = event.get("name", "")
        if event.get("cat") == "Node" and name.endswith("_kernel_time") and event["ts"] >= warm_up_end:
            times[name[: -len("_kernel_time")]] += float(event.get("dur", 0))
    return dict(times), len(runs) - 1


def _module_rows(tagged: TaggedFile, per_tag: dict[str, float], nodes_per_tag: dict[str, int], total: float) -> list[ModuleTime]:
    tags = set(per_tag)
    for tag in list(tags):
        parts = tag.split("/")
        tags.update("/".join(parts[:k]) for k in range(2, len(parts)))
    modules = {tag: name for name, tag in tagged.module_tags().items()}
    rows = []
    for tag in sorted(tags, key=lambda t: t.split("/")):
        below = [t for t in per_tag if t == tag or t.startswith(tag + "/")]
        cumulative = sum(per_tag[t] for t in below)
        rows.append(ModuleTime(tag, modules.get(tag, ""), per_tag.get(tag, 0.0), cumulative,
                               cumulative / total if total else 0.0, sum(nodes_per_tag[t] for t in below)))
    return rows


def profile_file(onnx_path: Path, runs: int = 10, level: str = "all", seed: int = 0) -> ProfileReport:
    """Run ``onnx_path`` ``runs`` times (after one warm-up) under onnxruntime's profiler; time per module."""
    import onnxruntime as ort

    tagged = load_tagged(onnx_path)
    inputs = generated_inputs(tagged.model, seed)
    with tempfile.TemporaryDirectory(prefix="modelexport-profile-") as folder:
        options = _session_options(level, Path(folder))
        try:
            session = ort.InferenceSession(str(tagged.path), options, providers=["CPUExecutionProvider"])
            wanted = {i.name for i in session.get_inputs()}
            feed = {name: value for name, value in inputs.items() if name in wanted}
            for _ in range(runs + 1):
                session.run(None, feed)
        except Exception as error:
            raise ToolRunError(f"onnxruntime cannot run {tagged.path.name}: {first_line(error)}") from error
        trace = json.loads(Path(session.end_profiling()).read_text())
        optimized_path = Path(folder) / "optimized.onnx"
        ran = load_graph(optimized_path) if optimized_path.is_file() else tagged.model
    times, timed_runs = kernel_times(trace)
    per_run = {name: us / max(timed_runs, 1) for name, us in times.items()}
    derived = derive_tags(tagged, ran)
    by_name = {node.name: i for i, node in enumerate(ran.graph.node) if node.name}
    original = {node.name for node in tagged.graph.node}
    root = min(tagged.node_tags.values(), key=lambda t: t.count("/"))
    node_tags: dict[str, str] = {}
    original_node_us: dict[str, float] = defaultdict(float)
    for name, us in per_run.items():
        key = ran.graph.node[by_name[name]].name if name in by_name else None
        node_tags[name] = derived.node_tags.get(key, root) if key else root
        covered = derived.sources.get(key, []) if key else []
        for source in covered:  # a fused node's time spread over the nodes it replaced, for the viewer
            original_node_us[source] += us / len(covered)
    per_tag: dict[str, float] = defaultdict(float)
    nodes_per_tag: dict[str, int] = defaultdict(int)
    for name, us in per_run.items():
        per_tag[node_tags[name]] += us
        nodes_per_tag[node_tags[name]] += 1
    total = sum(per_run.values())
    return ProfileReport(
        path=tagged.path,
        runs=timed_runs,
        level=level,
        total_us=total,
        modules=_module_rows(tagged, per_tag, nodes_per_tag, total),
        node_us=per_run,
        node_tags=node_tags,
        fused=sum(1 for name in per_run if name not in original),
        original_node_us=dict(original_node_us),
    )


def node_data_document(report: ProfileReport) -> dict[str, Any]:
    """Model Explorer's per-node data (GraphNodeData JSON): milliseconds per node of the profiled file.

    Keys are node names of the file as written, which Model Explorer's ONNX adapter uses as node
    ids; a fused node's time is spread evenly over the nodes it replaced.
    """
    return {
        "name": f"onnxruntime time per run (ms), optimization {report.level}",
        "results": {name: {"value": round(us / 1000.0, 6)} for name, us in sorted(report.original_node_us.items())},
        "gradient": [
            {"stop": 0, "bgColor": "#ffffff"},
            {"stop": 0.5, "bgColor": "#ffd27f"},
            {"stop": 1, "bgColor": "#e0483e"},
        ],
    }


def write_node_data(report: ProfileReport, output: Path) -> None:
    """Write :func:`node_data_document` to ``output`` atomically."""
    document = node_data_document(report)
    output = Path(output).expanduser()
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(f".{output.name}.tmp")
    temporary.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(temporary, output)

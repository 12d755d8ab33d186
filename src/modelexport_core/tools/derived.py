"""Carrying tags from a tagged ONNX file onto a file made from it (optimized, quantized, simplified).

onnxruntime drops every node's metadata when it saves an optimized graph, and optimizers
and quantizers rename, fuse and add nodes. The tags come back in three steps:

1. by name: a node whose name is in the tagged file keeps that node's tag;
2. by name stem: a node named after a node or value of the tagged file, the way
   onnxruntime and its quantizer name what they make (``X_quant``, ``X_nchwc``,
   ``X/MatMulScaleFusion/``, ``fused X``), takes the tag of that node (of the value's
   producer). This rests on naming conventions of those tools, not on a contract;
3. by data flow: a node that produces a value of the tagged file stands for the nodes of
   the tagged file that computed it from values the derived file still has (a fusion) and
   that no other node of the derived file stands for; it takes the deepest module holding
   all of them;
4. by neighbours: a node left (new values only: a quantize step, a cast) takes the deepest
   module its consumers share, else its producers'.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelexport_core.errors import OutputPathError
from modelexport_core.format.graph import GraphIndex, node_key, used_values
from modelexport_core.format.sidecar import Attempt, build_sidecar, sidecar_path, write_sidecar
from modelexport_core.format.signals import deferred_signals
from modelexport_core.format.tagged import TaggedFile, load_graph, load_tagged
from modelexport_core.format.work_folder import close_work_folder, is_work_file, open_work_folder
from modelexport_core.format.writer import NodeTag, write_tags

if TYPE_CHECKING:
    import onnx

DERIVED_STRATEGY = "derived"


def common_tag(tags: list[str]) -> str:
    """The deepest tag that is an ancestor of (or equal to) every given tag."""
    if not tags:
        return ""
    parts = tags[0].split("/")
    for tag in tags[1:]:
        other = tag.split("/")
        keep = 0
        while keep < len(parts) and keep < len(other) and parts[keep] == other[keep]:
            keep += 1
        parts = parts[:keep]
    return "/".join(parts)


@dataclass
class DerivedTags:
    """Tags found for a derived file's nodes, and how each was found."""

    node_tags: dict[str, str]  # node key -> tag
    how: dict[str, str]  # node key -> "name", "name_stem", "data_flow", "neighbours" or "root"
    counts: dict[str, int] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)  # node key -> names of the tagged nodes it stands for

    @property
    def coverage(self) -> float:
        tagged = sum(1 for how in self.how.values() if how != "root")
        return tagged / len(self.how) if self.how else 1.0


def _values_of(graph: "onnx.GraphProto") -> set[str]:
    values = {v.name for v in graph.input} | {v.name for v in graph.output} | {t.name for t in graph.initializer}
    for node in graph.node:
        values.update(v for v in node.output if v)
        values.update(used_values(node))
    return values


def _fused_region(
    source: "onnx.GraphProto", producer: dict[str, int], outputs: list[str], kept: set[str], accounted: set[int]
) -> set[int]:
    """Nodes of the source graph that computed ``outputs`` from values the derived graph still has.

    The walk stops at values the derived graph still has and at nodes another derived node stands for.
    """
    region: set[int] = set()
    stack = [producer[v] for v in outputs if v in producer]
    while stack:
        i = stack.pop()
        if i in region:
            continue
        region.add(i)
        for value in used_values(source.node[i]):
            if value not in kept and value in producer and producer[value] not in accounted:
                stack.append(producer[value])
    return region


_STEM_SEPARATORS = ("_", "/", ".")
_FUSED_PREFIX = "fused "


def _name_stem(name: str, source_names: dict[str, int]) -> int | None:
    """The source node a derived node is named after: the longest source name it starts with at a separator."""
    if name.startswith(_FUSED_PREFIX) and name[len(_FUSED_PREFIX):] in source_names:
        return source_names[name[len(_FUSED_PREFIX):]]
    for end in range(len(name) - 1, 0, -1):  # longest first
        if name[end] in _STEM_SEPARATORS and name[:end] in source_names:
            return source_names[name[:end]]
    return None


def derive_tags(tagged: TaggedFile, derived: "onnx.ModelProto") -> DerivedTags:
    """A tag for every top-level node of ``derived`` from the tags of ``tagged``."""
    source = tagged.graph
    source_tags = {node.name: tagged.node_tags.get(node_key(node, i), "") for i, node in enumerate(source.node) if node.name}
    producer = {v: i for i, node in enumerate(source.node) for v in node.output if v}
    derived_values = _values_of(derived.graph)
    keys = [node_key(node, i) for i, node in enumerate(derived.graph.node)]
    found: dict[str, str] = {}
    how: dict[str, str] = {}
    sources: dict[str, list[str]] = {}
    # names a derived node can be named after: source node names, else source value names (their producer)
    source_names = {v: i for v, i in producer.items()}
    source_names.update({node.name: i for i, node in enumerate(source.node) if node.name})
    accounted: set[int] = set()
    for i, node in enumerate(derived.graph.node):
        if node.name and source_tags.get(node.name):
            found[keys[i]], how[keys[i]] = source_tags[node.name], "name"
            sources[keys[i]] = [node.name]
            accounted.add(source_names[node.name])
    for i, node in enumerate(derived.graph.node):
        if keys[i] in found or not node.name:
            continue
        stem = _name_stem(node.name, source_names)
        if stem is not None:
            tag = tagged.node_tags.get(node_key(source.node[stem], stem), "")
            if tag:
                found[keys[i]], how[keys[i]] = tag, "name_stem"
                sources[keys[i]] = [source.node[stem].name] if source.node[stem].name else []
                accounted.add(stem)
    for i, node in enumerate(derived.graph.node):
        if keys[i] in found:
            continue
        # values the fusion consumed and no longer exist mark its region; its own outputs start the walk
        known_outputs = [v for v in node.output if v in producer]
        if known_outputs:
            region = _fused_region(source, producer, known_outputs, derived_values - set(node.output), accounted)
            region_tags = [tagged.node_tags.get(node_key(source.node[j], j), "") for j in region]
            region_tags = [t for t in region_tags if t]
            if region_tags:
                found[keys[i]], how[keys[i]] = common_tag(region_tags), "data_flow"
                sources[keys[i]] = [source.node[j].name for j in sorted(region) if source.node[j].name]
    index = GraphIndex.of(derived.graph)
    missing = [i for i in range(len(keys)) if keys[i] not in found]
    for neighbours, order in ((index.node_consumers, reversed), (index.node_producers, iter)):
        changed = True
        while missing and changed:
            changed = False
            left = []
            for i in order(missing):
                known = [found[keys[j]] for j in neighbours(derived.graph, i) if keys[j] in found]
                if known:
                    found[keys[i]], how[keys[i]] = common_tag(known), "neighbours"
                    changed = True
                else:
                    left.append(i)
            missing = sorted(left)
    root = common_tag(sorted(set(tagged.node_tags.values()))) if tagged.node_tags else ""
    for i in missing:
        found[keys[i]], how[keys[i]] = root, "root"
    counts: dict[str, int] = defaultdict(int)
    for value in how.values():
        counts[value] += 1
    return DerivedTags(found, how, dict(counts), sources)


@dataclass
class DerivedReport:
    """What tag --from wrote."""

    output: Path
    sidecar: Path
    nodes: int
    coverage: float
    counts: dict[str, int]


def _sidecar(tagged: TaggedFile, derived: "onnx.ModelProto", result: DerivedTags, modules: dict[str, str],
             source_path: Path) -> dict[str, Any]:
    source = tagged.sidecar or {}
    nodes = {}
    for i, node in enumerate(derived.graph.node):
        key = node_key(node, i)
        nodes[key] = {"tag": result.node_tags[key], "module": modules.get(result.node_tags[key], ""),
                      "op_type": node.op_type, "found_by": result.how[key]}
    module_entries = source.get("modules") or {
        name: {"tag": tag, "class": tag.rsplit("/", 1)[-1].split(".")[0], "kept": True} for tag, name in modules.items()
    }
    return build_sidecar(
        strategy=DERIVED_STRATEGY,
        attempts=[Attempt(DERIVED_STRATEGY, "ok", "")],
        model_info=source.get("model") or {"class": module_entries.get("", {}).get("class", "")},
        modules=module_entries,
        nodes=nodes,
        export_info=dict(source.get("export") or {}, derived_from=str(source_path), source_strategy=source.get("strategy")),
        details={"coverage": result.coverage, "found_by": result.counts},
    )


def _copy_external_data(model: "onnx.ModelProto", source_folder: Path, target_folder: Path, output_name: str) -> None:
    """Copy the external data files the derived graph refers to beside the tagged copy, renamed after it."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    external = [tensor for tensor in model.graph.initializer if uses_external_data(tensor)]
    locations = sorted({ExternalDataInfo(tensor).location for tensor in external})
    renamed = {loc: f"{output_name}.data" if len(locations) == 1 else f"{output_name}.{i}.data" for i, loc in enumerate(locations)}
    for location, new_name in renamed.items():
        if not (source_folder / location).is_file():
            raise OutputPathError(f"external data file {source_folder / location} is missing")
        shutil.copyfile(source_folder / location, target_folder / new_name)
    for tensor in external:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = renamed[entry.value]


def tag_derived(derived_path: Path, tagged_path: Path, output: Path, *, viewer_keys: bool = True) -> DerivedReport:
    """Write ``output``: ``derived_path`` with tags carried over from ``tagged_path``, and its sidecar."""
    import onnx

    tagged = load_tagged(tagged_path)
    derived_path = Path(derived_path).expanduser()
    derived = load_graph(derived_path)
    result = derive_tags(tagged, derived)
    modules = {tag: name for name, tag in tagged.module_tags().items()}
    node_tags = {key: NodeTag(tag, modules.get(tag, "")) for key, tag in result.node_tags.items()}
    output = Path(output).expanduser()
    if output.resolve() in (derived_path.resolve(), tagged.path.resolve()):
        raise OutputPathError(f"{output} is one of the input files; give another name")
    output.parent.mkdir(parents=True, exist_ok=True)
    workdir = open_work_folder(output.parent)
    try:
        write_tags(derived, node_tags, strategy=DERIVED_STRATEGY, viewer_keys=viewer_keys)
        _copy_external_data(derived, derived_path.parent, workdir, output.name)
        onnx.save(derived, str(workdir / output.name))
        document = _sidecar(tagged, derived, result, modules, tagged.path)
        write_sidecar(document, workdir / sidecar_path(output).name)
        produced_files = [p for p in workdir.iterdir() if not is_work_file(p)]
        with deferred_signals():
            for produced in sorted(produced_files, key=lambda p: p.name == output.name):
                os.replace(produced, output.parent / produced.name)
    finally:
        close_work_folder(workdir)
    return DerivedReport(output, sidecar_path(output), len(derived.graph.node), result.coverage, result.counts)

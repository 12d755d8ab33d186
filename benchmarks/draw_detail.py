"""Where one strategy's tags part from PyTorch's records on one generated model: nodes grouped by
(the strategy's module, PyTorch's module, op type). For the development draw: a held-out draw is not debugged on.

    .venv-bench/bin/python benchmarks/draw_detail.py transformers:bert@0.0 htp [BATCH] [--nodes]

The export and the judgement are the sweep's own (`zoo_sweep.run_cell`): `export_model` with that strategy alone
(its exporters in turn, verified), and the hierarchy tags of the published file against PyTorch's records, a tag at
or below a module whose forward the dynamo exporter inlined agreeing (`measure_agreement`). So the figure printed
is the figure the sweep writes for that cell. ``--nodes`` also lists each disagreeing node in graph order, with the
pass that decided its tag.
"""
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx  # noqa: E402
import zoo_sweep  # noqa: E402

from modelexport_core.export.pipeline import ExportOptions, export_model  # noqa: E402
from modelexport_core.format.reference import inlined_nodes  # noqa: E402
from modelexport_core.format.tags import HierarchyTags, is_ancestor  # noqa: E402
from modelexport_core.measure.agreement import reference_modules, sibling_contamination  # noqa: E402

arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
name, strategy = arguments[0], arguments[1]
batch = int(arguments[2]) if len(arguments) > 2 else 1
zoo_sweep.CATALOG.generated = True
loaded = zoo_sweep.CATALOG.load(name, batch)
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "m.onnx"
    report = export_model(loaded, path, ExportOptions(strategies=[strategy]))
    graph = onnx.load(str(path), load_external_data=False)
exporter = report.sidecar["export"]["exporter"]
nodes = report.sidecar["nodes"]
tags = HierarchyTags.from_model(loaded.model, False)
reference = reference_modules(graph, exporter, [n for n, _ in loaded.model.named_modules()], wrapped=False)
known = {node: module for node, module in reference.items() if module is not None}
inside = inlined_nodes(graph) if exporter == "dynamo" else set()
wrong = [node for node, module in known.items() if nodes[node]["tag"] != tags.tag_of(module)
         and not (node in inside and is_ancestor(module, nodes[node]["module"]))]
contaminated = sibling_contamination({n: e["module"] for n, e in nodes.items()},
                                     {n: tags.kept_module(m) for n, m in known.items()})
print(exporter, len(known), "agreement", round(1 - len(wrong) / len(known), 4), "contaminated", len(contaminated))
ops = {node.name: node.op_type for node in graph.graph.node}
groups = Counter((nodes[n]["module"], known[n], ops[n]) for n in wrong)
for (mine, theirs, op), count in groups.most_common(15):
    print(f"{count:3} {strategy} {mine!r} torch {theirs!r} {op}")
if "--nodes" in sys.argv:
    order = {node.name: i for i, node in enumerate(graph.graph.node)}
    for n in sorted(wrong, key=order.__getitem__):
        print(order[n], ops[n], n, "tag", nodes[n]["module"], "torch", known[n], "by", nodes[n].get("by"))

"""Tagging cost against graph size: one architecture at 2 to 32 layers, and a synthetic 100,000-node graph.

Run: .venv/bin/python benchmarks/scaling.py [--layers 2,4,8,16,32] [--strategies builtin_tracking,fx]
Each depth runs in its own process and splits the work in three: the exporter (torch.onnx.export),
the strategy's attribution (the rest of its ``export``), and the core's tagging (reading the graph,
node tags, tag writing, checker, writing the file back, the sidecar). Time and Python memory of
the last two should grow linearly with the node count; the script fits a line through them and
writes the figures into docs/overhead.md. Not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from report import DOC, ROOT, command_line, load, machine, replace_section, today

FACTORY = f"{ROOT / 'benchmarks' / 'bench_models.py'}:scaled_bert"
CORE_STEPS = ("read_graph", "node_tags", "write_tags", "checker", "write_file", "sidecar")


def _timed_exporter():
    """Wrap torch.onnx.export and torch.export.export (the capture) so their seconds count apart from the strategy's."""
    import torch.export
    import torch.onnx

    spent = [0.0]
    depth = [0]

    def timed(original):
        def export(*args, **kwargs):
            depth[0] += 1
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # torch.onnx.export may call torch.export.export itself
                    spent[0] += time.perf_counter() - started
        return export

    torch.onnx.export = timed(torch.onnx.export)
    torch.export.export = timed(torch.export.export)
    return spent


def core_tagging(ctx, loaded, onnx_path: Path, result, strategy: str, tags) -> dict[str, float]:
    """The core's tagging of an exported file, as ``export`` does it, each step timed."""
    import os
    from dataclasses import replace

    from modelexport_core.export.pipeline import (
        ExportOptions,
        ExportRun,
        TaggedFile,
        _sidecar_document,
        node_tags_from_result,
    )
    from modelexport_core.format.graph import strip_wrapper_names
    from modelexport_core.format.onnx_file import check_graph, load_graph, save_graph
    from modelexport_core.format.sidecar import Attempt, sidecar_path, write_sidecar
    from modelexport_core.format.writer import write_tags

    steps: dict[str, float] = {}
    clock, cpu_clock = time.perf_counter(), time.process_time()

    def lap(name: str) -> None:
        # wall time, and this process's CPU time: on a loaded machine the second is what an idle core would take
        nonlocal clock, cpu_clock
        now, cpu_now = time.perf_counter(), time.process_time()
        steps[name], steps[f"{name}_cpu"] = now - clock, cpu_now - cpu_clock
        clock, cpu_clock = now, cpu_now

    model = load_graph(onnx_path)
    lap("read_graph")
    renamed = strip_wrapper_names(model.graph)
    result = replace(result, node_modules={renamed.get(n, n): m for n, m in result.node_modules.items()})
    node_tags = node_tags_from_result(model, result, tags)
    lap("node_tags")
    write_tags(model, node_tags, strategy=strategy)
    lap("write_tags")
    check_graph(model, onnx_path)
    lap("checker")
    tagged_path = onnx_path.with_name(f"tagged-{onnx_path.name}")
    save_graph(model, onnx_path, tagged_path)
    os.replace(tagged_path, onnx_path)
    lap("write_file")
    run = ExportRun(loaded, ctx, tags, ExportOptions(verify=False), onnx_path, onnx_path.parent)
    tagged = TaggedFile(strategy, result, ctx, onnx_path, model, node_tags)
    write_sidecar(_sidecar_document(run, tagged, [Attempt(strategy, "ok")]), sidecar_path(onnx_path))
    lap("sidecar")
    steps["nodes"] = len(model.graph.node)
    return steps


def _core_tagging_measured(ctx, loaded, onnx_path: Path, result, strategy: str, tags) -> dict[str, float]:
    """Core tagging timed on a copy of the file, then run again under tracemalloc for its memory."""
    import shutil

    timed = onnx_path.with_name("timed.onnx")
    shutil.copyfile(onnx_path, timed)
    steps = core_tagging(ctx, loaded, timed, result, strategy, tags)
    tracemalloc.start()
    core_tagging(ctx, loaded, onnx_path, result, strategy, tags)
    steps["core_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return steps


def child(layers: int, strategy: str, workdir: Path) -> dict[str, float]:
    """One depth, one strategy, in this process: exporter, attribution and core tagging apart."""
    import os
    import warnings

    warnings.simplefilter("ignore")
    os.environ["BENCH_LAYERS"] = str(layers)
    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.plugin.discovery import get_strategy
    from modelexport_core.prepare.context import make_context
    from modelexport_core.prepare.models import load_model

    loaded = load_model(FACTORY)
    ctx = make_context(loaded.model, loaded.inputs, dynamic=strategy != "fx", by_keyword=loaded.by_keyword)
    tags = HierarchyTags.from_model(loaded.model)
    exporter = _timed_exporter()
    onnx_path = workdir / f"{strategy}-{layers}.onnx"
    started = time.perf_counter()
    result = get_strategy(strategy).strategy().export(ctx, onnx_path)
    strategy_seconds = time.perf_counter() - started
    steps = _core_tagging_measured(ctx, loaded, onnx_path, result, strategy, tags)
    steps["exporter"] = exporter[0]
    steps["attribution"] = strategy_seconds - exporter[0]
    steps["core"] = sum(v for k, v in steps.items() if k in CORE_STEPS)
    return steps


def synthetic(nodes: int, workdir: Path) -> dict[str, float]:
    """Core tagging of a generated graph: a chain of ``nodes`` nodes over 1,000 nested modules."""
    import warnings

    warnings.simplefilter("ignore")
    import onnx
    import torch
    from onnx import TensorProto, helper

    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.plugin.strategy import TaggingResult
    from modelexport_core.prepare.context import make_context
    from modelexport_core.prepare.models import LoadedModel

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.parts = torch.nn.ModuleList(Part() for _ in range(10))

    class Part(torch.nn.Module):
        pass

    class Synthetic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block() for _ in range(100))

        def forward(self, x):
            return x

    model = Synthetic()
    per_part = max(nodes // 1000, 1)

    def module(i: int) -> str:
        return f"blocks.{i // per_part // 10 % 100}.parts.{i // per_part % 10}"

    # names as an exporter writes them through the core's wrapper, so the core's renaming has work to do
    graph_nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"/model/{module(i)}/Relu_{i}")
                   for i in range(nodes)]
    graph = helper.make_graph(graph_nodes, "synthetic",
                              [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(f"v{nodes}", TensorProto.FLOAT, [2])])
    onnx_path = workdir / "synthetic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(onnx_path))
    result = TaggingResult(
        node_modules={f"/model/{module(i)}/Relu_{i}": module(i) for i in range(nodes)},
        exporter="torchscript",
    )
    loaded = LoadedModel(model, "synthetic", "factory")
    ctx = make_context(model, {"v0": torch.zeros(2)}, by_keyword=False)
    steps = _core_tagging_measured(ctx, loaded, onnx_path, result, "synthetic", HierarchyTags.from_model(model))
    started = time.perf_counter()
    cpu_started = time.process_time()
    sum(i * i for i in range(3_000_000))  # a fixed amount of pure Python, to read the figures against the load
    steps["calibration"] = time.perf_counter() - started
    steps["calibration_cpu"] = time.process_time() - cpu_started
    steps["core"] = sum(v for k, v in steps.items() if k in CORE_STEPS)
    steps["core_cpu"] = sum(steps[f"{k}_cpu"] for k in CORE_STEPS)
    return steps


def fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares line ``y = slope * x + intercept`` and its R^2."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    intercept = my - slope * mx
    total = sum((y - my) ** 2 for y in ys)
    residual = sum((y - slope * x - intercept) ** 2 for x, y in zip(xs, ys))
    return slope, intercept, 1 - residual / total if total else 1.0


def run_child(arguments: list[str]) -> dict[str, float]:
    output = subprocess.run([sys.executable, __file__, "--child", *arguments], capture_output=True, text=True,
                            cwd=ROOT, check=False)
    if output.returncode:
        raise SystemExit(f"child {arguments} failed: {output.stderr.strip().splitlines()[-1:]}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="2,4,8,16,32")
    parser.add_argument("--strategies", default="builtin_tracking,fx")
    parser.add_argument("--synthetic", type=int, default=100_000, help="nodes of the synthetic graph (0: skip)")
    parser.add_argument("--output", type=Path, default=DOC)
    parser.add_argument("--section", default="scaling", help="name of the section of the file to replace")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import tempfile

    if args.child:
        with tempfile.TemporaryDirectory() as tmp:
            if args.child[0] == "synthetic":
                print(json.dumps(synthetic(int(args.child[1]), Path(tmp))))
            else:
                print(json.dumps(child(int(args.child[0]), args.child[1], Path(tmp))))
        return 0
    load_before = load()
    lines = [
        f"Measured {today()} on {machine()}; load average {load_before} before, LOAD_AFTER after.",
        f"Command: `{command_line()}`. Model: `benchmarks/bench_models.py:scaled_bert` (hidden 64, sequence 32),",
        "each depth in its own process. *attribution* is the strategy's own work after the exporter;",
        "*core* is reading the graph, renaming and node tags, tag writing, the checker, writing the file back and the",
        "sidecar; *core MB* is the peak of Python allocations (tracemalloc) during the core's part.",
        "",
        "| strategy | layers | nodes | exporter s | attribution s | core s | core MB | µs per node (attribution + core) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fits = []
    for strategy in args.strategies.split(","):
        rows = []
        for layers in [int(n) for n in args.layers.split(",")]:
            steps = run_child([str(layers), strategy])
            rows.append(steps)
            work = steps["attribution"] + steps["core"]
            print(f"{strategy} {layers} layers: {json.dumps({k: round(v, 3) for k, v in steps.items()})}",
                  file=sys.stderr, flush=True)
            lines.append(f"| {strategy} | {layers} | {steps['nodes']:.0f} | {steps['exporter']:.2f} | "
                         f"{steps['attribution']:.3f} | {steps['core']:.3f} | {steps['core_peak_mb']:.1f} | "
                         f"{work / steps['nodes'] * 1e6:.0f} |")
        nodes = [r["nodes"] for r in rows]
        time_fit = fit(nodes, [r["attribution"] + r["core"] for r in rows])
        memory_fit = fit(nodes, [r["core_peak_mb"] for r in rows])
        fits.append(f"- {strategy}: time = {time_fit[0] * 1e6:.1f} µs per node x nodes + {time_fit[1]:.3f} s "
                    f"(R² {time_fit[2]:.3f}); core memory = {memory_fit[0] * 1024:.2f} KB per node x nodes + "
                    f"{memory_fit[1]:.1f} MB (R² {memory_fit[2]:.3f})")
    lines += ["", "Fitted lines (least squares over the depths):", *fits]
    if args.synthetic:
        steps = run_child(["synthetic", str(args.synthetic)])
        print(f"synthetic: {json.dumps({k: round(v, 3) for k, v in steps.items()})}", file=sys.stderr)
        tag_and_sidecar = steps["core"] - steps["checker"]
        tag_and_sidecar_cpu = steps["core_cpu"] - steps["checker_cpu"]
        lines += [
            "",
            f"Synthetic graph of {steps['nodes']:.0f} nodes over 1,000 modules: reading the graph, renaming, tag "
            f"writing, writing the file and the sidecar {tag_and_sidecar_cpu:.2f} s of CPU time, what an idle core "
            f"takes ({tag_and_sidecar:.2f} s wall here; read graph {steps['read_graph_cpu']:.2f}, renaming and node "
            f"tags {steps['node_tags_cpu']:.2f}, write tags {steps['write_tags_cpu']:.2f}, write file "
            f"{steps['write_file_cpu']:.2f}, sidecar {steps['sidecar_cpu']:.2f} s CPU); the ONNX checker adds "
            f"{steps['checker_cpu']:.2f} s CPU; Python peak {steps['core_peak_mb']:.0f} MB. In the same process a "
            f"fixed pure-Python loop (3 million steps) took {steps['calibration']:.2f} s wall and "
            f"{steps['calibration_cpu']:.2f} s CPU: the ratio of the two is how far the load slowed the wall times.",
        ]
    text = "\n".join(lines).replace("LOAD_AFTER", load())
    replace_section(args.output, args.section, "## Scaling with graph size\n\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

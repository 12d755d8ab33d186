"""How long `modelexport report` pages take to open and to answer in chromium, on large graphs.

Run: .venv/bin/python benchmarks/report_open_time.py [--nodes 100000] [--repeat 3] [--screenshot docs/report.png]
Needs chromium (`apt-get install chromium`) and playwright (the test extra). Two files:
- a 12-layer BERT-base (transformers' BertConfig defaults, random weights) exported by `modelexport export`;
- a synthetic tagged graph of ``--nodes`` nodes over 5,000 modules four levels deep (100 blocks of 10 parts
  of 5 units), each unit a MatMul on its own 8x8 weight followed by a chain of Relu and Add.
For each, the report is written and opened ``--repeat`` times; the figures are the page's own clock
(performance.now() since navigation start) when its first drawing is done, and how long switching the
measure, expanding a module, searching and clicking the root module (listing all its nodes) take in the
page. With ``--screenshot`` the BERT-base report (with --profile) is saved as a picture. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
MODELEXPORT = [sys.executable, "-m", "modelexport_core.cli"]


def synthetic_tagged(nodes: int, path: Path) -> None:
    """A tagged ONNX file of ``nodes`` nodes over 100 x 10 x 5 nested modules (no sidecar)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from modelexport_core.format.writer import MODULE_KEY, TAG_KEY

    units = 100 * 10 * 5
    per_unit = max(nodes // units, 2)
    graph_nodes, initializers = [], []
    value = "x"
    for i in range(nodes):
        unit = min(i // per_unit, units - 1)
        block, part, leaf = unit // 50, unit // 5 % 10, unit % 5
        module = f"blocks.{block}.parts.{part}.units.{leaf}"
        tag = f"/Synthetic/Block.{block}/Part.{part}/Unit.{leaf}"
        out = f"v{i}"
        if i % per_unit == 0 and unit * per_unit == i:
            weight = f"{module}.weight"
            initializers.append(numpy_helper.from_array(np.full((8, 8), 0.01, dtype=np.float32), weight))
            node = helper.make_node("MatMul", [value, weight], [out], name=f"node_MatMul_{i}")
        elif i % 2:
            node = helper.make_node("Relu", [value], [out], name=f"node_Relu_{i}")
        else:
            node = helper.make_node("Add", [value, f"v{i - 2}"], [out], name=f"node_Add_{i}")
        node.metadata_props.add(key=TAG_KEY, value=tag)
        node.metadata_props.add(key=MODULE_KEY, value=module)
        graph_nodes.append(node)
        value = out
    graph = helper.make_graph(graph_nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info(value, TensorProto.FLOAT, [2, 8])], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


def _run(*args: str) -> None:
    subprocess.run([*MODELEXPORT, *args], check=True, cwd=ROOT)


MEASURE_IN_PAGE = """() => {
  const timed = (work) => { const t = performance.now(); work(); return performance.now() - t; };
  const select = document.getElementById('measure');
  const measure = timed(() => { select.value = 'parameters'; select.dispatchEvent(new Event('change')); });
  const expand = timed(() => document.querySelector('#tree .tree-row:not(.expanded) .toggle:not(:empty)').click());
  const click = timed(() => document.querySelector('#tree .tree-row .name').click());
  return {ready: window.modelexportReport.readyMs, measure, expand, click,
          rows: document.querySelectorAll('#node-table tbody tr').length, cells: document.querySelectorAll('#chart g.cell').length};
}"""


def open_times(browser, html: Path, repeat: int, query: str) -> dict[str, float]:
    """Median figures of ``repeat`` fresh openings of ``html``, in milliseconds."""
    runs = []
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        started = time.perf_counter()
        page.goto(html.resolve().as_uri(), timeout=120_000)
        page.wait_for_function("window.modelexportReport && window.modelexportReport.ready", timeout=120_000)
        loaded = (time.perf_counter() - started) * 1000
        figures = page.evaluate(MEASURE_IN_PAGE)
        started = time.perf_counter()
        page.fill("#search", query)
        page.wait_for_selector("#tree .tree-row.match", timeout=60_000)
        figures["search"] = (time.perf_counter() - started) * 1000 - 120  # less the page's own 120 ms typing pause
        figures["goto"] = loaded
        assert not errors, errors
        runs.append(figures)
        page.close()
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes of the synthetic graph")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategy", default="fx", help="strategy for the BERT-base export")
    parser.add_argument("--screenshot", type=Path, help="save a picture of the BERT-base report here")
    parser.add_argument("--workdir", type=Path, help="keep the files here (default: a temporary folder)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bert = work / "bert_base.onnx"
        if not bert.exists():
            _run("export", "benchmarks/bench_models.py:bert_base", str(bert), "-s", args.strategy, "--no-verify")
        synthetic = work / f"synthetic_{args.nodes}.onnx"
        started = time.perf_counter()
        synthetic_tagged(args.nodes, synthetic)
        print(f"synthetic graph written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        files = {}
        for name, source, extra in (("BERT-base", bert, ["--profile", "--runs", "3"] if args.screenshot else []),
                                    (f"synthetic {args.nodes:,} nodes", synthetic, [])):  # noqa: E501
            html = source.with_suffix(".html")
            started = time.perf_counter()
            _run("report", str(source), "-o", str(html), *extra)
            files[name] = (html, time.perf_counter() - started)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            print("| file | nodes | modules | HTML | report written | page drawn | load (goto to drawn) "
                  "| switch measure | expand a module | click root (list nodes) | search |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, (html, seconds) in files.items():
                page = browser.new_page()
                page.goto(html.resolve().as_uri(), timeout=120_000)
                page.wait_for_function("window.modelexportReport && window.modelexportReport.ready", timeout=120_000)
                size = page.evaluate("[window.modelexportReport.nodes, window.modelexportReport.modules]")
                page.close()
                t = open_times(browser, html, args.repeat, "layer.11" if name == "BERT-base" else "units.3")
                print(f"| {name} | {size[0]:,} | {size[1]:,} | {html.stat().st_size / 1e6:.1f} MB | {seconds:.1f} s "
                      f"| {t['ready']:.0f} ms | {t['goto']:.0f} ms | {t['measure']:.0f} ms | {t['expand']:.0f} ms "
                      f"| {t['click']:.0f} ms | {t['search']:.0f} ms |")
            if args.screenshot:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(files["BERT-base"][0].resolve().as_uri())
                page.wait_for_function("window.modelexportReport && window.modelexportReport.ready")
                page.select_option("#measure", "time")
                page.locator('#tree .tree-row[data-tag="/BertModel/BertEncoder"] .toggle').click()
                page.locator('#tree .tree-row[data-tag="/BertModel/BertEncoder/BertLayer.0"] .toggle').click()
                page.locator('#tree .tree-row[data-tag="/BertModel/BertEncoder/BertLayer.0/BertAttention"] .name').click()
                page.locator('#chart g.cell[data-tag="/BertModel/BertEncoder/BertLayer.3"]').hover()
                args.screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.screenshot))
                print(f"screenshot: {args.screenshot}", file=sys.stderr)
            browser.close()


if __name__ == "__main__":
    main()

"""``modelexport report`` and ``modelexport view``: the report's figures against the other tools, and the
pages in a real browser (chromium from the system, driven by Playwright; skipped where either is missing)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from modelexport_core.cli import app
from modelexport_core.export.pipeline import ExportOptions, export_model
from modelexport_core.prepare.models import load_model
from modelexport_core.prepare.presets import PRESETS

MODEL = "preset:bert"
CHROMIUM = os.environ.get("MODELEXPORT_CHROMIUM", "/usr/bin/chromium")
runner = CliRunner()


@pytest.fixture(scope="module")
def tagged_bert(tmp_path_factory) -> Path:
    """preset:bert exported once through the TorchScript exporter (the quickest) for the whole module."""
    path = tmp_path_factory.mktemp("report") / "bert.onnx"
    export_model(load_model(MODEL), path, ExportOptions(strategies=["builtin_tracking"]))
    return path


def _invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def _cli_json(*args: str) -> dict | list:
    return json.loads(_invoke(*args, "--json").stdout)


def report_data(html: Path) -> dict:
    """The figures a report page was written with (the JSON in its #report-data element)."""
    text = html.read_text()
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    assert found, "the report carries its figures in #report-data"
    return json.loads(found.group(1))


def _steady_kernel_times(monkeypatch) -> None:
    """onnxruntime's node times vary from run to run: give each node a time of its name, in both commands."""
    from modelexport_core.tools import profiling

    real = profiling.kernel_times

    def steady(trace):
        times, runs = real(trace)
        return {name: float(runs * (1 + sum(map(ord, name)) % 97)) for name in times}, runs

    monkeypatch.setattr(profiling, "kernel_times", steady)


# 1. figures against the other tools


def test_report_figures_equal_inspect_profile_and_numerics(tmp_path, tagged_bert, monkeypatch):
    _steady_kernel_times(monkeypatch)
    output = tmp_path / "report.html"
    _invoke("report", str(tagged_bert), "-o", str(output), "--profile", "--runs", "2", "--numerics", MODEL)
    data = report_data(output)
    modules = {m["tag"]: m for m in data["modules"]}

    inspected = _cli_json("inspect", str(tagged_bert))
    seen = 0
    stack = [inspected["tree"]]
    while stack:
        branch = stack.pop()
        figures = modules[branch["tag"]]
        assert (figures["nodes"], figures["total_nodes"], figures["op_types"]) == (
            branch["nodes"], branch["total_nodes"], branch["op_types"]), branch["tag"]
        seen += 1
        stack.extend(branch["children"])
    assert seen == len(modules)
    assert data["header"]["nodes"] == inspected["nodes"] and data["header"]["tagged"] == inspected["nodes"] - inspected["untagged"]

    profiled = _cli_json("profile", str(tagged_bert), "--runs", "2")
    timed = {row["tag"]: row for row in profiled["modules"]}
    assert timed and set(timed) <= set(modules)
    for tag, figures in modules.items():  # a module none of whose nodes onnxruntime ran took no time
        row = timed.get(tag, {"self_us": 0.0, "total_us": 0.0, "share": 0.0, "nodes": 0})
        assert (figures["time_self_us"], figures["time_us"], figures["time_share"], figures["time_nodes"]) == (
            row["self_us"], row["total_us"], row["share"], row["nodes"]), tag

    compared = _cli_json("numerics", MODEL, str(tagged_bert))
    assert data["header"]["first_divergent"] == compared["first_divergent"]
    by_tag = {row["tag"]: row for row in compared["modules"]}
    assert by_tag
    for tag, row in by_tag.items():
        figures = modules[tag]
        assert (figures["error_max_abs"], figures["error_max_rel"], figures["error_input_max_abs"],
                figures["diverges"], figures["error_enters"]) == (
            row["max_abs"], row["max_rel"], row["input_max_abs"], row["diverges"], row["error_enters"]), tag


def test_report_parameters_are_the_initializers_a_module_reads(tmp_path, tagged_bert):
    from modelexport_core.format.tagged import load_tagged

    output = tmp_path / "report.html"
    _invoke("report", str(tagged_bert), "-o", str(output))
    modules = {m["module"]: m for m in report_data(output)["modules"] if m["module"]}
    tagged = load_tagged(tagged_bert)
    graph = onnx.load(str(tagged_bert)).graph
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    for name in ("encoder.layer.1", "encoder.layer.1.attention.self", "pooler"):
        tag, _ = tagged.resolve(name)
        read = {i for index in tagged.node_indices(tag) for i in graph.node[index].input if i in initializers}
        assert modules[name]["total_parameters"] == sum(initializers[i].size for i in read), name
        assert modules[name]["total_parameter_bytes"] == sum(initializers[i].nbytes for i in read), name
    # a layer holds its weight matrices: a Linear of 32x32 alone is 1024 elements
    assert modules["encoder.layer.1"]["total_parameters"] > modules["encoder.layer.1.attention.self"]["total_parameters"] >= 3 * 1024


def test_report_refuses_in_one_line(tmp_path, tagged_bert):
    plain = onnx.load(str(tagged_bert))
    for node in plain.graph.node:
        del node.metadata_props[:]
    onnx.save(plain, str(tmp_path / "plain.onnx"))
    for args in (["report", str(tmp_path / "plain.onnx"), "-o", str(tmp_path / "r.html")],
                 ["report", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "r.html")],
                 ["report", str(tagged_bert), "-o", str(tmp_path)]):
        result = runner.invoke(app, args)
        lines = [line for line in result.output.strip().splitlines() if line.strip()]
        assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert not (tmp_path / "r.html").exists()


# 2. in the browser


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--use-gl=swiftshader", "--enable-unsafe-swiftshader"],
        )
        yield launched
        launched.close()


class Page:
    """A page of the browser that records console errors and uncaught exceptions."""

    def __init__(self, browser, url: str):
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto(url)

    def __enter__(self):
        return self.page

    def __exit__(self, *exc):
        self.page.close()


def open_report(browser, html: Path) -> Page:
    opened = Page(browser, html.resolve().as_uri())
    opened.page.wait_for_function("window.modelexportReport && window.modelexportReport.ready", timeout=30_000)
    return opened


@pytest.fixture(scope="module")
def report_html(tagged_bert) -> Path:
    output = tagged_bert.with_name("bert.report.html")
    _invoke("report", str(tagged_bert), "-o", str(output), "--profile", "--runs", "1")
    return output


@pytest.mark.browser
def test_report_in_chromium(browser, report_html, tagged_bert):
    opened = open_report(browser, report_html)
    data = report_data(report_html)
    with opened as page:
        header = page.locator("#header").inner_text()
        assert "BertModel" in header and "builtin_tracking" in header and "passed" in header

        rows = page.locator("#tree .tree-row")
        assert rows.first.get_attribute("data-tag") == "/BertModel"
        top = [rows.nth(i).get_attribute("data-tag") for i in range(rows.count())]
        assert top == ["/BertModel", "/BertModel/BertEmbeddings", "/BertModel/BertEncoder", "/BertModel/BertPooler"]
        assert page.locator("#chart g.cell").count() == len(data["modules"])

        # expand a module: its children appear below it
        encoder = page.locator('#tree .tree-row[data-tag="/BertModel/BertEncoder"]')
        encoder.locator(".toggle").click()
        assert page.locator('#tree .tree-row[data-tag="/BertModel/BertEncoder/BertLayer.1"]').is_visible()
        assert page.locator("#tree .tree-row").count() == 6

        # search by named_modules() name: the module is revealed and marked, in the tree and in the chart
        page.fill("#search", "layer.1.attention.self")
        page.wait_for_selector("#tree .tree-row.match")
        marked = page.locator("#tree .tree-row.match")
        assert marked.count() == 1 and marked.get_attribute("data-module") == "encoder.layer.1.attention.self"
        assert page.locator("#search-count").inner_text() == "1 module"
        assert page.locator("#chart g.cell.match").count() == 1

        # switch the measure: the chart is redrawn and the tree shows the new figure
        def share(key: str) -> float:  # the embeddings' part of the chart's width by a measure
            inside = sum(m[key] for m in data["modules"] if m["tag"].startswith("/BertModel/BertEmbeddings"))
            return inside / sum(m[key] for m in data["modules"])

        full = float(page.locator('#chart g.cell[data-tag="/BertModel"] rect').get_attribute("width"))
        cell = page.locator('#chart g.cell[data-tag="/BertModel/BertEmbeddings"] rect')
        assert float(cell.get_attribute("width")) == pytest.approx(full * share("nodes"), rel=1e-6)
        page.select_option("#measure", "parameters")
        assert float(cell.get_attribute("width")) == pytest.approx(full * share("parameters"), rel=1e-6)
        assert share("parameters") > 1.5 * share("nodes")  # the embeddings hold much of the weights, few of the nodes
        embeddings = next(m for m in data["modules"] if m["tag"] == "/BertModel/BertEmbeddings")
        figure = page.locator('#tree .tree-row[data-tag="/BertModel/BertEmbeddings"] .figure').inner_text()
        assert figure == f"{embeddings['total_parameters']:,}"
        page.select_option("#measure", "time")
        assert page.locator("#chart g.cell").count() >= 1

        # hover shows the figures
        page.locator('#chart g.cell[data-tag="/BertModel/BertPooler"]').hover()
        assert "parameters" in page.locator("#tooltip").inner_text()

        # clicking a box zooms the chart into it; the line above leads back up
        page.locator('#chart g.cell[data-tag="/BertModel/BertEncoder"] rect').click()
        assert page.locator("#breadcrumb a").all_inner_texts() == ["BertModel", "BertEncoder"]
        zoomed = float(page.locator('#chart g.cell[data-tag="/BertModel/BertEncoder"] rect').get_attribute("width"))
        assert zoomed == pytest.approx(full, rel=1e-6)
        assert page.locator('#chart g.cell[data-tag="/BertModel/BertEmbeddings"]').count() == 0
        page.locator("#breadcrumb a", has_text="BertModel").click()
        assert page.locator('#chart g.cell[data-tag="/BertModel/BertEmbeddings"]').count() == 1

        # click a module: its nodes, in graph order, with op types and values
        page.locator('#tree .tree-row[data-module="encoder.layer.1.attention.self"] .name').click()
        expected = _cli_json("nodes", str(tagged_bert), "--module", "encoder.layer.1.attention.self")
        listed = page.locator("#node-table tbody tr")
        assert [listed.nth(i).get_attribute("data-node") for i in range(listed.count())] == expected
        graph = {n.name: n for n in onnx.load(str(tagged_bert), load_external_data=False).graph.node}
        first = listed.first.locator("td")
        node = graph[expected[0]]
        assert first.nth(1).inner_text() == node.op_type
        assert first.nth(3).inner_text() == ", ".join(node.input)
        assert first.nth(4).inner_text() == ", ".join(node.output)
        assert "BertSelfAttention" in page.locator("#details h2").inner_text()
    assert opened.errors == []


@pytest.mark.browser
def test_report_with_error_marks_the_first_divergent_module(browser, tmp_path, tagged_bert):
    """A weight of one layer changed by hand: the page marks that layer as where the error comes in."""
    from modelexport_core.format.tagged import load_tagged

    tagged = load_tagged(tagged_bert)
    tag, _ = tagged.resolve("encoder.layer.1.intermediate")
    model = onnx.load(str(tagged_bert))
    reads = {i for index in tagged.node_indices(tag) for i in model.graph.node[index].input}
    weight = next(t for t in model.graph.initializer if t.name in reads and len(t.dims) == 2)
    values = onnx.numpy_helper.to_array(weight).copy()
    values[0, 0] += 5.0
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    changed = tmp_path / "changed.onnx"
    onnx.save(model, str(changed))
    shutil.copy(tagged_bert.with_name("bert.hierarchy.json"), tmp_path / "changed.hierarchy.json")
    output = tmp_path / "changed.html"
    _invoke("report", str(changed), "-o", str(output), "--numerics", MODEL)
    opened = open_report(browser, output)
    with opened as page:
        marked = page.locator("#tree .tree-row:has(.mark:text('error comes in here'))")
        assert marked.count() == 1
        assert marked.get_attribute("data-module") == "encoder.layer.1.intermediate"
        assert page.locator("#chart g.cell.enters").get_attribute("data-tag") == tag
        page.select_option("#measure", "error")
        assert page.locator("#header").inner_text().count("encoder.layer.1.intermediate") == 1
    assert opened.errors == []


@pytest.mark.browser
def test_report_of_a_file_without_sidecar_from_the_benchmark(browser, tmp_path):
    """The open-time benchmark's synthetic graph, small: no sidecar, 5,000 modules, a weight per leaf."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "report_open_time", Path(__file__).resolve().parents[2] / "benchmarks" / "report_open_time.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    path = tmp_path / "synthetic.onnx"
    benchmark.synthetic_tagged(10_000, path)
    output = tmp_path / "synthetic.html"
    _invoke("report", str(path), "-o", str(output))
    data = report_data(output)
    assert len(data["modules"]) == 1 + 100 + 1000 + 5000 and data["modules"][0]["total_nodes"] == 10_000
    assert data["modules"][0]["total_parameters"] == 5000 * 64
    opened = open_report(browser, output)
    with opened as page:
        assert "unknown (no sidecar)" in page.locator("#header").inner_text()
        page.fill("#search", "blocks.7.parts.3.units.4")
        page.wait_for_selector("#tree .tree-row.match")
        page.locator("#tree .tree-row.match .name").click()
        assert page.locator("#node-table tbody tr").count() == 2
    assert opened.errors == []


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_report_of_every_preset_opens_without_console_error(browser, tmp_path, preset):
    path = tmp_path / f"{preset}.onnx"
    export_model(load_model(f"preset:{preset}"), path, ExportOptions())
    output = tmp_path / f"{preset}.html"
    _invoke("report", str(path), "-o", str(output), "--profile", "--runs", "1", "--numerics", f"preset:{preset}")
    data = report_data(output)
    opened = open_report(browser, output)
    with opened as page:
        assert page.locator("#chart g.cell").count() >= 2
        for key in ("nodes", "parameters", "bytes", "time", "error"):
            page.select_option("#measure", key)
        page.locator("#tree .tree-row .name").first.click()
        assert page.locator("#node-table tbody tr").count() == min(300, data["header"]["tagged"])
    assert opened.errors == []


# 3. Model Explorer


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_view_without_the_extra_says_what_to_install(tagged_bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # as if not installed: importing it fails
    result = runner.invoke(app, ["view", str(tagged_bert)])
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert 'pip install "modelexport-core[viewer]"' in lines[0]


def test_view_refuses_bad_overlays_in_one_line(tagged_bert):
    for args, expected in ((["--overlay", "memory"], "--overlay takes one of time, error"),
                           (["--overlay", "error"], "--model MODEL")):
        result = runner.invoke(app, ["view", str(tagged_bert), *args])
        lines = [line for line in result.output.strip().splitlines() if line.strip()]
        assert result.exit_code != 0 and len(lines) == 1 and expected in lines[0], result.output


def test_view_error_overlay_gives_each_node_its_module_error(tagged_bert):
    from modelexport_core.format.tagged import load_tagged
    from modelexport_core.measure.numerics import compare_numerics
    from modelexport_core.tools.viewer import error_node_data

    tagged = load_tagged(tagged_bert)
    numbers = compare_numerics(load_model(MODEL), tagged_bert)
    results = error_node_data(tagged, numbers)["results"]
    assert set(results) == {node.name for node in tagged.graph.node}
    rows = {row.module: row for row in numbers.modules}
    for name in _cli_json("nodes", str(tagged_bert), "--module", "encoder.layer.1.attention.self"):
        assert results[name]["value"] == rows["encoder.layer.1.attention.self"].max_abs, name


@pytest.mark.browser
def test_view_serves_the_module_groups(browser, tagged_bert, report_html):
    pytest.importorskip("model_explorer", reason='Model Explorer is not installed (pip install "modelexport-core[viewer]")')
    pytest.importorskip("model_explorer_onnx", reason='its ONNX adapter is not installed (pip install "modelexport-core[viewer]")')
    server = subprocess.Popen(
        [sys.executable, "-m", "modelexport_core.cli", "view", str(tagged_bert), "--overlay", "time", "--runs", "1",
         "--port", str(_free_port()), "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = None
        for line in server.stdout:  # Model Explorer prints its address once it serves
            if line.startswith("http://"):
                url = line.strip()
                break
        assert url, "modelexport view exited without serving"
        tags = {m["tag"] for m in report_data(report_html)["modules"]}
        with Page(browser, url) as page:
            page.wait_for_selector("text=layer count", timeout=60_000)
            info = page.locator("body").inner_text()
            assert "onnxruntime time per run" in info  # the overlay is loaded
            # one group per module, under the adapter's own main_graph
            assert re.search(r"layer count\s+(\d+)", info).group(1) == str(len(tags) + 1)
            page.locator("input[placeholder*='Search nodes']").fill("BertSelfAttention")
            page.wait_for_selector("text=BertLayer.1", timeout=30_000)
            found = page.locator("body").inner_text()
            # the matches are listed under their module path: BertModel / BertEncoder, then each BertLayer
            assert "main_graph / BertModel / BertEncoder" in found
            assert {"BertLayer.0", "BertLayer.1", "BertAttention"} <= set(found.split("\n"))
    finally:
        server.terminate()
        server.wait(timeout=30)

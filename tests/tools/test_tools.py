"""The tools on tagged files: viewer/runtime keys, extract, nodes, profile, numerics, tag --from, validate.

Each test model is exported once per strategy for the whole module: an encoder fed an
attention mask, a LLaMA-like decoder and a small CNN, through the dynamo exporter (fx) and
the TorchScript exporter (builtin_tracking).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from modelexport_core.cli import app
from modelexport_core.export.pipeline import ExportOptions, example_inputs, export_model
from modelexport_core.format.sidecar import sidecar_path
from modelexport_core.format.tagged import load_tagged
from modelexport_core.format.writer import LAYER_KEY, NAMESPACE_KEY, TAG_KEY, TORCH_NAMESPACE_KEY, node_property
from modelexport_core.prepare.models import LoadedModel, load_model

HERE = Path(__file__).resolve().parent
MODELS = {
    "bert_mask": f"{HERE / 'tool_models.py'}:bert_with_mask",
    "llama": "preset:llama",
    "resnet": f"{HERE / 'tool_models.py'}:small_resnet",
}
# a module in the middle of each model, by its named_modules() name
LAYER = {"bert_mask": "encoder.layer.1", "llama": "layers.1", "resnet": "encoder.stages.1"}
STRATEGIES = ["fx", "builtin_tracking"]
# the decoder through the dynamo exporter is the slowest export here (torch.export of rotary and masks),
# and the encoder covers that exporter's files: slow
SLOW = {("llama", "fx")}
COMBOS = [
    pytest.param(model, strategy, id=f"{model}-{strategy}", marks=[pytest.mark.slow] if (model, strategy) in SLOW else [])
    for model in MODELS
    for strategy in STRATEGIES
]

runner = CliRunner()


@dataclass
class Exported:
    path: Path
    loaded: LoadedModel


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """``exported(model, strategy)``: the tagged file of a test model, exported on first use."""
    folder = tmp_path_factory.mktemp("tool_exports")
    cache: dict[tuple[str, str], Exported] = {}

    def get(model: str, strategy: str) -> Exported:
        if (model, strategy) not in cache:
            loaded = load_model(MODELS[model])
            path = folder / f"{model}_{strategy}.onnx"
            export_model(loaded, path, ExportOptions(strategies=[strategy], verify=False))
            cache[model, strategy] = Exported(path, loaded)
        return cache[model, strategy]

    return get


def _cli(*args: str) -> dict | list:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _one_line_error(result) -> str:
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert lines and lines[-1].startswith("error:"), result.output
    return lines[-1]


def _ort_feed(session: ort.InferenceSession, loaded: LoadedModel) -> dict[str, np.ndarray]:
    inputs = example_inputs(loaded, None)
    return {i.name: inputs[i.name].numpy() for i in session.get_inputs()}


def _run_with_values(path: Path, values: list[str], loaded: LoadedModel) -> dict[str, np.ndarray]:
    """Run the full model on the export's inputs and return ``values`` (intermediate ones included)."""
    model = onnx.load(str(path))
    present = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=v) for v in values if v not in present)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = _ort_feed(session, loaded)
    results = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    return {**feed, **results}


# 1. viewer and runtime keys


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_every_node_carries_namespace_and_layer_annotation(exported, model, strategy):
    graph = onnx.load(str(exported(model, strategy).path), load_external_data=False).graph
    for node in graph.node:
        tag = node_property(node, TAG_KEY)
        assert node_property(node, NAMESPACE_KEY) == tag, node.name
        assert node_property(node, LAYER_KEY) == tag + "/", node.name


def test_pytorch_namespace_is_kept_under_its_own_key(exported):
    graph = onnx.load(str(exported("bert_mask", "fx").path), load_external_data=False).graph
    kept = [node_property(node, TORCH_NAMESPACE_KEY) for node in graph.node]
    assert all(kept), "the dynamo exporter writes a namespace on every node; each must be kept"
    assert all(value != node_property(node, TAG_KEY) for value, node in zip(kept, graph.node))


def test_viewer_keys_left_out_and_source_paths_stripped(tmp_path, exported):
    from modelexport_core.format.source_paths import has_source_path
    from modelexport_core.testing import stacked_blocks

    model, inputs = stacked_blocks()
    output = tmp_path / "plain.onnx"
    options = ExportOptions(strategies=["fx"], verify=False, viewer_keys=False, strip_source_paths=True)
    export_model(LoadedModel(model, "stacked_blocks", "factory", inputs=inputs), output, options)
    graph = onnx.load(str(output)).graph
    assert all(node_property(node, LAYER_KEY) is None for node in graph.node)
    assert all(node_property(node, NAMESPACE_KEY) != node_property(node, TAG_KEY) for node in graph.node)
    strings = [p.value for node in graph.node for p in node.metadata_props] + [n.doc_string for n in graph.node]
    assert not any(has_source_path(s) for s in strings)
    assert all(not p.key.endswith("stack_trace") for node in graph.node for p in node.metadata_props)
    # the default keeps PyTorch's stack traces, which name files of this machine
    default = onnx.load(str(exported("bert_mask", "fx").path)).graph
    assert any(has_source_path(p.value) for node in default.node for p in node.metadata_props)


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_onnxruntime_accepts_layer_assignment_by_module(exported, model, strategy):
    path = exported(model, strategy).path
    tag, _ = load_tagged(path).resolve(LAYER[model])
    options = ort.SessionOptions()
    options.add_session_config_entry("session.layer_assignment_settings", f"cpu({tag}/); cpu(={tag.rsplit('/', 1)[0]}/)")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    broken = ort.SessionOptions()
    broken.add_session_config_entry("session.layer_assignment_settings", f"cpu({tag}/")
    with pytest.raises(Exception, match="layering config"):
        ort.InferenceSession(str(path), broken, providers=["CPUExecutionProvider"])


def test_layer_annotation_prefix_never_catches_a_longer_index():
    from modelexport_core.format.writer import layer_annotation

    assert not layer_annotation("/M/Layer.10").startswith(layer_annotation("/M/Layer.1"))
    assert layer_annotation("/M/Layer.1/Block").startswith(layer_annotation("/M/Layer.1"))


def test_model_explorer_shows_the_module_hierarchy(exported):
    adapter = pytest.importorskip("model_explorer_onnx.main", reason="model-explorer-onnx is not installed")
    path = exported("bert_mask", "fx").path
    graphs = adapter.ONNXAdapter().convert(str(path), {})
    main = graphs["graphs"][0]
    tags = {node.name: node_property(node, TAG_KEY) for node in onnx.load(str(path), load_external_data=False).graph.node}
    shown = {node.id: node.namespace for node in main.nodes if node.id in tags}
    assert shown and all(namespace == f"{main.id}{tags[node_id]}" for node_id, namespace in shown.items())


def test_model_explorer_namespace_rule_gives_one_layer_per_module(exported):
    """The adapter's rule, for machines without it: the namespace split on '/' is the module path."""
    graph = onnx.load(str(exported("bert_mask", "builtin_tracking").path), load_external_data=False).graph
    layers = {tuple(p for p in node_property(n, NAMESPACE_KEY).split("/") if p) for n in graph.node}
    assert ("BertModel", "BertEncoder", "BertLayer.1", "BertAttention") in {layer[:4] for layer in layers}


# 2. extract and 5. nodes


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_extract_matches_the_full_model_and_the_pytorch_module(tmp_path, exported, model, strategy):
    import torch

    from modelexport_core.prepare.context import make_context

    entry = exported(model, strategy)
    part_path = tmp_path / "part.onnx"
    summary = _cli("extract", str(entry.path), "--module", LAYER[model], "-o", str(part_path))
    onnx.checker.check_model(str(part_path))
    part = onnx.load(str(part_path))
    assert all(node_property(n, TAG_KEY).startswith(summary["tag"]) for n in part.graph.node if n.op_type != "Constant")
    values = _run_with_values(entry.path, summary["inputs"] + summary["outputs"], entry.loaded)
    session = ort.InferenceSession(str(part_path), providers=["CPUExecutionProvider"])
    outputs = session.run(None, {name: values[name] for name in summary["inputs"]})
    for name, got in zip(summary["outputs"], outputs):
        np.testing.assert_allclose(got, values[name], atol=1e-5, err_msg=name)

    captured = []
    module = dict(entry.loaded.model.named_modules())[LAYER[model]]
    handle = module.register_forward_hook(lambda _m, _a, out: captured.append(out[0] if isinstance(out, tuple) else out))
    inputs = example_inputs(entry.loaded, None)
    ctx = make_context(entry.loaded.model, inputs, dynamic=False, by_keyword=entry.loaded.by_keyword)
    with torch.no_grad():
        ctx.module(*ctx.args)
    handle.remove()
    reference = captured[-1].numpy()
    same_shape = [got for got in outputs if got.shape == reference.shape]
    assert same_shape, f"no output of the part has the module's output shape {reference.shape}"
    assert min(float(np.abs(got - reference).max()) for got in same_shape) < 1e-4


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_nodes_lists_the_module_and_its_descendants(exported, model, strategy):
    path = exported(model, strategy).path
    tagged = load_tagged(path)
    tag, _ = tagged.resolve(LAYER[model])
    ops = "MatMul,Gemm,Conv"
    by_name = _cli("nodes", str(path), "--module", LAYER[model], "--ops", ops)
    by_tag = _cli("nodes", str(path), "--module", tag, "--ops", ops)
    assert by_name == by_tag and by_name
    nodes = {n.name: n for n in tagged.graph.node}
    expected = [n.name for n in tagged.graph.node
                if n.op_type in ops.split(",") and (node_property(n, TAG_KEY) + "/").startswith(tag + "/")]
    assert by_name == expected
    assert all(nodes[name].op_type in ops.split(",") for name in by_name)
    plain = runner.invoke(app, ["nodes", str(path), "--module", LAYER[model], "--ops", ops])
    assert plain.stdout.split() == by_name


def test_a_module_left_out_of_tags_or_unknown_is_one_line(exported):
    path = str(exported("bert_mask", "fx").path)
    line = _one_line_error(runner.invoke(app, ["nodes", path, "--module", "encoder.layer.1.attention.self.query"]))
    assert "left out of tags" in line and "--torch-module" in line
    line = _one_line_error(runner.invoke(app, ["extract", path, "--module", "encoder.layer.9", "-o", "/tmp/x.onnx"]))
    assert "no module 'encoder.layer.9'" in line


# 4. numerics


def _change_one_weight(source: Path, target: Path, tag: str) -> str:
    """Copy ``source`` to ``target`` with one weight read by a node of module ``tag`` changed; its name."""
    model = onnx.load(str(source))
    initializers = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("MatMul", "Gemm", "Conv") and (node_property(node, TAG_KEY) + "/").startswith(tag + "/"):
            name = next((v for v in node.input if v in initializers and len(initializers[v].dims) >= 2), None)
            if name:
                array = onnx.numpy_helper.to_array(initializers[name])
                array = array + np.random.default_rng(0).standard_normal(array.shape)  # not uniform: a norm would cancel it
                initializers[name].CopyFrom(onnx.numpy_helper.from_array(array.astype(np.float32), name))
                onnx.save(model, str(target))
                shutil.copyfile(sidecar_path(source), sidecar_path(target))
                return name
    raise AssertionError(f"no weight read by {tag}")


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_numerics_finds_the_layer_whose_weight_changed(tmp_path, exported, model, strategy):
    from modelexport_core.measure.numerics import compare_numerics

    entry = exported(model, strategy)
    clean = compare_numerics(entry.loaded, entry.path)
    assert clean.first_divergent == [] and not any(row.diverges for row in clean.modules)
    tag, _ = load_tagged(entry.path).resolve(LAYER[model])
    changed = tmp_path / "changed.onnx"
    _change_one_weight(entry.path, changed, tag)
    report = compare_numerics(entry.loaded, changed)
    assert report.first_divergent, [(r.module, r.max_abs) for r in report.modules]
    assert all(m == LAYER[model] or m.startswith(LAYER[model] + ".") for m in report.first_divergent), report.first_divergent
    before = LAYER[model][:-1] + "0"  # the layer before it stays exact
    rows = {row.module: row for row in report.modules}
    assert not rows[before].diverges and rows[LAYER[model]].diverges


def test_numerics_cli_json(exported):
    entry = exported("bert_mask", "builtin_tracking")
    document = _cli("numerics", MODELS["bert_mask"], str(entry.path))
    assert document["first_divergent"] == []
    assert {row["module"] for row in document["modules"]} >= {"", "encoder.layer.0", "encoder.layer.1.attention.self"}


# 6. tag --from


def _derived(source: Path, folder: Path) -> dict[str, Path]:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    made = {}
    for name, level in (("basic", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC),
                        ("all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.optimized_model_filepath = str(folder / f"{name}.onnx")
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        made[name] = folder / f"{name}.onnx"
    quantize_dynamic(str(source), str(folder / "quantized.onnx"), weight_type=QuantType.QInt8)
    made["quantized"] = folder / "quantized.onnx"
    return made


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tag_from_covers_onnxruntime_optimized_and_quantized_files(tmp_path, exported, strategy):
    source = exported("bert_mask", strategy).path
    source_tags = {n.name: node_property(n, TAG_KEY) for n in onnx.load(str(source), load_external_data=False).graph.node}
    for kind, derived in _derived(source, tmp_path).items():
        assert not any(n.metadata_props for n in onnx.load(str(derived)).graph.node if kind != "quantized")
        output = tmp_path / f"{kind}_tagged.onnx"
        summary = _cli("tag", str(derived), "--from", str(source), "-o", str(output))
        assert summary["coverage"] == 1.0 and "root" not in summary["found_by"], (kind, summary)
        graph = onnx.load(str(output)).graph
        for node in graph.node:
            tag = node_property(node, TAG_KEY)
            if node.name in source_tags:
                assert tag == source_tags[node.name], (kind, node.name)
                continue
            # the quantizer names the nodes that replace node X `X_quant...`; onnxruntime names a fusion `X/...`
            origin = max((n for n in source_tags if node.name.startswith((n + "_quant", n + "/"))), key=len, default=None)
            if origin is not None:
                assert (source_tags[origin] + "/").startswith(tag + "/"), (kind, node.name, tag, source_tags[origin])
        assert _cli("validate", str(output))["ok"]
        ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("model,strategy", [c for c in COMBOS if c.values[0] != "bert_mask"])
def test_tag_from_covers_optimized_files_of_every_model(tmp_path, exported, model, strategy):
    source = exported(model, strategy).path
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    summary = _cli("tag", str(tmp_path / "optimized.onnx"), "--from", str(source), "-o", str(tmp_path / "tagged.onnx"))
    assert summary["coverage"] == 1.0 and "root" not in summary["found_by"]


def test_tag_takes_either_model_or_from(exported, tmp_path):
    path = str(exported("bert_mask", "fx").path)
    both = runner.invoke(app, ["tag", path, "--model", "preset:bert", "--from", path, "-o", str(tmp_path / "o.onnx")])
    assert "not both" in _one_line_error(both)
    neither = runner.invoke(app, ["tag", path, "-o", str(tmp_path / "o.onnx")])
    assert "--from" in _one_line_error(neither)


# 7. validate


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_validate_accepts_every_exported_file(exported, model, strategy):
    document = _cli("validate", str(exported(model, strategy).path))
    assert document["ok"] and document["problems"] == [], document["problems"]


def test_validate_lists_each_problem(tmp_path, exported):
    source = exported("bert_mask", "builtin_tracking").path
    model = onnx.load(str(source))
    first, second = model.graph.node[0], model.graph.node[1]
    del first.metadata_props[:]
    for prop in second.metadata_props:
        if prop.key == TAG_KEY:
            prop.value = "BertModel//x"
    broken = tmp_path / "broken.onnx"
    onnx.save(model, str(broken))
    document = json.loads(sidecar_path(source).read_text())
    document["nodes"][model.graph.node[2].name]["tag"] = "/Elsewhere"
    sidecar_path(broken).write_text(json.dumps(document))
    result = runner.invoke(app, ["validate", str(broken)])
    assert "has 1" not in _one_line_error(result)
    assert "1 nodes carry no modelexport.tag" in result.output
    assert "malformed tags: BertModel//x" in result.output
    assert "sidecar and node metadata disagree on the tag of" in result.output
    assert "tags that are no module of the sidecar" in result.output
    shutil.copyfile(source, tmp_path / "lonely.onnx")
    assert "no readable sidecar" in runner.invoke(app, ["validate", str(tmp_path / "lonely.onnx")]).output


# 3. profile


@pytest.mark.parametrize("model,strategy", COMBOS)
def test_profile_times_every_module(tmp_path, exported, model, strategy):
    path = exported(model, strategy).path
    node_data = tmp_path / "times.json"
    report = _cli("profile", str(path), "--runs", "2", "--node-data", str(node_data))
    rows = {row["tag"]: row for row in report["modules"]}
    root = min(rows, key=lambda t: t.count("/"))
    assert rows[root]["share"] == pytest.approx(1.0) and report["total_us"] > 0
    assert sum(row["self_us"] for row in rows.values()) == pytest.approx(report["total_us"])
    assert all(row["total_us"] >= row["self_us"] for row in rows.values())
    tag, _ = load_tagged(path).resolve(LAYER[model])
    assert rows[tag]["total_us"] > 0
    names = {n.name for n in onnx.load(str(path), load_external_data=False).graph.node}
    results = json.loads(node_data.read_text())["results"]
    assert results and set(results) <= names


def test_profile_without_optimization_maps_every_node_by_name(exported):
    path = exported("bert_mask", "builtin_tracking").path
    report = _cli("profile", str(path), "--runs", "1", "--level", "disabled")
    names = {n.name for n in onnx.load(str(path), load_external_data=False).graph.node}
    assert report["fused_nodes"] == 0 and set(report["nodes"]) <= names


def test_profile_node_data_is_model_explorer_node_data(tmp_path, exported):
    builder = pytest.importorskip("model_explorer.node_data_builder", reason="ai-edge-model-explorer is not installed")
    node_data = tmp_path / "times.json"
    _cli("profile", str(exported("resnet", "fx").path), "--runs", "1", "--node-data", str(node_data))
    document = json.loads(node_data.read_text())
    data = builder.GraphNodeData(
        results={k: builder.NodeDataResult(**v) for k, v in document["results"].items()},
        name=document["name"], gradient=[builder.GradientItem(**g) for g in document["gradient"]],
    )
    assert json.loads(data.to_json_string())["results"] == document["results"]


def test_tools_refuse_an_untagged_file(tmp_path, exported):
    plain = onnx.load(str(exported("resnet", "builtin_tracking").path))
    for node in plain.graph.node:
        del node.metadata_props[:]
    onnx.save(plain, str(tmp_path / "plain.onnx"))
    for command in (["profile"], ["nodes", "--module", "encoder"], ["extract", "--module", "encoder", "-o", str(tmp_path / "p.onnx")]):
        line = _one_line_error(runner.invoke(app, [command[0], str(tmp_path / "plain.onnx"), *command[1:]]))
        assert "carries no modelexport tags" in line


@pytest.mark.parametrize("strategy", ["htp", "usage_based"])
def test_every_tool_on_files_of_the_other_strategies(tmp_path, exported, strategy):
    from modelexport_core.measure.numerics import compare_numerics

    entry = exported("bert_mask", strategy)
    path = str(entry.path)
    assert _cli("validate", path)["ok"]
    assert _cli("nodes", path, "--module", LAYER["bert_mask"], "--ops", "MatMul")
    part = _cli("extract", path, "--module", LAYER["bert_mask"], "-o", str(tmp_path / "part.onnx"))
    onnx.checker.check_model(part["output"])
    assert _cli("profile", path, "--runs", "1")["total_us"] > 0
    assert compare_numerics(entry.loaded, entry.path).first_divergent == []
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    summary = _cli("tag", str(tmp_path / "optimized.onnx"), "--from", path, "-o", str(tmp_path / "tagged.onnx"))
    assert summary["coverage"] == 1.0 and "root" not in summary["found_by"]


def test_tools_on_a_file_with_external_weights(tmp_path, exported):
    """Weights in a data file beside the graph: each tool reads only what it needs and finds the rest."""
    from modelexport_core.measure.numerics import compare_numerics

    entry = exported("bert_mask", "builtin_tracking")
    model = onnx.load(str(entry.path))
    external = tmp_path / "external.onnx"
    onnx.save(model, str(external), save_as_external_data=True, location="external.onnx.data", size_threshold=0)
    shutil.copyfile(sidecar_path(entry.path), sidecar_path(external))
    assert (tmp_path / "external.onnx.data").stat().st_size > 10_000
    assert _cli("validate", str(external))["ok"]
    part = _cli("extract", str(external), "--module", LAYER["bert_mask"], "-o", str(tmp_path / "parts" / "part.onnx"))
    ort.InferenceSession(part["output"], providers=["CPUExecutionProvider"])
    assert _cli("profile", str(external), "--runs", "1")["total_us"] > 0
    assert compare_numerics(entry.loaded, external).first_divergent == []
    summary = _cli("tag", str(external), "--from", str(entry.path), "-o", str(tmp_path / "retagged" / "copy.onnx"))
    assert summary["coverage"] == 1.0 and (tmp_path / "retagged" / "copy.onnx.data").is_file()

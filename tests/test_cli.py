"""The CLI through typer's CliRunner and as a real subprocess; bad input gives one line and no traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelexport_core.cli import app

runner = CliRunner()


def _one_line_error(result) -> str:
    output = result.stderr if hasattr(result, "stderr") else result.output
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert result.exit_code != 0
    assert "Traceback" not in output
    assert lines and lines[-1].startswith("error:"), output
    return lines[-1]


def test_export_prints_a_summary_and_writes_both_files(tmp_path):
    result = runner.invoke(app, ["export", "preset:bert", str(tmp_path / "bert.onnx"), "--strategy", "builtin_tracking"])
    assert result.exit_code == 0, result.output
    assert "builtin_tracking" in result.stdout and "100% tagged" in result.stdout and "max abs diff" in result.stdout
    assert (tmp_path / "bert.onnx").is_file() and (tmp_path / "bert.hierarchy.json").is_file()


def test_export_json_summary(tmp_path):
    result = runner.invoke(
        app, ["export", "preset:vit", str(tmp_path / "vit.onnx"), "-s", "builtin_tracking", "--json", "--static"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["strategy"] == "builtin_tracking" and summary["coverage"] == 1.0
    assert summary["max_abs_diff"] < 1e-4


def test_strategies_json_lists_builtin_tracking():
    result = runner.invoke(app, ["strategies", "--json"])
    assert result.exit_code == 0
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["builtin_tracking"]["distribution"] == "modelexport-builtin-tracking"
    assert rows["builtin_tracking"]["priority"] > 0


def test_unknown_model_id(tmp_path):
    line = _one_line_error(runner.invoke(app, ["export", "no-such-org/no-such-model", str(tmp_path / "m.onnx")]))
    assert "no-such-org/no-such-model" in line


def test_unknown_preset(tmp_path):
    line = _one_line_error(runner.invoke(app, ["export", "preset:nope", str(tmp_path / "m.onnx")]))
    assert "presets:" in line and "bert" in line


def test_factory_that_raises(tmp_path):
    factory = tmp_path / "factory.py"
    factory.write_text("def broken():\n    raise RuntimeError('weights missing')\n")
    line = _one_line_error(runner.invoke(app, ["export", f"{factory}:broken", str(tmp_path / "m.onnx")]))
    assert "weights missing" in line


def test_factory_that_returns_the_wrong_thing(tmp_path):
    factory = tmp_path / "factory.py"
    factory.write_text("def wrong():\n    return 42\n")
    line = _one_line_error(runner.invoke(app, ["export", f"{factory}:wrong", str(tmp_path / "m.onnx")]))
    assert "expected an nn.Module" in line


def test_unknown_strategy_lists_the_installed_ones(tmp_path):
    line = _one_line_error(runner.invoke(app, ["export", "preset:bert", str(tmp_path / "m.onnx"), "-s", "nope"]))
    assert "unknown strategy 'nope'" in line and "builtin_tracking" in line


def test_unknown_strategy_option(tmp_path):
    result = runner.invoke(
        app, ["export", "preset:bert", str(tmp_path / "m.onnx"), "-s", "builtin_tracking", "-O", "builtin_tracking.x=1"]
    )
    assert "has no option 'x'" in _one_line_error(result)


@pytest.mark.skipif(sys.platform == "win32" or __import__("os").geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_path(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    line = _one_line_error(runner.invoke(app, ["export", "preset:bert", str(locked / "m.onnx")]))
    assert "cannot write" in line


def test_output_path_under_a_file_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _one_line_error(runner.invoke(app, ["export", "preset:bert", str(blocker / "m.onnx"), "-s", "builtin_tracking"]))
    assert f"cannot write {blocker / 'm.onnx'}" in line
    assert blocker.read_text() == "x"


def test_console_script_runs_as_a_subprocess(tmp_path):
    executable = shutil.which("modelexport") or str(Path(sys.executable).with_name("modelexport"))
    completed = subprocess.run(
        [executable, "export", "preset:gpt2", str(tmp_path / "gpt2.onnx"), "-s", "builtin_tracking", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    assert summary["coverage"] == 1.0 and summary["strategy"] == "builtin_tracking"
    failed = subprocess.run([executable, "export", "preset:nope", str(tmp_path / "x.onnx")], capture_output=True, text=True)
    assert failed.returncode != 0 and "Traceback" not in failed.stderr and failed.stderr.strip().startswith("error:")


@pytest.fixture(scope="module")
def tagged_bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagged")
    result = runner.invoke(app, ["export", "preset:bert", str(folder / "bert.onnx"), "-s", "builtin_tracking", "--no-verify"])
    assert result.exit_code == 0, result.output
    return folder / "bert.onnx"


def test_inspect_shows_the_tag_tree_with_node_counts(tagged_bert):
    result = runner.invoke(app, ["inspect", str(tagged_bert), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["untagged"] == 0
    tree = document["tree"]
    assert tree["tag"] == "/BertModel" and tree["total_nodes"] == document["nodes"]
    encoder = next(c for c in tree["children"] if c["tag"] == "/BertModel/BertEncoder")
    assert [c["tag"] for c in encoder["children"]] == ["/BertModel/BertEncoder/BertLayer.0", "/BertModel/BertEncoder/BertLayer.1"]
    human = runner.invoke(app, ["inspect", str(tagged_bert), "--depth", "3"])
    assert "BertLayer.1" in human.stdout and "100%" in human.stdout


def test_inspect_of_a_missing_file(tmp_path):
    assert "no such file" in _one_line_error(runner.invoke(app, ["inspect", str(tmp_path / "none.onnx")]))


def test_compare_measures_each_strategy_against_pytorch():
    result = runner.invoke(app, ["compare", "preset:bert", "-s", "builtin_tracking,usage_based", "--no-cost", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["strategy"]: row for row in json.loads(result.stdout)}
    assert rows["builtin_tracking"]["agreement"] == 1.0 and rows["builtin_tracking"]["coverage"] == 1.0
    assert rows["builtin_tracking"]["contaminated"] == 0
    assert rows["usage_based"]["status"] == "ok" and 0 < rows["usage_based"]["agreement"] <= 1
    # how much of each strategy's tagging is PyTorch's own record and how much inferred
    assert rows["builtin_tracking"]["evidence"]["record"] > 0.8
    assert "record" not in rows["usage_based"]["evidence"] and rows["usage_based"]["evidence"]["parameter"] > 0
    assert sum(rows["usage_based"]["evidence"].values()) == pytest.approx(1.0, abs=1e-3)


def test_compare_sets_each_strategy_against_a_plain_export_in_processes_of_their_own():
    result = runner.invoke(app, ["compare", "preset:bert", "-s", "builtin_tracking", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["status"] == "ok" and row["agreement"] == 1.0  # the comparison itself still holds
    assert row["seconds"] > 0 and row["plain_seconds"] > 0 and row["peak_mb"] > 0 and row["plain_peak_mb"] > 0
    assert row["time_ratio"] == pytest.approx(row["seconds"] / row["plain_seconds"], rel=0.01)
    assert row["memory_ratio"] == pytest.approx(row["peak_mb"] / row["plain_peak_mb"], rel=0.01)
    # each process holds torch and the model: far above this test process's own increment
    assert row["plain_peak_mb"] > 100


@pytest.fixture(scope="module")
def plain_torchscript_bert(tmp_path_factory):
    """A BERT file a user exported with the TorchScript exporter, through a wrapper of their own (keyword inputs)."""
    import torch

    from modelexport_core.prepare.context import make_context
    from modelexport_core.prepare.inputs import inputs_from_config
    from modelexport_core.prepare.models import load_model

    loaded = load_model("preset:bert")
    ctx = make_context(loaded.model, inputs_from_config(loaded.model))
    plain = tmp_path_factory.mktemp("plain") / "plain.onnx"
    torch.onnx.export(ctx.module, ctx.args, str(plain), input_names=ctx.input_names, output_names=ctx.output_names,
                      opset_version=17, dynamo=False)
    return plain, [name for name, _ in ctx.module.named_modules()]


def test_tag_reads_the_scopes_a_torchscript_file_carries(plain_torchscript_bert, tmp_path):
    import onnx

    from modelexport_core.format.reference import torchscript_node_modules
    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.prepare.models import load_model

    plain, wrapped_names = plain_torchscript_bert
    result = runner.invoke(app, ["tag", str(plain), "--model", "preset:bert", "-o", str(tmp_path / "tagged.onnx"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["strategy"] == "records" and summary["coverage"] == 1.0
    tagged = onnx.load(str(tmp_path / "tagged.onnx"))
    assert [n.name for n in tagged.graph.node] == [n.name for n in onnx.load(str(plain)).graph.node]
    # every scoped node carries exactly the tag of the module PyTorch recorded for it
    tags = HierarchyTags.from_model(load_model("preset:bert").model)
    recorded = torchscript_node_modules(onnx.load(str(plain)), wrapped_names)
    written = {n.name: next(p.value for p in n.metadata_props if p.key == "modelexport.tag") for n in tagged.graph.node}
    judged = {name: module for name, module in recorded.items() if module is not None}
    assert len(judged) > 100
    assert {name: written[name] for name in judged} == {name: tags.tag_of(module) for name, module in judged.items()}
    document = json.loads((tmp_path / "tagged.hierarchy.json").read_text())
    assert document["details"]["source"] == "torchscript"


def test_tag_infers_with_a_named_strategy(plain_torchscript_bert, tmp_path):
    plain, _ = plain_torchscript_bert
    result = runner.invoke(app, ["tag", str(plain), "--model", "preset:bert", "-o", str(tmp_path / "tagged.onnx"),
                                 "-s", "usage_based", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["strategy"] == "usage_based" and summary["coverage"] == 1.0


def test_tag_refuses_a_strategy_that_needs_its_own_export(tmp_path, tagged_bert):
    result = runner.invoke(app, ["tag", str(tagged_bert), "--model", "preset:bert", "-o", str(tmp_path / "t.onnx"),
                                 "-s", "builtin_tracking"])
    assert "cannot tag an existing ONNX file" in _one_line_error(result)
    assert not (tmp_path / "t.onnx").exists()


@pytest.fixture(scope="module")
def users_own_export(tmp_path_factory):
    """A BERT file exported by a user directly (dynamo, weights in an external data file, no wrapper)."""
    import torch

    from modelexport_core.prepare.inputs import inputs_from_config
    from modelexport_core.prepare.models import load_model

    folder = tmp_path_factory.mktemp("theirs")
    model = load_model("preset:bert").model
    torch.onnx.export(model, (), str(folder / "theirs.onnx"), kwargs=dict(inputs_from_config(model), use_cache=False),
                      dynamo=True, external_data=True)
    assert (folder / "theirs.onnx.data").is_file()
    return folder / "theirs.onnx"


def test_tag_a_users_own_export_with_external_data(users_own_export, tmp_path):
    import numpy as np
    import onnxruntime

    output = tmp_path / "tagged" / "ours.onnx"
    result = runner.invoke(app, ["tag", str(users_own_export), "-m", "preset:bert", "-o", str(output), "--json"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in output.parent.iterdir()) == ["ours.hierarchy.json", "ours.onnx", "ours.onnx.data"]
    document = json.loads((output.parent / "ours.hierarchy.json").read_text())
    layer_tags = {e["tag"] for e in document["nodes"].values() if "BertLayer" in e["tag"]}
    assert any("BertLayer.0" in t for t in layer_tags) and any("BertLayer.1" in t for t in layer_tags)
    session = onnxruntime.InferenceSession(str(output))
    ones = np.ones((2, 8), dtype=np.int64)
    assert session.run(None, {"input_ids": ones, "attention_mask": ones})[0].shape == (2, 8, 32)


def test_tag_with_the_wrong_model_is_refused(users_own_export, tmp_path):
    result = runner.invoke(app, ["tag", str(users_own_export), "-m", "preset:gpt2", "-o", str(tmp_path / "w.onnx")])
    line = _one_line_error(result)
    assert "the file's outputs differ from GPT2Model's on the same inputs" in line
    assert list(tmp_path.iterdir()) == []


def test_version_names_the_core_and_every_installed_strategy():
    from modelexport_core import __version__, get_strategies

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"modelexport-core {__version__}"
    listed = {tuple(line.split()) for line in lines[1:]}
    installed = {(info.name, info.distribution, info.version) for info in get_strategies()}
    assert listed == installed and {"fx", "builtin_tracking"} <= {name for name, _, _ in listed}

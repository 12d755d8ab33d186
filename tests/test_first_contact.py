"""What a new user meets first: errors before work, names they expect, quiet output, honest messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from modelexport_core.cli import app
from modelexport_core.errors import InputSpecError
from modelexport_core.export.pipeline import example_inputs
from modelexport_core.prepare import models
from modelexport_core.prepare.models import load_model

runner = CliRunner()


def _error_line(result) -> str:
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


@pytest.fixture
def never_load(monkeypatch):
    """Fail the test if the CLI gets as far as loading the model."""
    def refuse(spec):
        raise AssertionError(f"the model {spec} was loaded before the options were checked")

    monkeypatch.setattr(models, "load_model", refuse)


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (["-s", "no_such_strategy"], "no_such_strategy"),
        (["-O", "fx.no_such_option=1"], "no option 'no_such_option'"),
        (["-O", "fx.optimize=maybe"], "takes true or false"),
    ],
)
def test_options_are_checked_before_the_model_loads(arguments, expected, tmp_path, never_load):
    result = runner.invoke(app, ["export", "preset:bert", str(tmp_path / "m.onnx"), *arguments])
    assert expected in _error_line(result)


def test_an_unwritable_output_is_reported_with_the_users_path_before_the_model_loads(never_load):
    line = _error_line(runner.invoke(app, ["export", "preset:bert", "/proc/x.onnx"]))
    assert "cannot write /proc/x.onnx" in line and ".modelexport" not in line


def test_tag_checks_its_input_file_before_the_model_loads(tmp_path, never_load):
    line = _error_line(runner.invoke(app, ["tag", str(tmp_path / "none.onnx"), "-m", "preset:bert", "-o", str(tmp_path / "o.onnx")]))
    assert "no such ONNX file" in line
    (tmp_path / "junk.onnx").write_text("not onnx")
    line = _error_line(runner.invoke(app, ["tag", str(tmp_path / "junk.onnx"), "-m", "preset:bert", "-o", str(tmp_path / "o.onnx")]))
    assert "not a readable ONNX file" in line


def test_tag_help_names_the_strategies_that_can_tag_an_existing_file():
    from modelexport_core.plugin.discovery import get_strategies

    able = [info.name for info in get_strategies() if info.can_tag_existing]
    assert "usage_based" in able and "fx" not in able
    result = runner.invoke(app, ["tag", "--help"])
    assert result.exit_code == 0
    assert f"Strategies that can tag an existing file: {', '.join(able)}." in " ".join(result.output.split())


def test_an_input_spec_the_model_does_not_take_names_what_it_takes(tmp_path):
    spec = tmp_path / "inputs.json"
    spec.write_text(json.dumps({"pixel_values": {"shape": [1, 3, 8, 8]}}))
    with pytest.raises(InputSpecError, match="takes no input 'pixel_values'; it takes: input_ids, attention_mask"):
        example_inputs(load_model("preset:bert"), spec)


def test_a_partial_input_spec_changes_those_inputs_and_keeps_the_others(tmp_path):
    spec = tmp_path / "inputs.json"
    spec.write_text(json.dumps({"input_ids": {"shape": [1, 16], "dtype": "int64"}}))
    inputs = example_inputs(load_model("preset:bert"), spec)
    assert list(inputs) == ["input_ids", "attention_mask"]
    assert list(inputs["input_ids"].shape) == [1, 16]


def test_a_model_id_without_network_fails_at_once_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = _error_line(runner.invoke(app, ["export", "someone/no-such-model", str(tmp_path / "m.onnx")]))
    assert "not in the local Hugging Face cache" in line


def test_inspect_of_an_untagged_file_points_to_tag(tmp_path):
    model = torch.nn.Linear(2, 2)
    path = tmp_path / "plain.onnx"
    torch.onnx.export(model, (torch.randn(1, 2),), str(path), dynamo=False)
    line = _error_line(runner.invoke(app, ["inspect", str(path)]))
    assert "has no modelexport tags" in line and "modelexport tag" in line


def test_a_factory_file_imports_its_sibling_modules(tmp_path):
    (tmp_path / "blocks.py").write_text("import torch\nclass Block(torch.nn.Linear):\n    pass\n")
    (tmp_path / "factory.py").write_text(
        "import torch\nfrom blocks import Block\ndef make():\n    return Block(3, 3), (torch.randn(1, 3),)\n")
    loaded = load_model(f"{tmp_path / 'factory.py'}:make")
    assert type(loaded.model).__name__ == "Block" and list(loaded.inputs) == ["input"]


def test_a_package_factory_is_found_in_the_working_directory(tmp_path, monkeypatch):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "nets.py").write_text("import torch\ndef make():\n    return torch.nn.Linear(2, 2)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "mypkg", raising=False)
    assert type(load_model("mypkg.nets:make").model).__name__ == "Linear"


def test_no_third_party_chatter_and_one_line_per_failed_attempt(tmp_path):
    """A batch-1 export through the CLI: torch's log lines stay out; a failed attempt is one warning line."""
    factory = tmp_path / "f.py"
    factory.write_text(
        "import torch\n"
        "class Erfcx(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        return torch.special.erfcx(self.lin(x))\n"
        "def make():\n    return Erfcx(), (torch.randn(1, 4),)\n"
    )
    executable = str(Path(sys.executable).with_name("modelexport"))
    completed = subprocess.run(
        [executable, "export", f"{factory}:make", str(tmp_path / "m.onnx"), "-s", "builtin_tracking,fx"],
        capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    stderr_lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert stderr_lines == [
        "warning: strategy builtin_tracking failed: TorchScript export failed: Exporting the operator "
        "'aten::special_erfcx' to ONNX opset version 17 is not supported"
    ]
    document = json.loads((tmp_path / "m.hierarchy.json").read_text())
    first = document["attempted"][0]
    assert first["status"] == "failed" and "Torch IR graph at exception" in first["detail"]
    verbose = subprocess.run(
        [executable, "export", f"{factory}:make", str(tmp_path / "v.onnx"), "-s", "builtin_tracking,fx", "--verbose"],
        capture_output=True, text=True, timeout=300,
    )
    assert verbose.returncode == 0 and "Torch IR graph at exception" in verbose.stderr

"""Strategy discovery: a real third-party package installed through pip, duplicates, broken plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import modelexport_core
from modelexport_core.errors import DuplicateStrategyError, UnknownStrategyError
from modelexport_core.plugin import hookspecs
from modelexport_core.plugin.discovery import get_strategies, get_strategy, make_plugin_manager

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PLUGIN = REPO / "docs" / "example-plugin"


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory) -> Path:
    """The documented example plugin, installed by pip into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(EXAMPLE_PLUGIN)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return target


def _cli(args: list[str], extra_path: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(extra_path), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "modelexport_core.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=cwd)


def test_installed_plugin_is_listed_through_its_entry_point(installed_example):
    completed = _cli(["strategies", "--json"], installed_example)
    assert completed.returncode == 0, completed.stderr
    rows = {row["name"]: row for row in json.loads(completed.stdout)}
    assert rows["whole_model"]["distribution"] == "modelexport-whole-model"
    assert rows["whole_model"]["version"] == "0.1.0"
    assert "builtin_tracking" in rows


def test_installed_plugin_exports(installed_example, tmp_path):
    completed = _cli(["export", "preset:bert", str(tmp_path / "m.onnx"), "-s", "whole_model", "--json"], installed_example)
    assert completed.returncode == 0, completed.stderr
    document = json.loads((tmp_path / "m.hierarchy.json").read_text())
    assert document["strategy"] == "whole_model"
    assert {entry["tag"] for entry in document["nodes"].values()} == {"/BertModel"}


def test_fallback_chain_records_every_attempt(installed_example, tmp_path):
    # a model that runs in PyTorch but refuses to be traced: both strategies fail, each with its reason
    factory = tmp_path / "f.py"
    factory.write_text(
        "import torch\n"
        "class Untraceable(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if torch.jit.is_tracing():\n"
        "            raise ValueError('cannot be traced')\n"
        "        return x * 2\n"
        "def make():\n    return Untraceable(), (torch.ones(2),)\n"
    )
    completed = _cli(["export", f"{factory}:make", str(tmp_path / "m.onnx"), "-s", "whole_model,builtin_tracking"],
                     installed_example)
    assert completed.returncode != 0
    # one line per attempt, nothing else (no exporter dump); each failed strategy is tried again static
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("error: every strategy failed; whole_model failed:")
    assert lines[1].startswith("error: builtin_tracking failed:") and "cannot be traced" in lines[1]
    assert lines[2].startswith("error: whole_model (static) failed:")
    assert lines[3].startswith("error: builtin_tracking (static) failed:") and "cannot be traced" in lines[3]
    assert not (tmp_path / "m.onnx").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["f.py"]


def test_a_model_that_fails_in_pytorch_is_one_line(installed_example, tmp_path):
    factory = tmp_path / "f.py"
    factory.write_text(
        "import torch\n"
        "class Bad(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        raise ValueError('weights not loaded')\n"
        "def make():\n    return Bad(), (torch.ones(2),)\n"
    )
    completed = _cli(["export", f"{factory}:make", str(tmp_path / "m.onnx")], installed_example)
    assert completed.returncode != 0 and "Traceback" not in completed.stderr
    assert "Bad failed on its example inputs" in completed.stderr and "weights not loaded" in completed.stderr


def _fake_plugin(name: str, strategy_name: str, dist: str) -> types.ModuleType:
    module = types.ModuleType(name)

    class Fake(modelexport_core.TaggingStrategy):
        def export(self, ctx, onnx_path):
            raise NotImplementedError

    Fake.name = strategy_name

    @modelexport_core.hookimpl
    def modelexport_strategies():
        return [Fake]

    module.modelexport_strategies = modelexport_strategies
    module.__name__ = dist
    return module


def test_duplicate_names_are_an_error_naming_both_distributions():
    pm = make_plugin_manager(load_entry_points=False)
    pm.register(_fake_plugin("a", "same", "dist_one"), name="one")
    pm.register(_fake_plugin("b", "same", "dist_two"), name="two")
    with pytest.raises(DuplicateStrategyError, match="dist_one.*dist_two|dist_two.*dist_one"):
        get_strategies(pm)


def test_unknown_strategy_names_the_installed_ones():
    pm = make_plugin_manager(load_entry_points=False)
    pm.register(_fake_plugin("a", "alpha", "dist_one"), name="one")
    with pytest.raises(UnknownStrategyError, match="installed: alpha"):
        get_strategy("beta", pm)


def test_a_plugin_that_fails_to_import_is_a_warning(tmp_path):
    dist_info = tmp_path / "broken_plugin-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[modelexport]\nbroken = broken_plugin_missing_module\n")
    completed = _cli(["strategies", "--json"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "broken-plugin" in completed.stderr and "warning" in completed.stderr
    assert "builtin_tracking" in {row["name"] for row in json.loads(completed.stdout)}


def test_misspelt_hookimpl_fails_loudly():
    module = types.ModuleType("typo")

    @modelexport_core.hookimpl
    def modelexport_strategys():
        return []

    module.modelexport_strategys = modelexport_strategys
    pm = make_plugin_manager(load_entry_points=False)
    pm.register(module)
    with pytest.raises(Exception, match="unknown hook"):
        pm.check_pending()


def test_every_hook_is_documented_with_an_example():
    hooks = [name for name in dir(hookspecs) if name.startswith("modelexport_")]
    assert hooks == ["modelexport_strategies"]
    for name in hooks:
        doc = getattr(hookspecs, name).__doc__ or ""
        assert "Example" in doc and "@hookimpl" in doc

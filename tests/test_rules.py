"""The project's cardinal rules, as tests: no architecture names in tagging logic, torch.nn left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE_WORDS = re.compile(
    r"\b(bert|gpt2?|llama|vit|resnet|t5|roberta|qwen|embeddings?|encoder|decoder|pooler|attention)\b", re.IGNORECASE
)
# Presets and the test-model module name architectures on purpose: they build models, they do not tag them.
NOT_TAGGING_LOGIC = {"presets.py", "testing.py"}


def _logic_files():
    roots = [REPO / "src" / "modelexport_core", *sorted((REPO / "plugins").glob("*/src"))]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path.name not in NOT_TAGGING_LOGIC:
                yield path


def _code_lines(path: Path):
    """Lines of code outside docstrings and comments."""
    in_docstring = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        quotes = stripped.count('"""') + stripped.count("'''")
        if in_docstring:
            if quotes % 2:
                in_docstring = False
            continue
        if stripped.startswith(('"""', "'''")):
            if quotes == 1:
                in_docstring = True
            continue
        code = line.split("#", 1)[0]
        if code.strip().startswith(("from torch", "import torch")):
            continue  # PyTorch's own module paths (torch.nn.attention) name no model
        yield number, code


def test_no_architecture_names_in_core_or_strategy_logic():
    hits = [
        f"{path.relative_to(REPO)}:{number}: {code.strip()}"
        for path in _logic_files()
        for number, code in _code_lines(path)
        if ARCHITECTURE_WORDS.search(code)
    ]
    assert hits == []


def test_the_rule_check_would_catch_a_violation(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text('"""Docs may say BERT."""\nif "encoder" in name:  # and comments may too: pooler\n    pass\n')
    assert [n for n, code in _code_lines(sample) if ARCHITECTURE_WORDS.search(code)] == [2]


@pytest.mark.parametrize("preset", ["bert", "gpt2"])
def test_default_tags_hold_no_torch_nn_class(preset, tmp_path):
    import onnx

    from modelexport_core.export import ExportOptions, export_model
    from modelexport_core.models import load_model
    from modelexport_core.writer import read_tags

    loaded = load_model(f"preset:{preset}")
    torch_classes = {type(m).__name__ for m in loaded.model.modules() if type(m).__module__.startswith("torch.")}
    report = export_model(loaded, tmp_path / "m.onnx", ExportOptions(strategies=["builtin_tracking"], verify=False))
    segments = {s.split(".")[0] for tag in read_tags(onnx.load(str(report.onnx_path))).values() for s in tag.split("/")[1:]}
    assert torch_classes and not segments & torch_classes

"""The project's cardinal rules, as tests: no architecture names in tagging logic, torch.nn left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # the fast tier, run first

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE_WORDS = re.compile(
    r"\b(bert|gpt2?|llama|vit|resnet|t5|roberta|qwen|embeddings?|encoder|decoder|pooler|attention)\b", re.IGNORECASE
)
# Presets and the test-model module name architectures on purpose: they build models, they do not tag them.
NOT_TAGGING_LOGIC = {"presets.py", "cases.py"}


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

    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.format.writer import read_tags
    from modelexport_core.prepare.models import load_model

    loaded = load_model(f"preset:{preset}")
    torch_classes = {type(m).__name__ for m in loaded.model.modules() if type(m).__module__.startswith("torch.")}
    report = export_model(loaded, tmp_path / "m.onnx", ExportOptions(strategies=["builtin_tracking"], verify=False))
    segments = {s.split(".")[0] for tag in read_tags(onnx.load(str(report.onnx_path))).values() for s in tag.split("/")[1:]}
    assert torch_classes and not segments & torch_classes


def _import_statements(path: Path):
    """Every import statement in ``path``, inside functions too, except under ``if TYPE_CHECKING:``."""
    import ast

    def visit(node: ast.AST):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield from visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(ast.parse(path.read_text()))


def _imports(path: Path, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """Modules of ``modules`` that ``path`` imports anywhere (inside functions too), type-only imports aside."""
    import ast

    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in _import_statements(path):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:  # ``from . import x`` names module x; ``from .x import y`` module x
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        else:
            found.update(alias.name for alias in node.names)
    return found & modules - {module}


def _import_graph(root: Path) -> dict[str, set[str]]:
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {name: _imports(path, name, path.name == "__init__.py", set(modules)) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                strong(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return cycles


@pytest.mark.parametrize("root", [REPO / "src" / "modelexport_core", *sorted((REPO / "plugins").glob("*/src/*"))],
                         ids=lambda root: root.name)
def test_no_import_cycle_at_any_level(root):
    """No module imports one that imports it back, at module level or inside a function (type-only imports aside)."""
    assert _cycles(_import_graph(root)) == []


def test_the_import_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("def thing():\n    from .a import x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n")
    assert _cycles(_import_graph(package)) == [["pkg.a", "pkg.b"]]


def _core_imports(path: Path) -> list[tuple[int, str]]:
    """Every ``modelexport_core...`` module a file imports (function-level imports too), with its line."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, m) for m in modules if m == "modelexport_core" or m.startswith("modelexport_core.")]
    return found


def _outside_the_sdk(paths) -> list[str]:
    return [f"{path.relative_to(path.parents[3])}:{line} imports {module}"
            for path in paths for line, module in _core_imports(path) if module != "modelexport_core.sdk"]


def test_in_tree_plugins_import_the_core_only_through_the_sdk():
    """A plugin author reads one module to know what is stable: the in-tree plugins hold themselves to it."""
    assert _outside_the_sdk(sorted(REPO.glob("plugins/*/src/**/*.py"))) == []


def test_the_sdk_rule_would_catch_a_plugin_reaching_inside(tmp_path):
    plugin = tmp_path / "plugins" / "p" / "src" / "mod.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("def f():\n    from modelexport_core.format.graph import GraphIndex\n")
    assert _outside_the_sdk([plugin]) == ["plugins/p/src/mod.py:2 imports modelexport_core.format.graph"]


CORE = REPO / "src" / "modelexport_core"
NO_TORCH_LAYERS = ("tools", "format")
"""The layers that read and write tagged files: they work without PyTorch installed."""


def _imported_packages(path: Path) -> set[str]:
    """The top-level package of every absolute import in ``path``, inside functions too, type-only ones aside."""
    import ast

    found: set[str] = set()
    for node in _import_statements(path):
        if isinstance(node, ast.ImportFrom):
            found.update([node.module.split(".")[0]] if node.level == 0 and node.module else [])
        else:
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def _no_torch_files() -> list[Path]:
    return sorted(path for layer in NO_TORCH_LAYERS for path in (CORE / layer).rglob("*.py"))


@pytest.mark.parametrize("path", _no_torch_files(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_tools_and_format_never_import_torch(path):
    """Not at module level, not inside a function (type-only imports aside)."""
    assert "torch" not in _imported_packages(path)


def test_tools_and_format_import_with_torch_absent():
    """What they import, all the way down, needs no torch: importing them with torch blocked succeeds."""
    import subprocess
    import sys

    modules = [".".join(path.relative_to(CORE.parent).with_suffix("").parts) for path in _no_torch_files()]
    program = ("import importlib, sys\nsys.modules['torch'] = None\n"
               f"for name in {modules!r}:\n    importlib.import_module(name)\n")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_no_torch_rule_would_catch_a_function_level_import(tmp_path):
    path = tmp_path / "tool.py"
    path.write_text("def f():\n    import torch.nn\n")
    assert _imported_packages(path) == {"torch"}


LAYERS = {  # a layer may import the top-level modules (errors, version) and the layers listed here
    "plugin": set(),
    "format": {"plugin"},
    "prepare": {"plugin", "format"},
    "export": {"plugin", "format", "prepare"},
    "tools": {"plugin", "format"},
    "measure": {"plugin", "format", "prepare", "export", "tools"},
    "testing": {"plugin", "format", "prepare", "export", "measure"},
}
TOP_LEVEL_LEAVES = {"errors", "version"}


def _layer_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else ""


def test_the_core_is_layered():
    """``src/modelexport_core`` shows the layers, and each imports only those beneath it (so no cycle between them)."""
    assert {path.name for path in CORE.iterdir() if path.is_dir() and (path / "__init__.py").exists()} == set(LAYERS)
    assert _layer_violations(_import_graph(CORE)) == []


def test_the_layer_rule_would_catch_a_tool_reaching_into_the_pipeline():
    graph = {"modelexport_core.tools.report": {"modelexport_core.export.pipeline", "modelexport_core.errors"},
             "modelexport_core.format.tags": {"modelexport_core"}}
    assert _layer_violations(graph) == ["modelexport_core.format.tags imports modelexport_core",
                                        "modelexport_core.tools.report imports modelexport_core.export.pipeline"]


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, imported in graph.items():
        layer = _layer_of(module)
        if layer not in LAYERS:
            continue
        for target in imported:
            other = _layer_of(target)
            if target == "modelexport_core" or (other != layer and other not in LAYERS[layer] | TOP_LEVEL_LEAVES):
                wrong.append(f"{module} imports {target}")  # the package top imports every layer
    return sorted(wrong)

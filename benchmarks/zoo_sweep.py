"""Export every zoo model with every strategy and with the default chain, at batch 1 and 2; write a table.

    .venv/bin/python benchmarks/zoo_sweep.py [--only bert,gpt2] [--strategies fx,chain] [--batches 1,2]
                                             [--timeout 240] [--jobs 1] [--resume]
    .venv-bench/bin/python benchmarks/zoo_sweep.py --draw heldout --seed N [--size 110] [--batches 1]

Each cell (model, batch, strategy) is an export with verification (onnxruntime at the example shape
and a second shape), its tags measured node by node against PyTorch's own records of the same graph
(``modelexport_core.measure.agreement.measure_agreement``). Cells run in a worker process per model that is
killed and replaced when a cell passes ``--timeout`` or the worker dies, so a hang or an out-of-memory
stops only that cell. ``chain`` is the default chain (every installed strategy by priority).
Results go to ``benchmarks/results/zoo.json`` after every cell and to the Markdown table ``docs/zoo.md``.
With ``--draw``, the models are a draw of ``benchmarks/generator.py`` (fx, htp and usage_based by default), and
the results go to ``benchmarks/results/draw-{dev,heldout-SEED}.{json,md}`` (``draw_report.py``).
Not part of the test suite: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import zoo  # noqa: E402  (the zoo lives beside this script)


class Catalog:
    """Where models come from: the zoo by name, or the generator's draws (names ``family@seed.index``)."""

    def __init__(self, generated: bool = False):
        self.generated = generated

    def load(self, name: str, batch: int):
        if self.generated:
            import generator

            return generator.load(name, batch)
        return zoo.load(name, batch)

    def family(self, name: str) -> str:
        if self.generated:
            return name.partition("@")[0]
        return zoo.ZOO[name].family

    @property
    def worker_args(self) -> list[str]:
        return ["--generated"] if self.generated else []


CATALOG = Catalog()

CHAIN = "chain"
DEFAULT_JSON = HERE / "results" / "zoo.json"
DEFAULT_TABLE = REPO / "docs" / "zoo.md"


@dataclass
class Cell:
    """One export of one zoo model at one batch size with one strategy (or the chain)."""

    model: str
    family: str
    batch: int
    strategy: str
    status: str = "failed"  # "ok" or "failed"
    reason: str = ""  # one line, empty when ok
    cause: str = ""  # a short label of the reason, for the table
    winner: str = ""  # the strategy that tagged the file (the chain's winner)
    exporter: str = ""
    attempts: list[dict[str, str]] = field(default_factory=list)  # the chain's attempts
    nodes: int = 0
    reference_nodes: int = 0
    agreement: float | None = None
    contaminated: int = 0
    max_abs_diff: float | None = None
    seconds: float = 0.0
    derived: bool = False  # a chain cell taken from its first strategy's cell instead of exporting again

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.model, self.batch, self.strategy)


_CAUSES: list[tuple[str, str]] = [
    (r"timed out after", "timeout"),
    (r"worker (died|exited)", "crashed"),
    (r"aten::diff", "aten::diff"),
    (r"aten::histc", "aten::histc"),
    (r"grouped_mm", "grouped_mm"),
    (r"to its example size|specializ", "size-1 axis pinned"),
    (r"differs from PyTorch", "verify diff"),
    (r"weight tensors (of \S+ )?appear|weights? not found", "weights not found"),
    (r"no submodules|has no submodule", "no submodules"),
    (r"onnxruntime|InferenceSession|\[ONNXRuntimeError\]", "onnxruntime rejects"),
    (r"checker|ValidationError", "onnx checker"),
    (r"Unsupported|not supported|unsupported", "unsupported op"),
    (r"failed on its example inputs", "model fails in torch"),
    (r"TorchScript export failed", "TorchScript export fails"),
]


def own_reason(reason: str, strategy: str) -> str:
    """A single strategy's reason without the chain's wrapper ``every strategy failed (NAME: ...)``."""
    prefix = f"every strategy failed ({strategy}: "
    if strategy != CHAIN and reason.startswith(prefix) and reason.endswith(")"):
        return reason[len(prefix):-1]
    return reason


def cause_of(reason: str, strategy: str = "") -> str:
    """A short label for a failure reason: the known causes by pattern, else its first words."""
    if strategy == CHAIN and reason.startswith("every strategy failed"):
        return "every strategy failed"  # each strategy's own column says why
    for pattern, label in _CAUSES:
        if re.search(pattern, reason):
            if label == "unsupported op":
                op = re.search(r"(aten::\w+|\w+\.\w+\.\w+|'[\w.:]+')", reason)
                return f"unsupported {op.group(1)}" if op else label
            return label
    words = reason.split()
    return " ".join(words[:5]) + (" ..." if len(words) > 5 else "")


# --------------------------------------------------------------------------------------------------------------
# The worker: runs cells in this process, one per request line, writing each result to the file it names.


def run_cell(model_name: str, batch: int, strategy: str, workdir: Path) -> Cell:
    """Export one cell with verification and measure its tags against PyTorch's records."""
    import onnx

    from modelexport_core.errors import ModelExportError, first_line
    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.format.tags import HierarchyTags
    from modelexport_core.format.writer import NodeTag
    from modelexport_core.measure.agreement import measure_agreement

    cell = Cell(model_name, CATALOG.family(model_name), batch, strategy)
    try:
        loaded = CATALOG.load(model_name, batch)
    except Exception as error:  # a drawn configuration that does not build is its own failure, not a strategy's
        cell.reason = f"model does not build: {type(error).__name__}: {first_line(error)}"
        cell.cause = "model does not build"
        return cell
    options = ExportOptions(strategies=None if strategy == CHAIN else [strategy])
    output = workdir / f"{model_name}-{batch}-{strategy}.onnx"
    started = time.perf_counter()
    try:
        report = export_model(loaded, output, options)
    except ModelExportError as error:
        cell.reason = first_line(error)
        attempts = getattr(error, "attempts", None) or []  # the chain's: each strategy's own reason
        if attempts:
            cell.attempts = [{"strategy": a.strategy + (" (static)" if a.static else ""), "status": a.status,
                              "reason": a.reason} for a in attempts]
            cell.reason = "every strategy failed: " + "; ".join(f"{a['strategy']}: {a['reason']}" for a in cell.attempts)
    except Exception as error:  # a bug anywhere is a failed cell with its reason, not a stopped sweep
        cell.reason = f"{type(error).__name__}: {first_line(error)}"
    cell.seconds = round(time.perf_counter() - started, 2)
    if cell.reason:
        cell.reason = own_reason(cell.reason, strategy)
        cell.cause = cause_of(cell.reason, strategy)
        found = re.search(r"differs from PyTorch by ([0-9.eE+-]+)", cell.reason)
        cell.max_abs_diff = float(found.group(1)) if found else None
        return cell
    cell.status = "ok"
    cell.winner = report.strategy
    cell.attempts = [{"strategy": a.strategy, "status": a.status, "reason": a.reason} for a in report.attempts]
    cell.exporter = report.sidecar["export"]["exporter"]
    cell.max_abs_diff = report.verification.max_abs_diff if report.verification else None
    graph = onnx.load(str(output), load_external_data=False)
    node_tags = {name: NodeTag(entry["tag"], entry["module"]) for name, entry in report.sidecar["nodes"].items()}
    tags = HierarchyTags.from_model(loaded.model, False)
    # the published file is named as a plain export of the model names it (the wrapper's scope stripped)
    module_names = [name for name, _ in loaded.model.named_modules()]
    measured = measure_agreement(graph, node_tags, cell.exporter, tags, module_names, wrapped=False)
    cell.nodes = len(graph.graph.node)
    cell.reference_nodes = measured.reference_nodes
    cell.agreement = None if measured.agreement is None else round(measured.agreement, 4)
    cell.contaminated = measured.contaminated
    for produced in workdir.iterdir():
        produced.unlink()
    return cell


def worker_main() -> int:
    """Read ``MODEL BATCH STRATEGY RESULT_PATH`` lines on stdin; write each cell's JSON to RESULT_PATH."""
    import warnings

    warnings.simplefilter("ignore")
    workdir = Path(tempfile.mkdtemp(prefix="zoo-sweep-"))
    for line in sys.stdin:
        model_name, batch, strategy, result_path = line.split()
        cell = run_cell(model_name, int(batch), strategy, workdir)
        temporary = Path(result_path + ".part")
        temporary.write_text(json.dumps(asdict(cell)))
        os.replace(temporary, result_path)
    return 0


# --------------------------------------------------------------------------------------------------------------
# The parent: one worker per model, a deadline per cell, results saved as they come.


class Worker:
    """A worker process for one model; replaced after a timeout or a crash."""

    def __init__(self, log_path: Path):
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore",
                   TORCH_CPP_LOG_LEVEL="ERROR")
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", *CATALOG.worker_args],
            stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )

    def run(self, cell: Cell, timeout: float, result_path: Path) -> Cell:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{cell.model} {cell.batch} {cell.strategy} {result_path}\n".encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if result_path.exists():
                data = json.loads(result_path.read_text())
                result_path.unlink()
                return Cell(**data)
            if self.process.poll() is not None:
                cell.reason = f"worker died (exit code {self.process.returncode}{self._out_of_memory()}): {self._last_line()}"
                cell.cause = "crashed"
                return cell
            time.sleep(0.2)
        self.stop()
        cell.reason = f"timed out after {timeout:g} s"
        cell.cause = "timeout"
        cell.seconds = timeout
        return cell

    def _out_of_memory(self) -> str:
        return ", killed: out of memory?" if self.process.returncode in (-signal.SIGKILL, 137) else ""

    def _last_line(self) -> str:
        self.log.flush()
        lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1][:200] if lines else "no output"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # the worker's own session: it and its children only
        self.process.wait()
        self.log.close()

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.stop()


class Results:
    """The JSON results file, rewritten atomically after every cell."""

    def __init__(self, path: Path, meta: dict[str, Any], resume: bool):
        self.path = path
        self.lock = threading.Lock()
        self.cells: dict[tuple[str, int, str], Cell] = {}
        if resume and path.is_file():
            for data in json.loads(path.read_text()).get("cells", []):
                cell = Cell(**data)
                cell.reason = own_reason(cell.reason, cell.strategy)
                if cell.status != "ok" and cell.cause not in ("timeout", "crashed", "model does not build",
                                                               "model fails in torch"):
                    cell.cause = cause_of(cell.reason, cell.strategy)
                self.cells[cell.key] = cell
        self.meta = meta

    def add(self, cell: Cell) -> None:
        with self.lock:
            self.cells[cell.key] = cell
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"meta": self.meta, "cells": [asdict(c) for c in self.cells.values()]}
        temporary = self.path.with_name(self.path.name + ".part")
        temporary.write_text(json.dumps(document, indent=1) + "\n")
        os.replace(temporary, self.path)


def _format_cell(cell: Cell) -> str:
    if cell.status == "ok":
        text = "-" if cell.agreement is None else f"{cell.agreement:.3f}"
        return text + (f" c{cell.contaminated}" if cell.contaminated else "")
    return f"x {cell.cause}"


def _pair(cells: dict[tuple[str, int, str], Cell], model: str, strategy: str, batches: list[int],
          render=_format_cell) -> str:
    shown = [render(cells[(model, b, strategy)]) if (model, b, strategy) in cells else "" for b in batches]
    if len(set(shown)) == 1:
        return shown[0]
    return " / ".join(text or "?" for text in shown)


def _chain_cell(cell: Cell) -> str:
    return cell.winner if cell.status == "ok" else f"x {cell.cause}"


def _duration(value: Any) -> str:
    return f"{value / 60:.0f} min" if isinstance(value, (int, float)) else str(value)


def render_table(results: Results, models: list[str], strategies: list[str], batches: list[int]) -> str:
    """The Markdown page: header, one row per model, then every failure reason in full."""
    meta = results.meta
    cells = results.cells
    shown = [s for s in strategies if s != CHAIN]
    batch_text = " / ".join(f"batch {b}" for b in batches)
    lines = [
        "# The model zoo: every strategy on every architecture",
        "",
        f"Generated by `{meta['command']}` on {meta['date']}.",
        f"Machine: {meta['machine']}. torch {meta['versions']['torch']}, transformers "
        f"{meta['versions']['transformers']}, onnx {meta['versions']['onnx']}, onnxruntime "
        f"{meta['versions']['onnxruntime']}."
        + (f" Code: {meta['code']}." if meta.get("code") else "")
        + (f" Wall time: {_duration(meta['sweep_seconds'])}." if meta.get("sweep_seconds") else ""),
        "",
        "Each model is built from its config with random weights (`benchmarks/zoo.py`) and exported with each "
        "strategy alone and with the default chain, verified in onnxruntime at the example shape and a second "
        "shape. A number is the share of nodes whose tag matches PyTorch's own record of the module that produced "
        "them (`modelexport compare`); `cN` counts nodes tagged to a sibling layer (contamination); `x` is a failed "
        "export with the short cause (full reasons below). "
        + (f"Where {batch_text} differ, both are shown in that order. " if len(batches) > 1 else f"All at {batch_text}. ")
        + "The chain column names the strategy that won; where the chain's first strategy exported and verified "
        "on its own, the chain (which tries it first with the same inputs) is not exported again.",
        "",
        "| model | family | " + " | ".join(shown) + (" | chain |" if CHAIN in strategies else " |"),
        "| --- | --- | " + " | ".join("---" for _ in shown) + (" | --- |" if CHAIN in strategies else " |"),
    ]
    for model in models:
        row = [model, CATALOG.family(model)] + [_pair(cells, model, s, batches) for s in shown]
        if CHAIN in strategies:
            row.append(_pair(cells, model, CHAIN, batches, _chain_cell))
        lines.append("| " + " | ".join(row) + " |")
    ok = [c for c in cells.values() if c.model in models and c.status == "ok"]
    if ok:
        lines += ["", "Mean agreement over exported cells, and cells exported:", ""]
        for strategy in shown + ([CHAIN] if CHAIN in strategies else []):
            mine = [c for c in cells.values() if c.strategy == strategy and c.model in models]
            done = [c for c in mine if c.status == "ok" and c.agreement is not None]
            mean = sum(c.agreement for c in done) / len(done) if done else float("nan")
            lines.append(f"- {strategy}: {sum(c.status == 'ok' for c in mine)} of {len(mine)} exported, "
                         f"mean agreement {mean:.3f}, {sum(c.contaminated for c in mine)} contaminated nodes")
    failures = sorted((c for c in cells.values() if c.model in models and c.status != "ok"),
                      key=lambda c: (c.model, c.strategy, c.batch))
    if failures:
        lines += ["", "## Failure reasons", ""]
        for cell in failures:
            lines.append(f"- {cell.model} / {cell.strategy} / batch {cell.batch}: {cell.reason}")
    return "\n".join(lines) + "\n"


HELDOUT_MARKERS = ("<!-- held-out: written from benchmarks/results/draw-heldout-*.md -->", "<!-- /held-out -->")


def keep_heldout_section(table: str, path: Path) -> str:
    """The zoo's page with the held-out section of the page it replaces kept after its first paragraph."""
    start, end = HELDOUT_MARKERS
    old = path.read_text() if path.is_file() else ""
    if start not in old or end not in old:
        return table
    section = old[old.index(start):old.index(end) + len(end)]
    title, _, rest = table.partition("\n\n")
    return f"{title}\n\n{section}\n\n{rest}"


THRESHOLDS = {"htp": 0.99, "usage_based": 0.97}  # issue 9's targets


def render_digest(results: Results) -> str:
    """Failures grouped by cause (per strategy, which models at which batch), and agreement under the targets."""
    cells = list(results.cells.values())
    lines = [f"Cells measured: {len(cells)} ({sum(c.status == 'ok' for c in cells)} ok), "
             f"{len({c.model for c in cells})} models, batches {sorted({c.batch for c in cells})}.", "",
             "## Failures by cause", ""]
    by_cause: dict[str, list[Cell]] = {}
    for cell in cells:
        if cell.status != "ok":
            by_cause.setdefault(cell.cause, []).append(cell)
    for cause, failed in sorted(by_cause.items(), key=lambda item: -len(item[1])):
        lines.append(f"### {cause} ({len(failed)} cells)")
        by_strategy: dict[str, list[str]] = {}
        for cell in sorted(failed, key=lambda c: (c.strategy, c.model, c.batch)):
            by_strategy.setdefault(cell.strategy, []).append(f"{cell.model} b{cell.batch}")
        for strategy, where in by_strategy.items():
            lines.append(f"- {strategy}: {', '.join(where)}")
        lines.append(f"- e.g. {failed[0].model}/{failed[0].strategy}/b{failed[0].batch}: {failed[0].reason[:300]}")
        lines.append("")
    lines += ["## Agreement under the targets", ""]
    for strategy, target in THRESHOLDS.items():
        low = sorted((c for c in cells if c.strategy == strategy and c.status == "ok"
                      and ((c.agreement is not None and c.agreement < target) or c.contaminated)),
                     key=lambda c: (c.agreement if c.agreement is not None else 0.0))
        lines.append(f"- {strategy} (< {target}, or contaminated): " + (", ".join(
            f"{c.model} b{c.batch} {c.agreement:.3f}" + (f" c{c.contaminated}" if c.contaminated else "")
            for c in low) or "none"))
    return "\n".join(lines) + "\n"


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("torch", "transformers", "onnx", "onnxruntime", "onnxscript", "modelexport-core", "timm",
                    "torchvision"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def _environment() -> list[str]:
    """Every distribution installed beside the sweep, as ``name==version``, sorted: a figure that moves between two
    environments with the same headline versions (above) can be traced to the package that changed."""
    from importlib.metadata import distributions

    return sorted({f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata['Name']},
                  key=str.lower)


def _machine() -> str:
    memory = ""
    try:
        total_kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {total_kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores{memory}, Python {platform.python_version()}"


def installed_strategies() -> list[str]:
    from modelexport_core.plugin.discovery import get_strategies

    return [info.name for info in get_strategies()]


def _chain_from_first(cell: Cell, first: Cell) -> Cell:
    """The chain's cell when its first strategy exported and verified alone: the chain stops at that same export."""
    return replace(first, strategy=CHAIN, winner=first.strategy, derived=True,
                   attempts=[{"strategy": first.strategy, "status": "ok", "reason": ""}])


def _run_model(model: str, todo: list[Cell], results: Results, timeout: float, logs: Path, done: list[int],
               total: int, chain_first: str | None) -> None:
    worker: Worker | None = None
    try:
        for cell in todo:
            first = results.cells.get((model, cell.batch, chain_first or ""))
            if cell.strategy == CHAIN and first is not None and first.status == "ok":
                result = _chain_from_first(cell, first)
            else:
                if worker is None or not worker.alive:
                    worker = Worker(logs / f"{model}.log")
                result_path = logs / f"{model}-{cell.batch}-{cell.strategy}.result.json"
                result = worker.run(cell, timeout, result_path)
            results.add(result)
            done[0] += 1
            figure = f"{result.agreement:.3f}" if result.agreement is not None else "-"
            shown = (f"ok {figure}" + (f" c{result.contaminated}" if result.contaminated else "")
                     + (f" ({result.winner})" if cell.strategy == CHAIN else "")) if result.status == "ok" \
                else f"FAILED {result.cause}"
            print(f"[{done[0]}/{total}] {model} b{cell.batch} {cell.strategy}: {shown} {result.seconds:.1f} s",
                  file=sys.stderr, flush=True)
    finally:
        if worker is not None:
            worker.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--strategies", default="", help=f"comma-separated, '{CHAIN}' for the default chain "
                                                          "(default: every installed strategy and the chain)")
    parser.add_argument("--batches", default="1,2")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per cell")
    parser.add_argument("--jobs", type=int, default=1, help="models exported at the same time")
    parser.add_argument("--resume", action="store_true", help="keep the cells already in the JSON file")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, dest="json_path")
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--rerun-chain", action="store_true",
                        help="export the chain even where its first strategy's own cell already succeeded")
    parser.add_argument("--table-only", action="store_true", help="rewrite the table from the JSON file")
    parser.add_argument("--digest", type=Path, help="also write failures grouped by cause to this Markdown file")
    parser.add_argument("--draw", choices=("dev", "heldout"),
                        help="models from benchmarks/generator.py instead of the zoo (benchmark environment)")
    parser.add_argument("--seed", type=int, help="the held-out draw's seed (never the development seed)")
    parser.add_argument("--size", type=int, help="models in the draw (default: every family)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--generated", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    CATALOG.generated = bool(args.generated or args.draw)
    if args.worker:
        return worker_main()

    if args.draw:
        import generator

        try:
            drawn = [m.name for m in generator.draw(args.draw, args.seed, size=args.size)]
        except ValueError as error:
            parser.error(str(error))
        only = [m for m in args.only.split(",") if m]
        models = [m for m in drawn if not only or m in only or generator.family_of(m) in only
                  or generator.family_of(m).split(":")[0] in only]
        stem = f"draw-{args.draw}" + (f"-{args.seed}" if args.draw == "heldout" else "")
        if args.json_path == DEFAULT_JSON:
            args.json_path = HERE / "results" / f"{stem}.json"
        if args.table == DEFAULT_TABLE:
            args.table = HERE / "results" / f"{stem}.md"
        if not args.strategies:
            args.strategies = "fx,htp,usage_based"
    else:
        models = [m for m in args.only.split(",") if m] or list(zoo.ZOO)
        unknown = [m for m in models if m not in zoo.ZOO]
        if unknown:
            parser.error(f"no zoo model {unknown[0]!r}; the zoo has {', '.join(zoo.ZOO)}")
    saved = json.loads(args.json_path.read_text())["meta"] if args.table_only and args.json_path.is_file() else {}
    strategies = [s for s in args.strategies.split(",") if s] or saved.get("strategies") \
        or [*installed_strategies(), CHAIN]
    batches = [int(b) for b in args.batches.split(",") if b]
    if saved and not args.only and not args.draw:
        batches = sorted({cell["batch"] for cell in json.loads(args.json_path.read_text())["cells"]})
    command = "python benchmarks/zoo_sweep.py" + ("" if argv is None and len(sys.argv) == 1 else " ") + \
        shlex.join(sys.argv[1:] if argv is None else argv)
    meta = {"command": command.strip(), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": _machine(), "versions": _versions(),
            "environment": _environment(), "strategies": strategies, "batches": batches}
    if args.draw:
        meta.update(draw=args.draw, seed=generator.DEV_SEED if args.draw == "dev" else args.seed, models=models)
    results = Results(args.json_path, meta, resume=args.resume or args.table_only)
    if args.table_only:
        results.meta = saved or meta
    else:
        by_model: dict[str, list[Cell]] = {}
        for model in models:
            for batch in batches:
                for strategy in strategies:
                    if (model, batch, strategy) not in results.cells:
                        by_model.setdefault(model, []).append(Cell(model, CATALOG.family(model), batch, strategy))
        # the chain tries the first installed strategy first: where that strategy alone exported and verified,
        # the chain's export is the same one, and its cell is taken from it (--rerun-chain exports it again)
        chain_first = None if args.rerun_chain else installed_strategies()[0]
        total = sum(len(cells) for cells in by_model.values())
        print(f"{total} cells to run ({len(results.cells)} kept)", file=sys.stderr, flush=True)
        logs = args.json_path.with_name(args.json_path.stem + "-logs")  # each worker's output, for a crash's cause
        logs.mkdir(parents=True, exist_ok=True)
        done = [0]
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
            futures = [pool.submit(_run_model, model, todo, results, args.timeout, logs, done, total, chain_first)
                       for model, todo in by_model.items()]
            for future in futures:
                future.result()
        results.meta["sweep_seconds"] = round(time.perf_counter() - started, 1)
        results.save()
        print(f"done in {time.perf_counter() - started:.0f} s; worker logs in {logs}", file=sys.stderr)
    args.table.parent.mkdir(parents=True, exist_ok=True)
    if args.draw:
        import draw_report

        table = draw_report.render(results, models, strategies, batches)
    else:
        table = render_table(results, models, strategies, batches)
        table = keep_heldout_section(table, args.table)
    temporary = args.table.with_name(args.table.name + ".part")
    temporary.write_text(table)
    os.replace(temporary, args.table)
    if args.digest:
        args.digest.write_text(render_digest(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

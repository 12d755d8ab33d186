"""Cost of tags: modelexport's CLI against a plain ``torch.onnx.export`` of the same model, same exporter.

Run: .venv/bin/python benchmarks/overhead.py [--models bert-base,gpt2-small] [--repeats 3] [--quick]
Every export is its own child process; runs are interleaved (plain, each strategy, plain, ...) so
load from other work on the machine falls on all of them alike. Reports the median wall time and
the median of each child's own peak resident memory, and writes a table into docs/overhead.md.
TorchScript-based strategies are compared with a plain TorchScript export (dynamic batch and
sequence, opset 17); fx with a plain dynamo export, both static (``--static``). Not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from report import DOC, ROOT, Run, command_line, load, machine, measure, median, replace_section, today

FACTORIES = ROOT / "benchmarks" / "bench_models.py"
MODELS = {
    "tiny-bert": "tiny_bert",
    "bert-base": "bert_base",
    "gpt2-small": "gpt2_small",
    "llama-small": "llama_small",
    "llama-0.6b": "llama_large",
}
DEFAULT_MODELS = ("tiny-bert", "bert-base", "gpt2-small", "llama-small")
STRATEGIES = {  # strategy -> (exporter of its baseline, static)
    "builtin_tracking": ("torchscript", False),
    "usage_based": ("torchscript", False),
    "htp": ("torchscript", False),
    "fx": ("dynamo", True),
}


@dataclass
class Config:
    """One thing to run for a model: a plain export or a modelexport export with one strategy."""

    label: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)

    @property
    def ok(self) -> list[Run]:
        return [run for run in self.runs if run.returncode == 0]

    def seconds(self) -> float:
        return median([run.seconds for run in self.ok])

    def peak_mb(self) -> float:
        return median([run.peak_mb for run in self.ok])

    def cpu_seconds(self) -> float:
        return median([run.cpu_seconds for run in self.ok])


def plain_label(exporter: str, static: bool) -> str:
    return f"plain {exporter}" + (" static" if static else "")


def source_path(checkout: Path) -> str:
    """PYTHONPATH that runs modelexport (core and plugins) from another checkout with this environment."""
    return ":".join(str(p) for p in [checkout / "src", *sorted((checkout / "plugins").glob("*/src"))])


from modelexport_core.export.allocator import ENVIRONMENT as SAME_ALLOCATOR  # noqa: E402 - what the command sets


def configs_for(factory: str, strategies: list[str], workdir: Path, verify: bool,
                before: Path | None = None, same_allocator: bool = False) -> dict[str, Config]:
    cli = str(Path(sys.executable).parent / "modelexport")
    configs: dict[str, Config] = {}
    for strategy in strategies:
        exporter, static = STRATEGIES[strategy]
        baseline = plain_label(exporter, static)
        if baseline not in configs:
            command = [sys.executable, str(ROOT / "benchmarks" / "plain_export.py"), factory,
                       str(workdir / f"{baseline.replace(' ', '-')}.onnx"), "--exporter", exporter]
            configs[baseline] = Config(baseline, command + (["--static"] if static else []) + (["--verify"] if verify else []),
                                       SAME_ALLOCATOR if same_allocator else {})
        command = [cli, "export", factory, str(workdir / f"{strategy}.onnx"), "--strategy", strategy]
        command += ([] if verify else ["--no-verify"]) + (["--static"] if static else [])
        configs[strategy] = Config(strategy, command)
        if before is not None:
            label = f"{strategy} (before)"
            configs[label] = Config(label, command[:3] + [str(workdir / f"{strategy}-before.onnx")] + command[4:],
                                    {"PYTHONPATH": source_path(before)})
    return configs


def table(model: str, configs: dict[str, Config], strategies: list[str]) -> list[str]:
    rows = []
    for label in [label for label in configs if label.split(" (")[0] in strategies]:
        strategy = label.split(" (")[0]
        exporter, static = STRATEGIES[strategy]
        plain, tagged = configs[plain_label(exporter, static)], configs[label]
        if not tagged.ok or not plain.ok:
            failed = (tagged.runs or plain.runs)[-1].stderr_tail[:120] if not tagged.ok else "plain export failed"
            rows.append(f"| {model} | {label} | {plain_label(exporter, static)} | failed: {failed} | | | | | | | | |")
            continue
        rows.append(
            f"| {model} | {label} | {plain_label(exporter, static)} | {plain.seconds():.2f} | {tagged.seconds():.2f} "
            f"| **{tagged.seconds() / plain.seconds():.2f}** | {plain.peak_mb():.0f} | {tagged.peak_mb():.0f} "
            f"| **{tagged.peak_mb() / plain.peak_mb():.2f}** | {plain.cpu_seconds():.2f} | {tagged.cpu_seconds():.2f} "
            f"| **{tagged.cpu_seconds() / plain.cpu_seconds():.2f}** |"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"comma-separated: {', '.join(MODELS)}")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--verify", action="store_true", help="verify with onnxruntime too (default --no-verify)")
    parser.add_argument("--output", type=Path, default=DOC, help="Markdown file the table goes into")
    parser.add_argument("--section", default="overhead-quiet", help="name of the section of the file to replace")
    parser.add_argument("--before", type=Path, help="also run each strategy from this checkout (before a change)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny BERT, builtin_tracking, once")
    parser.add_argument("--same-allocator", action="store_true",
                        help="run the plain export with the allocator settings the modelexport command sets for itself")
    args = parser.parse_args()
    if args.quick:
        args.models, args.strategies, args.repeats = "tiny-bert", "builtin_tracking", 1
    models = args.models.split(",")
    strategies = args.strategies.split(",")
    unknown = [m for m in models if m not in MODELS] + [s for s in strategies if s not in STRATEGIES]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    load_before = load()
    rows = []
    with tempfile.TemporaryDirectory(prefix="modelexport-overhead-") as tmp:
        for model in models:
            factory = f"{FACTORIES}:{MODELS[model]}"
            configs = configs_for(factory, strategies, Path(tmp), args.verify, args.before, args.same_allocator)
            for repeat in range(args.repeats):
                for config in configs.values():
                    run = measure(config.command, config.env)
                    config.runs.append(run)
                    status = "ok" if run.returncode == 0 else f"exit {run.returncode}: {run.stderr_tail[:200]}"
                    print(f"{model:12} {config.label:24} #{repeat + 1} {run.seconds:7.2f} s {run.cpu_seconds:7.2f} s CPU "
                          f"{run.peak_mb:7.0f} MB  {status}",
                          file=sys.stderr, flush=True)
            rows.extend(table(model, configs, strategies))
    text = "\n".join([
        f"Measured {today()} on {machine()}.",
        f"Load average (1, 5, 15 min) {load_before} before, {load()} after; the machine is shared, so",
        "figures are noisy: the runs are interleaved and each figure is the median of "
        f"{args.repeats} run(s), each its own process. CPU s is the process's user and system time, which load "
        "inflates far less than wall time.",
        f"Command: `{command_line()}`; modelexport runs as `modelexport export FACTORY OUT --strategy S "
        f"{'' if args.verify else '--no-verify '}[--static]`, the plain export as "
        f"`benchmarks/plain_export.py{' --verify' if args.verify else ''}`"
        f"{' (then onnxruntime on its file against PyTorch, the same inputs)' if args.verify else ''}"
        f"{' with glibc set as the modelexport command sets itself (' + ' '.join(f'{k}={v}' for k, v in SAME_ALLOCATOR.items()) + ')' if args.same_allocator else ''}.",
        "",
        "| model | strategy | baseline | plain s | modelexport s | time ratio | plain MB | modelexport MB | memory ratio "
        "| plain CPU s | modelexport CPU s | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    replace_section(args.output, args.section, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

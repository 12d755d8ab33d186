"""What exporting without constant folding changes for users: node count, ops, and speed after ORT's optimization.

usage_based matches graph tensors to the model's parameters; TorchScript's constant folding
rewrites parameters (BatchNorm folded into convolutions, recurrent weights packed, linear
weights transposed). This measures what the unfolded graph costs a user who runs it in
onnxruntime with its default (full) graph optimization.

    .venv/bin/python benchmarks/constant_folding.py resnet bert lstm_tagger
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import zoo  # noqa: E402

RUNS = 200


def _export(model, inputs, path: Path, folding: bool) -> None:
    import torch

    from modelexport_core import make_context

    ctx = make_context(model, inputs)  # transformers' keyword-first forwards need the core's wrapper
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(ctx.module, ctx.args, str(path), input_names=ctx.input_names, dynamo=False,
                          do_constant_folding=folding)


def _optimized(path: Path, optimized_path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.optimized_model_filepath = str(optimized_path)
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _seconds_per_run(session, feeds) -> float:
    for _ in range(10):
        session.run(None, feeds)
    started = time.perf_counter()
    for _ in range(RUNS):
        session.run(None, feeds)
    return (time.perf_counter() - started) / RUNS


def measure(name: str, folder: Path) -> dict[str, object]:
    import onnx

    model, inputs = zoo.build(name, 2)
    feeds = {key: value.numpy() for key, value in inputs.items()}
    row: dict[str, object] = {"model": name}
    ops: dict[bool, Counter] = {}
    for folding in (True, False):
        path = folder / f"{name}.{folding}.onnx"
        _export(model, inputs, path, folding)
        exported = onnx.load(str(path))
        session = _optimized(path, folder / f"{name}.{folding}.opt.onnx")
        optimized = onnx.load(str(folder / f"{name}.{folding}.opt.onnx"))
        ops[folding] = Counter(node.op_type for node in optimized.graph.node)
        label = "folded" if folding else "unfolded"
        row[f"{label}_nodes"] = len(exported.graph.node)
        row[f"{label}_ort_nodes"] = len(optimized.graph.node)
        row[f"{label}_ms"] = round(1000 * _seconds_per_run(session, feeds), 3)
    row["ort_ops_differ"] = {op: (ops[True][op], ops[False][op]) for op in ops[True] | ops[False]
                             if ops[True][op] != ops[False][op]}
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet", "mobilenet_v2", "lstm_tagger", "gru_classifier",
                                                      "bert", "gpt2", "vit"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            print(measure(name, Path(folder)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A plain ``torch.onnx.export`` of a benchmark factory: the baseline modelexport is measured against.

Run: python benchmarks/plain_export.py FACTORY OUT.onnx --exporter torchscript|dynamo [--static]
It does what a user without modelexport would write: the same model and inputs, the same
exporter, the same dynamic axes (batch and sequence) and opset as modelexport's default. The
model is called through a few-line module that takes the tensors positionally and returns a
tuple, since transformers 5 forwards are keyword-first and the TorchScript exporter binds
keyword inputs badly (``got multiple values for argument 'use_cache'``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from pathlib import Path


def load_factory(spec: str):
    path, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("bench_factory", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("factory")
    parser.add_argument("output", type=Path)
    parser.add_argument("--exporter", choices=("torchscript", "dynamo"), required=True)
    parser.add_argument("--static", action="store_true")
    parser.add_argument("--verify", action="store_true",
                        help="then run the file in onnxruntime on the same inputs and compare with PyTorch")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    model, inputs = load_factory(args.factory)
    names = list(inputs)

    class Positional(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            output = self.model(**dict(zip(names, tensors)))
            return output.to_tuple() if hasattr(output, "to_tuple") else output

    module, tensors = Positional().eval(), tuple(inputs.values())
    if args.exporter == "torchscript":
        axes = None if args.static else {name: {0: "batch", 1: "sequence"} for name in names}
        torch.onnx.export(module, tensors, str(args.output), input_names=names, dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    else:
        shapes = None
        if not args.static:
            from torch.export import Dim

            shapes = (tuple({0: Dim.AUTO, 1: Dim.AUTO} for _ in names),)  # the *tensors of forward
        torch.onnx.export(module, tensors, str(args.output), input_names=names, dynamic_shapes=shapes,
                          opset_version=18, dynamo=True)
    if args.verify:
        check(module, tensors, names, args.output)
    return 0


def check(module, tensors, names, path: Path) -> None:
    """What a careful user runs after exporting: onnxruntime on the file against PyTorch, same inputs."""
    import numpy as np
    import onnxruntime
    import torch

    with torch.no_grad():
        expected = [t.numpy() for t in torch.utils._pytree.tree_leaves(module(*tensors))]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), tensors)}
    actual = session.run(None, feed)
    worst = max(float(np.abs(a - e).max()) for a, e in zip(actual, expected))
    if worst > 1e-3:
        raise SystemExit(f"onnxruntime differs from PyTorch by {worst:.3g}")


if __name__ == "__main__":
    sys.exit(main())

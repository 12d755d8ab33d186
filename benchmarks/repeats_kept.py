"""What usage_based's own TorchScript export changes by keeping equal values computed twice as separate nodes.

The TorchScript exporter merges equal values (two modules each reading the same input's size) into one node,
named after the first; usage_based's own export skips that merge (``export_torchscript(keep_repeats=True)``).
This prints, for each test preset, the file's node count without and with the merge skipped, and each file's
node count after onnxruntime's basic graph optimisation (which merges equal values again).

    .venv/bin/python benchmarks/repeats_kept.py bert gpt2 vit llama t5
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path


def node_counts(name: str) -> tuple[int, int, int, int]:
    """Nodes of the merged file, of it optimised, of the unmerged file, of it optimised."""
    import onnx
    import onnxruntime as ort

    from modelexport_core import make_context
    from modelexport_core.export.exporters import export_torchscript
    from modelexport_core.testing import build_case

    ctx = make_context(*build_case(name))
    counts: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        for keep in (False, True):
            path, optimised = Path(folder) / f"{keep}.onnx", Path(folder) / f"{keep}-optimised.onnx"
            export_torchscript(ctx, path, keep_repeats=keep)
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            options.optimized_model_filepath = str(optimised)
            ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            counts += [len(onnx.load(str(file), load_external_data=False).graph.node) for file in (path, optimised)]
    return counts[0], counts[1], counts[2], counts[3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="test presets (modelexport_core.testing.build_case names)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| model | merged | optimised | kept apart | optimised |")
    print("|---|---|---|---|---|")
    for name in args.models:
        print("| {} | {} | {} | {} | {} |".format(name, *node_counts(name)), flush=True)


if __name__ == "__main__":
    main()

"""Where one strategy's tags part from PyTorch's records on one generated model: nodes grouped by
(the strategy's module, PyTorch's module, op type). For the development draw: a held-out draw is not debugged on.

    .venv-bench/bin/python benchmarks/draw_detail.py transformers:bert@0.0 htp [BATCH]
"""
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import generator  # noqa: E402
import onnx  # noqa: E402

from modelexport_core import make_context
from modelexport_core.format.reference import dynamo_node_modules, torchscript_node_modules
from modelexport_core.plugin.discovery import get_strategy
from modelexport_core.prepare.wrapper import export_settings
from modelexport_core.testing import sibling_contamination

name, strategy = sys.argv[1], sys.argv[2]
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 1
model, inputs = generator.by_name(name).build(batch)
ctx = make_context(model, inputs, by_keyword=True)
info = get_strategy(strategy)
with tempfile.TemporaryDirectory() as d:
    path = Path(d) / "m.onnx"
    with export_settings(model):  # the kernels the pipeline exports with (experts as batched matmuls)
        result = info.strategy().export(ctx, path)
    om = onnx.load(str(path))
ref = dynamo_node_modules(om) if result.exporter == "dynamo" else torchscript_node_modules(om, [n for n, _ in ctx.module.named_modules()])
scoped = [k for k, v in ref.items() if v is not None]
wrong = [k for k in scoped if result.node_modules.get(k) != ref[k]]
print(result.exporter, len(scoped), "agreement", 1 - len(wrong) / len(scoped), "contaminated", len(sibling_contamination(result.node_modules, ref)))
groups = Counter((result.node_modules.get(k), ref[k], k.rpartition("/")[2].split("_")[0]) for k in wrong)
for (h, r, op), n in groups.most_common(15):
    print(f"{n:3} {strategy} {h!r} torch {r!r} {op}")

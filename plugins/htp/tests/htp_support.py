"""Shared helpers of the htp tests: one export per model and mode, and its measures against PyTorch's records."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from htp_models import ARCHITECTURES, CUSTOM_CASES
from modelexport_core import ExportContext, TaggingResult, make_context
from modelexport_core.graph import GraphIndex, node_key
from modelexport_core.inputs import inputs_from_config
from modelexport_core.presets import build_preset
from modelexport_core.reference import dynamo_node_modules, torchscript_node_modules
from modelexport_core.testing import HARD_CASES, sibling_contamination
from modelexport_htp.strategy import HTPStrategy

PRESETS = ["bert", "gpt2", "vit", "llama"]
CASES = {**HARD_CASES, **CUSTOM_CASES}
BUILDERS = {**CASES, **ARCHITECTURES}

logging.getLogger("torch.onnx").setLevel(logging.ERROR)


@dataclass
class Measured:
    """One export by htp, PyTorch's own record of it, and how the two compare."""

    name: str
    ctx: ExportContext
    onnx_model: onnx.ModelProto
    result: TaggingResult
    reference: dict[str, str | None]
    scoped: list[str] = field(default_factory=list)
    disagreeing: list[str] = field(default_factory=list)
    contaminated: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return 1 - len(self.disagreeing) / len(self.scoped)

    @property
    def coverage(self) -> float:
        keys = [node_key(n, i) for i, n in enumerate(self.onnx_model.graph.node)]
        return sum(1 for k in keys if k in self.result.node_modules) / len(keys)

    def report(self) -> str:
        lines = [f"{self.name}: agreement {self.agreement:.4f}, contaminated {len(self.contaminated)}"]
        for key in self.disagreeing[:20]:
            lines.append(f"  {key}: htp {self.result.node_modules.get(key)!r}, PyTorch {self.reference[key]!r}")
        return "\n".join(lines)


def build(name: str):
    """(model, inputs) of a preset or of a hard or custom case."""
    if name in BUILDERS:
        return BUILDERS[name]()
    model = build_preset(name)
    return model, inputs_from_config(model)


def measure(name: str, directory: Path, dynamic: bool = True, exporter: str = "torchscript") -> Measured:
    """Export ``name`` with htp and compare each node's module with PyTorch's record of it."""
    model, inputs = build(name)
    ctx = make_context(model, inputs, dynamic=dynamic, options={"exporter": exporter})
    path = directory / f"{name}-{'dynamic' if dynamic else 'static'}-{exporter}.onnx"
    result = HTPStrategy().export(ctx, path)
    onnx_model = onnx.load(str(path))
    if result.exporter == "torchscript":
        reference = torchscript_node_modules(onnx_model, [n for n, _ in ctx.module.named_modules()])
    else:
        reference = dynamo_node_modules(onnx_model)
    measured = Measured(name, ctx, onnx_model, result, reference)
    measured.scoped = [k for k, v in reference.items() if v is not None]
    measured.disagreeing = [k for k in measured.scoped if result.node_modules.get(k) != reference[k]]
    measured.contaminated = sibling_contamination(result.node_modules, reference)
    return measured


def initializer_owners(measured: Measured) -> dict[str, set[str]]:
    """For each Identity node reading an initializer: the modules allowed to own it.

    Those are the modules holding a parameter with the same values (also transposed) and
    the modules PyTorch's record gives the nodes consuming it.
    """
    graph = measured.onnx_model.graph
    index = GraphIndex.of(graph)
    initializers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    params = []
    for qualname, module in measured.ctx.model.named_modules():
        for tensor in list(module.parameters(recurse=False)) + list(module.buffers(recurse=False)):
            params.append((qualname, tensor.detach().numpy()))
    owners: dict[str, set[str]] = {}
    for i, node in enumerate(graph.node):
        if node.op_type != "Identity" or node.input[0] not in initializers:
            continue
        value = initializers[node.input[0]]
        allowed = {
            q for q, p in params
            if (p.shape == value.shape and np.allclose(p, value)) or (p.ndim == 2 and p.T.shape == value.shape
                                                                      and np.allclose(p.T, value))
        }
        allowed |= {measured.reference[index.keys[c]] for c in index.node_consumers(graph, i)} - {None}
        owners[index.keys[i]] = allowed
    return owners

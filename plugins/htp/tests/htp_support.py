"""What the htp tests share beyond the core's test kit: their own model cases and initializer owners."""

from __future__ import annotations

import logging

import numpy as np
from htp_models import ARCHITECTURES, CUSTOM_CASES, OPEN_CASES
from onnx import numpy_helper

from modelexport_core.format.graph import GraphIndex
from modelexport_core.testing import HARD_CASES, Measured, build_case

PRESETS = ["bert", "gpt2", "vit", "llama"]
CASES = {**HARD_CASES, **CUSTOM_CASES}
BUILDERS = {**CASES, **ARCHITECTURES, **OPEN_CASES}

logging.getLogger("torch.onnx").setLevel(logging.ERROR)


def build(name: str):
    """(model, inputs) of a preset or of a hard or custom case."""
    return build_case(name, BUILDERS)


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

"""What the usage_based tests share beyond the core's test kit: the models they measure and the bar they hold."""

from __future__ import annotations

from pathlib import Path

import torch

from modelexport_core import make_context
from modelexport_core.testing import HARD_CASES, Measured, assert_every_recorded_node, measure_export

PRESET_MODELS = ["bert", "gpt2", "vit", "llama"]
ALL_MODELS = PRESET_MODELS + list(HARD_CASES)
EXPORTED_MODELS = ALL_MODELS + ["t5"]
"""Models measured on usage_based's own export; the dynamo exporter itself fails on the t5 preset."""
MIN_AGREEMENT = 0.95

__all__ = ["ALL_MODELS", "EXPORTED_MODELS", "MIN_AGREEMENT", "PRESET_MODELS", "Measured", "assert_every_recorded_node",
           "measure_case"]


def measure_case(cases: dict, name: str, directory: Path, exporter: str | None = None) -> Measured:
    """usage_based's own export of one small pattern model (``cases[name]``: its class and a maker of its inputs);
    ``exporter``: the exporter asked for (else the strategy's own choice)."""
    build, inputs = cases[name]
    torch.manual_seed(0)
    model = build().eval()
    ctx = make_context(model, inputs())
    if exporter is not None:
        ctx.options["exporter"] = exporter
    return measure_export("usage_based", ctx, directory / f"{name}.onnx", name)

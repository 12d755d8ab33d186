"""The child program of ``cost.run_child``: measure one export in this fresh process and print the answer as JSON.

It reads the request from standard input: ``{"source", "options", "strategy"}`` for one strategy's
export, tag writing and comparison (``compare.compare_one``), or ``{"source", "options", "exporter"}``
for a plain ``torch.onnx.export`` of the same wrapped model (``cost.plain_export``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from modelexport_core.measure.cost import peak_mb, plain_export


def measure(request: dict[str, Any]) -> dict[str, Any]:
    from dataclasses import replace

    from modelexport_core.export.pipeline import ExportOptions, example_inputs, prepare_export
    from modelexport_core.measure.compare import compare_one
    from modelexport_core.plugin.discovery import get_strategy
    from modelexport_core.prepare.models import load_model
    from modelexport_core.prepare.wrapper import export_settings

    settings = dict(request["options"])
    settings["input_specs"] = Path(settings["input_specs"]) if settings.get("input_specs") else None
    options = ExportOptions(**settings)
    loaded = load_model(request["source"])
    with tempfile.TemporaryDirectory(prefix="modelexport-cost-") as tmp, export_settings(loaded.model):
        if request.get("strategy"):
            started = time.perf_counter()
            ctx, tags = prepare_export(loaded, options, keep_outputs=True)
            info = get_strategy(request["strategy"])
            comparison, finished, peak = compare_one(info, ctx, tags, options, Path(tmp), started)
            comparison = replace(comparison, peak_mb=round(peak, 1))
            return {"comparison": asdict(comparison), "seconds": finished - started, "peak_mb": peak}
        from modelexport_core.plugin.strategy import ExportContext
        from modelexport_core.prepare.context import default_dynamic_axes, takes_keywords
        from modelexport_core.prepare.wrapper import wrap_model

        inputs = example_inputs(loaded, options.input_specs)
        by_keyword = loaded.by_keyword if loaded.by_keyword is not None else takes_keywords(loaded.model, list(inputs))
        ctx = ExportContext(
            model=loaded.model, module=wrap_model(loaded.model.eval(), list(inputs), by_keyword).eval(),
            args=tuple(inputs.values()), input_names=list(inputs), output_names=[],
            dynamic_axes=default_dynamic_axes(inputs) if options.dynamic else {}, opset=options.opset,
        )
        started = time.perf_counter()
        plain_export(ctx, Path(tmp) / "plain.onnx", request["exporter"])
        return {"seconds": time.perf_counter() - started, "peak_mb": peak_mb()}


def main() -> int:
    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    request = json.loads(sys.stdin.read())
    answer = measure(request)
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())

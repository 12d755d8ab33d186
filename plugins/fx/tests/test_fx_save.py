"""fx writes its weights inline one tensor at a time; the file is the model ``ONNXProgram.save`` writes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from modelexport_core import make_context
from modelexport_core.prepare.inputs import inputs_from_config
from modelexport_core.prepare.presets import build_preset
from modelexport_fx.capture import export_program, math_sdpa
from modelexport_fx.to_onnx import program_to_onnx, save


def test_streamed_save_writes_the_same_model_as_onnx_program_save(tmp_path):
    model = build_preset("llama")
    ctx = make_context(model, inputs_from_config(model), dynamic=False)
    with math_sdpa(True):
        onnx_program, _ = program_to_onnx(export_program(ctx), ctx, 18, True)
    save(onnx_program, tmp_path / "streamed.onnx")
    onnx_program.save(str(tmp_path / "reference.onnx"))
    streamed, reference = onnx.load(str(tmp_path / "streamed.onnx")), onnx.load(str(tmp_path / "reference.onnx"))
    weights = {t.name: numpy_helper.to_array(t) for t in streamed.graph.initializer}
    expected = {t.name: numpy_helper.to_array(t) for t in reference.graph.initializer}
    assert weights.keys() == expected.keys() and len(expected) > 10
    assert all(weights[k].dtype == expected[k].dtype and np.array_equal(weights[k], expected[k]) for k in expected)
    infos = [sorted(v.SerializeToString() for v in m.graph.value_info) for m in (streamed, reference)]
    assert infos[0] == infos[1]  # same type and shape records, initializers' included (in another order)
    for m in (streamed, reference):
        m.graph.ClearField("initializer")
        m.graph.ClearField("value_info")
    assert streamed == reference
    onnx.checker.check_model(str(tmp_path / "streamed.onnx"), full_check=True)

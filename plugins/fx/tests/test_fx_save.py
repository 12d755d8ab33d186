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


def test_the_core_writes_the_file_once_tagged_with_the_bytes_of_tagging_a_written_file(tmp_path):
    from pathlib import Path

    from modelexport_core.export import ExportOptions, export_model
    from modelexport_core.format.graph import strip_wrapper_names
    from modelexport_core.format.onnx_file import load_graph, save_graph
    from modelexport_core.prepare.models import LoadedModel
    from modelexport_fx.strategy import FxStrategy

    model = build_preset("bert")
    inputs = inputs_from_config(model)
    direct = FxStrategy().export(make_context(model, inputs, dynamic=False), tmp_path / "direct.onnx")
    assert direct.unwritten is None and (tmp_path / "direct.onnx").is_file()  # a direct call gets its file
    report = export_model(LoadedModel(model, "preset:bert", "preset", inputs=inputs), tmp_path / "core.onnx",
                          ExportOptions(strategies=["fx"], dynamic=False, verify=False))
    # the same tags written into the file the strategy wrote, the way a file exported elsewhere is tagged
    graph = load_graph(tmp_path / "direct.onnx")
    strip_wrapper_names(graph.graph)
    tagged = load_graph(Path(report.onnx_path))
    assert [n.name for n in graph.graph.node] == [n.name for n in tagged.graph.node]
    for node, tagged_node in zip(graph.graph.node, tagged.graph.node):
        node.ClearField("metadata_props")
        node.metadata_props.extend(tagged_node.metadata_props)
    save_graph(graph, tmp_path / "direct.onnx", tmp_path / "rewritten.onnx")
    assert (tmp_path / "rewritten.onnx").read_bytes() == Path(report.onnx_path).read_bytes()

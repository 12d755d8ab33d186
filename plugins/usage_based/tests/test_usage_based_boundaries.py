"""Call boundaries on usage_based's own export: small models whose parameter-free modules and caller-side ops
parameters and data flow alone leave open (a pooling mixer, a residual wrapper around a sequence, a caller
working on what its child returned). Every recorded node must get the module PyTorch recorded.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from usage_based_support import assert_every_recorded_node, measure_case


class Pooling(nn.Module):
    """A parameter-free token mixer: pooling less its input."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)

    def forward(self, x):
        return self.pool(x) - x


class PoolingBlock(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.norm1 = nn.GroupNorm(1, channels)
        self.mixer = Pooling()
        self.norm2 = nn.GroupNorm(1, channels)
        self.fc1 = nn.Conv2d(channels, 2 * channels, 1)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(2 * channels, channels, 1)
        for norm in (self.norm1, self.norm2):  # trained norms: neither weight one nor bias zero
            nn.init.uniform_(norm.weight, 0.5, 1.5)
            nn.init.uniform_(norm.bias, -0.5, 0.5)

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class PoolingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.blocks = nn.Sequential(PoolingBlock(), PoolingBlock())
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Residual(nn.Module):
    """Adds what the wrapped sequence computes to its input: no parameter of its own."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x) + x


class ResidualMixer(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 4, 4), nn.GELU(), nn.BatchNorm2d(channels))
        self.blocks = nn.Sequential(*[
            nn.Sequential(
                Residual(nn.Sequential(nn.Conv2d(channels, channels, 3, groups=channels, padding=1), nn.GELU(),
                                       nn.BatchNorm2d(channels))),
                nn.Conv2d(channels, channels, 1), nn.GELU(), nn.BatchNorm2d(channels),
            )
            for _ in range(2)
        ])
        self.head = nn.Linear(channels, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Inner(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x)


class TransposingCaller(nn.Module):
    """Works on its child's result in its own forward: transposes, scales, squashes, transposes back."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.inner = Inner(width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        y = self.inner(x).transpose(1, 2)
        return self.out(torch.tanh(y * 2).transpose(1, 2))


class TwoCallers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = TransposingCaller()
        self.b = TransposingCaller()

    def forward(self, x):
        return self.b(self.a(x))


class Feedforward(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(width, 2 * width)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ScaledBlock(nn.Module):
    """Scales its child's result by a layer scale of one (a number, not a parameter) before a parameter-free call
    takes it: the scaled tensor equals the child's result, and the block made it."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = Feedforward(width)
        self.drop_path = nn.Identity()
        self.gamma = 1.0

    def forward(self, x):
        return x + self.drop_path(self.gamma * self.mlp(self.norm(x)))


class ScaledNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(ScaledBlock(), ScaledBlock())

    def forward(self, x):
        return self.blocks(x)


class WindowAttention(nn.Module):
    """Attention within a window, adding the mask its caller hands it."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) + mask, dim=-1)
        return self.proj(weights @ v)


class MaskingBlock(nn.Module):
    """Builds its child's mask from fixed sizes (the exporter computes it and writes it as an initializer), then
    turns the child's result into its own layout before the residual add: the caller's nodes, after the child
    ended."""

    def __init__(self, width: int = 8, window: int = 5):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attention = WindowAttention(width)
        self.window = window

    def forward(self, x):
        batch, length, width = x.shape
        mask = torch.triu(torch.full((self.window, self.window), -100.0), 1)
        mask = mask + torch.arange(self.window, dtype=torch.float32)[None, :]
        windows = self.norm(x).reshape(-1, self.window, width)
        out = self.attention(windows, mask).reshape(batch, -1, self.window, width)
        return x + out.transpose(1, 2).reshape(batch, length, width)


class MaskingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(MaskingBlock(), MaskingBlock())

    def forward(self, x):
        return self.blocks(x)


class LayoutBlock(nn.Module):
    """Turns its input into a channels-first layout before its first child takes it, and back at the end."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.mixer = nn.Conv2d(width, width, (1, 3), padding=(0, 1), groups=width)
        self.ffn = nn.Sequential(nn.Conv2d(width, 2 * width, 1), nn.GELU(), nn.Conv2d(2 * width, width, 1))

    def forward(self, x):
        h = x.transpose(1, 2).unsqueeze(2)
        h = self.mixer(h)
        h = h + self.ffn(h)
        return h.squeeze(2).transpose(1, 2)


class LayoutNet(nn.Module):
    """The first block's layout change at its end and the second's at its beginning cancel: the exporter writes
    neither, so no node holds what the first block returned and the values bound neither block's call."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.embed = nn.Linear(4, width)
        self.blocks = nn.Sequential(LayoutBlock(width), LayoutBlock(width))

    def forward(self, x):
        return self.blocks(self.embed(x))


class Partition(nn.Module):
    """Cuts its input into windows of ``size`` positions; reads its input's sizes itself."""

    def forward(self, x, size: int):
        batch, length, width = x.shape
        return x.reshape(batch, length // size, size, width).reshape(batch * (length // size), size, width)


class Departition(nn.Module):
    def forward(self, x, length: int):
        windows, size, width = x.shape
        return x.reshape(windows * size // length, length, width)


class WindowedBlock(nn.Module):
    """Hands its window size to the calls cutting and joining windows as a number fixed in the code."""

    def __init__(self, width: int = 8, window: int = 2):
        super().__init__()
        self.window = window
        self.partition = Partition()
        self.proj = nn.Linear(width, width)
        self.departition = Departition()

    def forward(self, x):
        windows = self.partition(x, self.window)
        return x + self.departition(self.proj(windows).softmax(1), 6)


class WindowedNet(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.embed = nn.Linear(4, width)
        self.blocks = nn.Sequential(WindowedBlock(width), WindowedBlock(width))

    def forward(self, x):
        return self.blocks(self.embed(x))


CASES = {
    "pooling_mixer": (PoolingNet, lambda: {"x": torch.randn(2, 3, 16, 16)}),
    "residual_wrapper": (ResidualMixer, lambda: {"x": torch.randn(2, 3, 16, 16)}),
    "caller_works_on_childs_result": (TwoCallers, lambda: {"x": torch.randn(2, 5, 8)}),
    "caller_scales_childs_result_by_one": (ScaledNet, lambda: {"x": torch.randn(2, 5, 8)}),
    "child_takes_a_mask_of_constants": (MaskingNet, lambda: {"x": torch.randn(2, 10, 8)}),
}


@pytest.mark.parametrize("name", CASES)
def test_every_recorded_node_gets_the_recorded_module(name, tmp_path):
    assert_every_recorded_node(measure_case(CASES, name, tmp_path))


def test_a_mask_the_exporter_wrote_as_an_initializer_bounds_nothing(tmp_path):
    """The dynamo exporter computes a mask made of fixed sizes and writes it as an initializer, in another shape:
    no node holds what the child took, and the child's call is still bounded by what it took from its caller and
    what it returned, so the caller's re-layout of the child's result stays in the caller."""
    measured = measure_case(CASES, "child_takes_a_mask_of_constants", tmp_path, exporter="dynamo")
    assert measured.result.exporter == "dynamo"
    assert_every_recorded_node(measured)


def test_where_onnxruntime_cannot_run_the_file_the_propagated_tags_stand(tmp_path, monkeypatch):
    """Where onnxruntime cannot compute the file's values, no boundary moves a node and the export still tags every
    node."""
    import modelexport_core.format.intermediate as intermediate
    import modelexport_core.sdk as sdk

    def refuse(*args, **kwargs):
        raise RuntimeError("onnxruntime cannot run this file")

    monkeypatch.setattr(intermediate, "intermediate_values", refuse)  # where the core reads it
    monkeypatch.setattr(sdk, "intermediate_values", refuse)  # where strategies read it
    measured = measure_case(CASES, "pooling_mixer", tmp_path)
    assert measured.result.details["boundary_moved"] == 0
    assert measured.coverage == 1.0


def test_a_tensor_a_child_takes_right_after_its_caller_began_was_made_by_the_caller(tmp_path):
    """The first block lays its input out for its first child before calling it; the block's own call is not
    bounded (what it returned is held by no node), but no call ended between the block's beginning and the
    child's, so the nodes making the child's new input ran in the block."""
    cases = {"layout": (LayoutNet, lambda: {"x": torch.randn(2, 6, 4)})}
    measured = measure_case(cases, "layout", tmp_path)
    own = [node for node, module in measured.reference.items() if module == "blocks.0"]
    assert own and {measured.result.node_modules[node] for node in own} == {"blocks.0"}, measured.report()
    assert not measured.contaminated


def test_a_number_fixed_in_the_code_equal_to_a_size_a_call_reads_leaves_the_read_in_the_call(tmp_path):
    """Each block hands its window size (2) to the call cutting windows, which reads its input's sizes: the batch
    read there is 2 too (the call joining windows is handed a length fixed in the code). Under the TorchScript exporter's trace a size is a tensor and a plain number a constant
    of the trace, so no node of the file computed the number handed over: the read is the call's own."""
    cases = {"windows": (WindowedNet, lambda: {"x": torch.randn(2, 6, 4)})}
    measured = measure_case(cases, "windows", tmp_path, exporter="torchscript")
    assert measured.result.exporter == "torchscript"
    ops = dict(zip(measured.node_keys, (node.op_type for node in measured.onnx_model.graph.node)))
    reads = [node for node, module in measured.reference.items()
             if module and module.endswith(".partition") and ops[node] in ("Shape", "Gather")]
    assert reads, measured.report()
    assert_every_recorded_node(measured)


class ScaledMixer(nn.Module):
    """Adds its depthwise convolution's output scaled by a layer scale at its initial value (1e-7): it returns what
    it took changed by less than two runtimes' rounding."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, (1, 3), padding=(0, 1), groups=channels)
        self.layer_scale = nn.Parameter(1e-7 * torch.ones(channels, 1, 1))

    def forward(self, x):
        return x + self.layer_scale * self.conv(x)


class ScaledLayer(nn.Module):
    """A sequence layer computing on an image layout: transposed and unsqueezed in, squeezed and transposed back out
    (the exporter cancels the transposes of two layers in a row), with a scaled mixer and a scaled feed-forward."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.mixer = ScaledMixer(channels)
        self.feed_forward = nn.Conv2d(channels, channels, 1)
        self.layer_scale = nn.Parameter(1e-7 * torch.ones(channels, 1, 1))

    def forward(self, x):
        x = self.mixer(x.transpose(1, 2).unsqueeze(2))
        x = x + self.layer_scale * self.feed_forward(x)
        return x.squeeze(2).transpose(1, 2)


class ScaledLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.layers = nn.ModuleList([ScaledLayer(), ScaledLayer()])
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


def test_a_layer_at_initial_scales_leaves_no_node_in_the_next_layer(tmp_path):
    """Each layer returns what it took changed by less than rounding, and no node holds what the first returns (the
    transposes out of it and into the next cancel): the node holding the embedding's result is equal to it, but it
    was written before the first layer began, so it bounds no call of the second. No node of one layer is tagged
    with the other."""
    cases = {"scaled": (ScaledLayers, lambda: {"x": torch.randn(2, 6, 4)})}
    measured = measure_case(cases, "scaled", tmp_path, exporter="torchscript")
    tags = measured.result.node_modules
    crossed = [(node, tags.get(node), module) for node, module in measured.reference.items()
               if (module or "").startswith("layers.") and (tags.get(node) or "").startswith("layers.")
               and tags[node].split(".")[1] != module.split(".")[1]]
    assert not crossed, measured.report()


class MaskedAttention(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(torch.softmax(q @ k.transpose(-1, -2) / 3 + mask[:, 0], dim=-1) @ v)


class PositionedLayer(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attention = MaskedAttention(width)
        self.ffn = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x, mask, positions):
        x = x + self.attention(self.norm(x) + positions, mask)
        return x + self.ffn(x)


class LayerStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([PositionedLayer(), PositionedLayer()])

    def forward(self, x, mask, positions):
        for layer in self.layers:
            x = layer(x, mask, positions)
        return x


class BlockMaskedPatches(nn.Module):
    """Lays every image's patches out in one sequence and builds a block mask over it, filled with the lowest float
    then zeroed block by block (one block per sequence here, so it masks nothing: zeros), unsqueezed and expanded."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, 4, stride=4)
        self.norm = nn.LayerNorm(8)
        self.positions = nn.Embedding(64, 8)
        self.stack = LayerStack()

    def forward(self, pixels):
        x = self.norm(self.patch(pixels).flatten(2).transpose(1, 2).reshape(1, -1, 8))
        length = x.shape[1]
        positions = self.positions(torch.arange(length))
        mask = torch.full((length, length), torch.finfo(x.dtype).min, dtype=x.dtype)
        for start, end in zip(torch.tensor([0]).cumsum(-1), torch.tensor([length]).cumsum(-1)):
            mask[start:end, start:end] = 0
        mask = mask[None, None].expand(x.shape[0], 1, -1, -1)
        return self.stack(x, mask, positions)


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_a_mask_of_zeros_several_nodes_pass_on_was_made_before_the_call_taking_it(exporter, tmp_path):
    """The mask the model builds is all zeros, held by the unsqueeze and by the expand passing it on, both written
    after the last call before the stack began: the first made it, before the stack's call, so the nodes building
    it are the model's own (TorchScript). Where the exporter replays those views inside the attention reading the
    mask, after a result of a call the layer made, they are the attention's own (dynamo): every recorded node gets
    the recorded module."""
    cases = {"block_mask": (BlockMaskedPatches, lambda: {"pixels": torch.randn(1, 3, 16, 16)})}
    measured = measure_case(cases, "block_mask", tmp_path, exporter=exporter)
    assert measured.result.exporter == exporter
    assert_every_recorded_node(measured)


class Resampler(nn.Module):
    """Resizes a table of positions to the grid of patches an image of the size it is handed makes."""

    def forward(self, table, size):
        height, width = size
        grid = table.transpose(1, 2).reshape(1, 8, 4, 4)
        grid = nn.functional.interpolate(grid, size=(height // 4, width // 4), mode="bilinear", align_corners=False)
        return grid.flatten(2).transpose(1, 2)


class ResampledEmbedding(nn.Module):
    """Reads the image's size, cuts patches (a call of its own), then resamples its positions to that size."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, 4, stride=4)
        self.table = nn.Parameter(torch.randn(1, 16, 8))
        self.resample = Resampler()

    def forward(self, pixels):
        height, width = pixels.shape[-2], pixels.shape[-1]
        patches = self.patch(pixels).flatten(2).transpose(1, 2)
        return patches + self.resample(self.table, (height, width))


class ResampledNet(nn.Module):
    """The model reads the image's size again, for positions of its own resampled by a second call."""

    def __init__(self):
        super().__init__()
        self.embed = ResampledEmbedding()
        self.table = nn.Parameter(torch.randn(1, 16, 8))
        self.resample = Resampler()
        self.head = nn.Linear(8, 4)

    def forward(self, pixels):
        x = self.embed(pixels)
        height, width = pixels.shape[-2], pixels.shape[-1]
        return self.head(x + self.resample(self.table, (height, width)))


def test_a_size_read_before_a_call_of_a_sibling_is_not_the_later_calls(tmp_path):
    """The embedding and the model each read the image's size, and each hands it, as plain numbers, to a resampling
    call. The exporter writes each read where it ran, keeping the two apart (usage_based's own TorchScript export
    merges no equal values): the embedding's read is written before its patch call's result, so it ran before its
    resampling call began, which only that call's code reads it in: the embedding's own, every node as recorded.
    (The dynamo exporter folds both resamplings into weights at these static sizes: no call of theirs runs a node.)"""
    cases = {"resampled": (ResampledNet, lambda: {"pixels": torch.randn(2, 3, 16, 24)})}
    measured = measure_case(cases, "resampled", tmp_path, exporter="torchscript")
    assert measured.result.exporter == "torchscript"
    reads = {key for key, node in zip(measured.node_keys, measured.onnx_model.graph.node)
             if node.op_type == "Shape" and list(node.input) == ["pixels"]}
    assert {measured.reference[node] for node in reads} == {"", "embed"}, measured.report()
    assert_every_recorded_node(measured)

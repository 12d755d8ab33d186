"""Extra models for the htp tests: patterns the core's HARD_CASES do not cover.

Each factory returns ``(model, inputs)``, like ``modelexport_core.testing.HARD_CASES``.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x))) + x


class ConvNet(nn.Module):
    """Conv + batch-norm blocks (which the exporter fuses) in a Sequential, pooling, a head."""

    def __init__(self, channels: int = 8, depth: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.stages = nn.Sequential(*[ConvBlock(channels) for _ in range(depth)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels, 5)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


class CrossBlock(nn.Module):
    """Reads the shape of a tensor every block shares, so the exporter may merge those computations."""

    def __init__(self, width: int, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, memory):
        batch, length, width = memory.shape
        k, v = self.kv(memory).chunk(2, dim=-1)
        q = self.q(x).view(x.shape[0], -1, self.heads, width // self.heads).transpose(1, 2)
        k = k.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        v = v.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / (width // self.heads) ** 0.5
        mixed = scores.softmax(-1) @ v
        return x + self.out(mixed.transpose(1, 2).reshape(x.shape[0], -1, width))


class CrossStack(nn.Module):
    """Identical cross blocks reading one shared memory; a root parameter and root ops between blocks."""

    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.memory_proj = nn.Linear(width, width)
        self.blocks = nn.ModuleList([CrossBlock(width) for _ in range(depth)])
        self.gain = nn.Parameter(torch.linspace(0.9, 1.1, width))

    def forward(self, x, memory):
        memory = torch.tanh(self.memory_proj(memory))
        for block in self.blocks:
            x = block(x, memory) * self.gain
        return x.mean(dim=1)


class InPlace(nn.Module):
    """In-place updates, a buffer, masked_fill and an inplace ReLU inside identical layers."""

    def __init__(self, width: int = 16, depth: int = 2):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.acts = nn.ModuleList([nn.ReLU(inplace=True) for _ in range(depth)])
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, width))

    def forward(self, x):
        for layer, act in zip(self.layers, self.acts):
            y = layer(x)
            y.add_(self.offset)
            y = act(y)
            x = x + y.masked_fill(y > 1.5, 1.5)
        return x


class Recurrent(nn.Module):
    """A GRU, split/chunk outputs and a gather at the root."""

    def __init__(self, width: int = 12):
        super().__init__()
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.left = nn.Linear(width // 2, 3)
        self.right = nn.Linear(width // 2, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        a, b = out.split(out.shape[-1] // 2, dim=-1)
        scores = self.left(a) + self.right(b)
        index = scores.argmax(dim=-1, keepdim=True)
        return torch.gather(scores, -1, index).squeeze(-1).cumsum(dim=-1)


class TorchLayers(nn.Module):
    """torch.nn.TransformerEncoder layers: two identical torch-only blocks, a root projection."""

    def __init__(self, width: int = 16):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, 2, dim_feedforward=24, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.proj = nn.Linear(width, 4)

    def forward(self, x):
        return self.proj(self.body(x))


class IdenticalSiblings(nn.Module):
    """Three blocks with the very same weights in a ModuleList: values alone cannot tell them apart."""

    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList([CrossBlock(width) for _ in range(depth)])
        for block in self.blocks[1:]:
            block.load_state_dict(self.blocks[0].state_dict())

    def forward(self, x):
        for block in self.blocks:
            x = block(x, x)
        return x


class PatchEmbed(nn.Module):
    """Returns its output with the height and width it read from the output's shape."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.proj = nn.Conv2d(3, channels, 2, stride=2)

    def forward(self, pixels):
        features = self.proj(pixels)
        _, _, height, width = features.shape
        return features.flatten(2).transpose(1, 2), height, width


class GridMixer(nn.Module):
    """Uses the height and width it is given to fold tokens back into a grid."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, tokens, height, width):
        grid = tokens.transpose(1, 2).reshape(tokens.shape[0], -1, height, width)
        return tokens + self.conv(grid).flatten(2).transpose(1, 2)


class ParentCode(nn.Module):
    """Shape reads and a mask built in the root's own forward, used only by the children."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.embed = PatchEmbed(channels)
        self.mixers = nn.ModuleList([GridMixer(channels) for _ in range(2)])
        self.head = nn.Linear(channels, 3)

    def forward(self, pixels):
        tokens, height, width = self.embed(pixels)
        keep = (torch.arange(tokens.shape[1]) % 2 == 0).to(tokens.dtype)[None, :, None]
        for mixer in self.mixers:
            tokens = mixer(tokens * keep, height, width)
        return self.head(tokens.mean(dim=1))


class FadingConvs(nn.Module):
    """Conv + batch-norm blocks with tiny norm weights: activations fade to exact zeros after a few blocks."""

    def __init__(self, channels: int = 8, depth: int = 8):
        super().__init__()
        self.stages = nn.Sequential(*[ConvBlock(channels) for _ in range(depth)])
        for block in self.stages:
            nn.init.constant_(block.bn.weight, 1e-4)
            block.forward = lambda x, block=block: block.act(block.bn(block.conv(x)))
        self.head = nn.Linear(channels, 4)

    def forward(self, x):
        return self.head(self.stages(x).mean(dim=(2, 3)))


class ChannelScale(nn.Module):
    """A per-channel scale held as ``(C,)`` and applied as ``(C, 1, 1)``: the exporter stores it reshaped."""

    def __init__(self, channels: int, value: float = 1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.full((channels,), value))

    def forward(self, x):
        return x * self.scale.view(-1, 1, 1)


class PoolMixer(nn.Module):
    """A parameter-free mixer: on a 1x1 map its result is exactly zero."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)

    def forward(self, x):
        return self.pool(x) - x


class PointMlp(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, 2 * channels, 1)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(2 * channels, channels, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class NearIdentityBlock(nn.Module):
    """Two residual branches scaled by 1e-5 at initialisation, each after a norm holding ones and zeros:
    the block's output equals its input within float rounding, and both norms compute the same values."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(1, channels)
        self.mixer = PoolMixer()
        self.scale1 = ChannelScale(channels)
        self.norm2 = nn.GroupNorm(1, channels)
        self.mlp = PointMlp(channels)
        self.scale2 = ChannelScale(channels)

    def forward(self, x):
        x = x + self.scale1(self.mixer(self.norm1(x)))
        return x + self.scale2(self.mlp(self.norm2(x)))


class NearIdentityStages(nn.Module):
    """Near-identity blocks on a 4x4 map, then (after a strided convolution) on a 1x1 map."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.first = nn.Sequential(NearIdentityBlock(channels), NearIdentityBlock(channels))
        self.down = nn.Conv2d(channels, 2 * channels, 4, stride=4)
        self.second = nn.Sequential(NearIdentityBlock(2 * channels), NearIdentityBlock(2 * channels))
        self.head = nn.Linear(2 * channels, 3)

    def forward(self, x):
        x = self.second(self.down(self.first(x)))
        return self.head(x.flatten(1))


class LinearNorm(nn.Module):
    """A linear layer and a batch norm over the tokens of every sequence, shaped back like its input."""

    def __init__(self, width_in: int, width_out: int, norm_weight: float = 1.0):
        super().__init__()
        self.linear = nn.Linear(width_in, width_out, bias=False)
        self.bn = nn.BatchNorm1d(width_out)
        nn.init.constant_(self.bn.weight, norm_weight)

    def forward(self, x):
        y = self.linear(x)
        return self.bn(y.flatten(0, 1)).reshape_as(y)


class ZeroBranchBlock(nn.Module):
    """A residual block whose branch ends in a norm with zero weights (as many models initialise them):
    its output is exactly its input. It reads its input's shape."""

    def __init__(self, width: int):
        super().__init__()
        self.mix = LinearNorm(width, 2 * width)
        self.act = nn.Hardswish()
        self.proj = LinearNorm(2 * width, width, norm_weight=0.0)

    def forward(self, x):
        batch, tokens, width = x.shape
        mixed = self.act(self.mix(x)).reshape(batch, tokens, 2 * width)
        return x + self.proj(mixed)


class ZeroBranchStack(nn.Module):
    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.embed = LinearNorm(width, width)
        self.blocks = nn.Sequential(*[ZeroBranchBlock(width) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(self.embed(x))


class FaintConvs(nn.Module):
    """Convolutions with tiny weights before GELU: on such small values GELU's partial product
    ``x * (1 + erf(x / sqrt 2))`` equals ``x`` within float rounding."""

    def __init__(self, channels: int = 8, depth: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*[PointMlp(channels) for _ in range(depth)])
        for block in self.blocks:
            for conv in (block.fc1, block.fc2):
                with torch.no_grad():
                    conv.weight.mul_(1e-3)
                    conv.bias.mul_(1e-3)

    def forward(self, x):
        return self.blocks(x)


class FaintConvNorms(nn.Module):
    """Convolutions with tiny weights, each followed by a batch norm at its initial statistics (which the
    exporter folds into the convolution, and which changes values by a millionth) and GELU."""

    def __init__(self, channels: int = 8, depth: int = 2):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(channels, channels, 1, bias=False) for _ in range(depth)])
        self.norms = nn.ModuleList([nn.BatchNorm2d(channels) for _ in range(depth)])
        self.acts = nn.ModuleList([nn.GELU() for _ in range(depth)])
        with torch.no_grad():
            for conv in self.convs:
                conv.weight.mul_(1e-3)

    def forward(self, x):
        for conv, norm, act in zip(self.convs, self.norms, self.acts):
            x = act(norm(conv(x)))
        return x


class ConvNorm(nn.Module):
    """A convolution and the batch norm the exporter folds into it."""

    def __init__(self, channels_in: int, channels_out: int):
        super().__init__()
        self.conv = nn.Conv2d(channels_in, channels_out, 1, bias=False)
        self.norm = nn.BatchNorm2d(channels_out)

    def forward(self, x):
        return self.norm(self.conv(x))


class Gelu(nn.Module):
    """GELU in a module of its own (not a torch layer), as model libraries write activations."""

    def forward(self, x):
        return nn.functional.gelu(x)


class GeluBlock(nn.Module):
    """A convolution widening the channels, an activation module, a convolution narrowing them, a residual."""

    def __init__(self, channels: int):
        super().__init__()
        self.expand = ConvNorm(channels, 2 * channels)
        self.act = Gelu()
        self.project = ConvNorm(2 * channels, channels)

    def forward(self, x):
        return self.project(self.act(self.expand(x))) + x


class FadedGeluBlocks(nn.Module):
    """Blocks whose values have faded to 1e-8 (random weights, layer after layer): there
    ``1 + erf(x / sqrt 2)`` is exactly 1 in float32, so GELU's partial product ``x * (1 + erf(x / sqrt 2))``
    returns the convolution's value bit for bit, yet it is the activation's."""

    def __init__(self, channels: int = 8, depth: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*[GeluBlock(channels) for _ in range(depth)])
        with torch.no_grad():
            for block in self.blocks:
                block.expand.conv.weight.mul_(1e-8)

    def forward(self, x):
        return self.blocks(x)


class FadedGate(nn.Module):
    """Squeeze and excitation: a mean over the positions, two convolutions, a sigmoid gate scaling what it took."""

    def __init__(self, channels: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, channels // 2, 1)
        self.act = nn.SiLU()
        self.expand = nn.Conv2d(channels // 2, channels, 1)
        self.gate = nn.Sigmoid()

    def forward(self, x):
        return x * self.gate(self.expand(self.act(self.reduce(x.mean((2, 3), keepdim=True)))))


class FadedGatedBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 1)
        self.act = nn.SiLU()
        self.se = FadedGate(channels)

    def forward(self, x):
        return x + self.se(self.act(self.conv(x)))


class FadedGatedBlocks(nn.Module):
    """Gated blocks on one position whose values have faded to 1e-6: every sigmoid is 0.5 within rounding, the
    sigmoid an activation's SiLU is written with (no call of its own) as much as each later gate's. Its value
    equals every gate's, so only data flow can place it: in its activation, not in a later block's gate."""

    def __init__(self, channels: int = 16, depth: int = 3):
        super().__init__()
        self.blocks = nn.Sequential(*[FadedGatedBlock(channels) for _ in range(depth)])
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Conv2d):
                    module.bias.zero_()

    def forward(self, x):
        return self.blocks(x * 1e-6)


class SummedBranches(nn.Module):
    """Branches summed from Python zeros, as reparameterisable blocks write it (``out = 0; out += b(x)``, then
    ``out += 0`` for a branch left out): the exporter adds the zeros as nodes of the block, after the
    convolution it folded the norm into (at initial statistics, without changing a value)."""

    def __init__(self, channels: int, branches: int = 1):
        super().__init__()
        self.branches = nn.ModuleList(ConvNorm(channels, channels) for _ in range(branches))

    def forward(self, x):
        skipped = 0  # a branch this configuration leaves out
        out = 0
        for branch in self.branches:
            out += branch(x)
        out += skipped
        return torch.relu(out)


class SummedBranchStages(nn.Module):
    def __init__(self, channels: int = 8, depth: int = 3):
        super().__init__()
        self.blocks = nn.Sequential(*[SummedBranches(channels, 1 + i % 2) for i in range(depth)])

    def forward(self, x):
        return self.blocks(x)


class ShapedEmbed(nn.Module):
    """Patches by a convolution and a norm the exporter folds into it; returns the grid's extents, read from the
    norm's output, beside the tokens."""

    def __init__(self, channels: int):
        super().__init__()
        self.proj = nn.Sequential(nn.Conv2d(3, channels, 2, stride=2, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        x = self.proj(x)
        height, width = x.shape[2], x.shape[3]
        return x.flatten(2).transpose(1, 2), (height, width)


class GridCode(nn.Module):
    """A position code built from the extents another module read."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))

    def forward(self, batch: int, height: int, width: int):
        rows = torch.arange(height, dtype=torch.float32).view(1, height, 1, 1)
        cols = torch.arange(width, dtype=torch.float32).view(1, 1, width, 1)
        grid = (rows * width + cols).expand(batch, height, width, 1) * self.scale
        return grid.flatten(1, 2)


class ShapedEmbedNet(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.embed = ShapedEmbed(channels)
        self.code = GridCode(channels)
        self.head = nn.Linear(channels, 4)

    def forward(self, x):
        tokens, (height, width) = self.embed(x)
        return self.head(tokens + self.code(x.shape[0], height, width))


class SideNorm(nn.Module):
    """An RMS norm holding ones, like every other norm of the model."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class EmptyBranch(nn.Module):
    """A branch the example sends no element through (tokens of a kind the example has none of): its values
    are empty, and its norm's weights equal every other norm's."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.norm = SideNorm(width)
        self.side = SideNorm(width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        x = self.norm(x)
        chosen = x[x.abs().sum(-1) > 1e9]  # no row is that large: empty
        return self.proj(x).index_put((x.abs().sum(-1) > 1e9,), self.side(chosen))


class ZeroConvBlock(nn.Module):
    """A residual conv block whose last batch norm holds zero weights: its branch adds exact zeros."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = ConvBlock(channels)
        self.conv2 = nn.Conv2d(channels, channels, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        nn.init.zeros_(self.bn2.weight)

    def forward(self, x):
        return x + self.bn2(self.conv2(self.conv1(x)))


class SplitStage(nn.Module):
    """Splits its features in two halves (one call, two outputs); only the second half runs through
    blocks whose branches add zeros, so each block's output equals the half it started from."""

    def __init__(self, channels: int = 8, depth: int = 2):
        super().__init__()
        self.expand = nn.Conv2d(channels, 2 * channels, 1)
        self.norm = nn.BatchNorm2d(2 * channels)  # folded into the convolution by the exporter
        self.blocks = nn.Sequential(*[ZeroConvBlock(channels) for _ in range(depth)])
        self.merge = nn.Conv2d(2 * channels, channels, 1)

    def forward(self, x):
        kept, worked = self.norm(self.expand(x)).split(x.shape[1], dim=1)
        return self.merge(torch.cat([kept, self.blocks(worked)], dim=1))


class MaskedSliceLayer(nn.Module):
    """A layer that copies the first features of its projection into zeros of its input's size: the dynamo
    exporter writes the slice assignment as a scatter, with the zeros and indices computed from the sizes."""

    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        y = self.proj(x)
        kept = torch.zeros(x.shape[0], x.shape[1], y.shape[2])
        kept[:, :, :4] = y[:, :, :4]
        return self.out(torch.relu(kept)) + x


class MaskedSliceStack(nn.Module):
    """Layers each scattering into zeros of the same sizes: the exporter merges their equal zeros and index
    computations into the first layer's, where they ran first, and every layer reads them from there."""

    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.layers = nn.ModuleList([MaskedSliceLayer(width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class SharedMaskLayer(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x, mask):
        m = mask[None].expand(x.shape[0], -1, -1)  # every layer takes the same slice of one mask
        scores = (self.proj(x) @ x.transpose(1, 2)).masked_fill(m, 0.0)
        return scores @ x


class SharedMaskStack(nn.Module):
    """Layers each slicing the same mask, made once at the root: the exporter merges their equal slices into
    the first layer's node, and every later layer's expansion of it reads it from there."""

    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.layers = nn.ModuleList([SharedMaskLayer(width) for _ in range(depth)])

    def forward(self, x):
        n = x.shape[1]
        mask = (torch.arange(n)[:, None] == 0) | (torch.arange(n)[None] == 0)
        for layer in self.layers:
            x = layer(x, mask)
        return x


class LoudConvs(nn.Module):
    """Convolutions whose activations grow tenfold per block, each with a batch norm the exporter folds into
    it: the fold rounds differently, and elements that sum large terms to nearly zero keep that error."""

    def __init__(self, channels: int = 16, depth: int = 4):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(channels, channels, 3, padding=1) for _ in range(depth)])
        self.norms = nn.ModuleList([nn.BatchNorm2d(channels) for _ in range(depth)])
        self.acts = nn.ModuleList([nn.ReLU() for _ in range(depth)])
        with torch.no_grad():
            for conv, norm in zip(self.convs, self.norms):
                conv.weight.mul_(30.0)
                norm.running_mean.uniform_(-1.0, 1.0)
                norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        for conv, norm, act in zip(self.convs, self.norms, self.acts):
            x = act(norm(conv(x))) + x
        return x


class AddMatrix(nn.Module):
    """A linear layer written as ``addmm`` on a view, reading the extent it folds (``x.size(-1)``)."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(inputs, outputs) * 0.1)
        self.bias = nn.Parameter(torch.randn(outputs) * 0.1)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


class RootExtents(nn.Module):
    """The root reads ``h.size(-1)`` before its children read the same extent of the same tensor (the
    exporter merges the two reads into the root's), and slices a buffer of positions (which the exporter
    writes as a Constant node) for an embedding; the tensor read is the result of adding zero."""

    def __init__(self, vocab: int = 32, width: int = 16, positions: int = 64):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(positions, width)
        self.register_buffer("position_ids", torch.arange(positions), persistent=False)
        self.up = AddMatrix(width, 2 * width)
        self.down = AddMatrix(2 * width, width)

    def forward(self, ids):
        shape = ids.size()
        kinds = 0  # no embedding of token kinds: adding it changes nothing, and the exporter writes no node
        h = self.tokens(ids) + self.positions(self.position_ids[None, : ids.size(-1)]) + kinds
        out_shape = shape + (h.size(-1),)
        return self.down(torch.relu(self.up(h))).view(*out_shape)


class RowNorm(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(width) + 0.5)

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class UnorderedExperts(nn.Module):
    """Experts chosen by ``topk(sorted=False)``: the order of the chosen experts is unspecified, and the
    runtime may order them otherwise, with every row computed from them (a norm of each expert's output)."""

    def __init__(self, width: int = 16, experts: int = 8, chosen: int = 3):
        super().__init__()
        self.chosen = chosen
        self.gate = nn.Linear(width, experts, bias=False)
        self.weights = nn.Parameter(torch.randn(experts, width, width) * 0.2)
        self.norm = RowNorm(width)

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        scores, index = torch.topk(torch.sigmoid(self.gate(tokens)), self.chosen, dim=-1, sorted=False)
        picked = self.weights[index.reshape(-1)]  # (tokens * chosen, width, width)
        rows = torch.bmm(picked, tokens.repeat_interleave(self.chosen, dim=0).unsqueeze(-1)).squeeze(-1)
        rows = self.norm(rows) * scores.reshape(-1, 1)
        return rows.reshape(tokens.shape[0], self.chosen, -1).sum(1).reshape(x.shape)


class Softcap(nn.Module):
    """Bounds a value smoothly (near the identity for small values)."""

    def forward(self, x):
        return torch.tanh(x / 30.0) * 30.0


class GateOfHalves(nn.Module):
    """Takes two values and first makes them float (they are already: no-ops whose outputs equal its inputs)."""

    def __init__(self):
        super().__init__()
        self.cap = Softcap()

    def forward(self, gate, up):
        gate, up = gate.float(), up.float()
        return torch.sigmoid(gate) * self.cap(up)


class ChunkedGate(nn.Module):
    """A projection chunked in two along a dynamic axis (the exporter writes one slice per half) and both
    halves handed to a child, which starts by making each float."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.act = GateOfHalves()
        self.out = nn.Linear(width, width)

    def forward(self, x):
        first, second = self.proj(x).chunk(2, dim=1)
        return self.out(self.act(first, second))


class RolledWindows(nn.Module):
    """A roll over two axes (the exporter writes a slice-and-concatenate per axis: the first half-rolled
    value holds the rolled one's elements in another order), then a crop that keeps everything."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        height, width = x.shape[1], x.shape[2]
        rolled = torch.roll(self.proj(x), shifts=(1, 1), dims=(1, 2))
        return self.norm(rolled[:, :height, :width, :].contiguous())


class FaintContext(nn.Module):
    """A global context (a mean over the map) of faint features through GELU: on such small values GELU's
    partial product ``x * (1 + erf(x / sqrt 2))`` equals the mean it reads within float rounding."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 1)
        self.act = nn.GELU()
        self.gate = nn.Conv2d(channels, channels, 1)
        with torch.no_grad():
            self.conv.weight.mul_(1e-3)
            self.conv.bias.mul_(1e-3)

    def forward(self, x):
        context = self.act(self.conv(x).mean(2, keepdim=True).mean(3, keepdim=True))
        return self.gate(x * context)


class NormedBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return x + self.proj(self.norm(x))


class NormedTwice(nn.Module):
    """An embedding's norm, then a block's norm of the same output: both at their initial weights (ones and
    zeros, like every norm's), so the second returns the first's value within rounding."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.embed = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.block = NormedBlock(width)

    def forward(self, x):
        return self.block(self.norm(self.embed(x)))


class CountRouter(nn.Module):
    """Routes tokens to experts and counts how many each gets, read into Python (``.tolist()``)."""

    def __init__(self, width, experts, chosen):
        super().__init__()
        self.chosen = chosen
        self.gate = nn.Linear(width, experts, bias=False)

    def forward(self, tokens):
        logits = self.gate(tokens)
        top, index = logits.topk(self.chosen, dim=-1)
        gates = torch.zeros_like(logits).scatter(1, index, 1)
        counts = gates.long().sum(0).tolist()  # read into Python: the sizes the experts split by
        flat = index.flatten()
        _, order = flat.sort(0)
        return torch.softmax(top, -1).flatten()[order], order, counts


class CountedExperts(nn.Module):
    """Splits its tokens by counts it is given, one piece per expert."""

    def __init__(self, width, experts):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(experts, width, width) * 0.2)

    def forward(self, x, counts):
        pieces = x.split(counts, dim=0)
        return torch.cat([piece @ self.weight[i] for i, piece in enumerate(pieces)], 0)


class CountedMoe(nn.Module):
    """Experts sized by counts the router read into Python: the dynamo exporter writes the elements the router
    took (a slice and a squeeze per count) before the experts' split that uses them."""

    def __init__(self, width=16, experts=4, chosen=2):
        super().__init__()
        self.chosen = chosen
        self.router = CountRouter(width, experts, chosen)
        self.experts = CountedExperts(width, experts)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        scores, order, counts = self.router(tokens)
        mixed = self.experts(tokens[order // self.chosen], counts) * scores[:, None]
        per_token = mixed[order.argsort()].reshape(tokens.shape[0], self.chosen, -1).sum(1)
        return self.out(per_token.reshape(x.shape))


class ResponseNorm(nn.Module):
    """A global response norm at its initial weights, zeros: it returns its input exactly, through a chain of
    nodes whose bias adds zeros (so the bias shows nowhere in the graph's values)."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, 1, 1, width))
        self.bias = nn.Parameter(torch.zeros(1, 1, 1, width))

    def forward(self, x):
        norm = torch.linalg.vector_norm(x, ord=2, dim=(1, 2), keepdim=True)
        scaled = norm / (norm.mean(dim=-1, keepdim=True) + 1e-6)
        return self.weight * (x * scaled) + self.bias + x


class ResponseBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.mix = nn.Conv2d(width, width, 3, padding=1, groups=width)
        self.up = nn.Linear(width, 2 * width)
        self.act = nn.GELU()
        self.norm = ResponseNorm(2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        h = self.mix(x).permute(0, 2, 3, 1)
        return x + self.down(self.norm(self.act(self.up(h)))).permute(0, 3, 1, 2)


class ResponseNormNet(nn.Module):
    """Blocks whose response norm, at its initial zeros, returns the activation's output exactly."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 2, stride=2)
        self.blocks = nn.Sequential(ResponseBlock(width), ResponseBlock(width))

    def forward(self, x):
        return self.blocks(self.stem(x))


class Affine(nn.Module):
    """A per-channel scale and shift in one call (``addcmul``), at its initial ones and zeros."""

    def __init__(self, width: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, 1, width))
        self.beta = nn.Parameter(torch.zeros(1, 1, width))

    def forward(self, x):
        return torch.addcmul(self.beta, self.alpha, x)


class AffineBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = Affine(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class AffineMixer(nn.Module):
    """Blocks whose norm is one ``addcmul`` the TorchScript exporter writes as three nodes (scale, times one, shift);
    at the initial weights each node's value equals the block's input."""

    def __init__(self, width: int = 16, depth: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*[AffineBlock(width) for _ in range(depth)])
        self.norm = Affine(width)

    def forward(self, x):
        return self.norm(self.blocks(x))


class SizedTower(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        batch, length = x.shape[0], x.shape[1]  # sizes of the graph input's dynamic axes
        positions = torch.arange(length, dtype=x.dtype).view(1, length, 1).expand(batch, length, 1)
        return self.proj(x) + positions


class SizedTowers(nn.Module):
    """Two towers reading the sizes of one input: a dynamo file reads each size once, at the top, outside both."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.first = SizedTower(width)
        self.second = SizedTower(width)

    def forward(self, x):
        return self.first(x) * self.second(x)


class GroupNormBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(1, channels)
        self.mix = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        return x + self.mix(self.norm(x))


class ReadingStage(nn.Module):
    def __init__(self, channels_in: int, channels: int):
        super().__init__()
        self.downsample = nn.Conv2d(channels_in, channels, 2, stride=2)
        self.blocks = nn.Sequential(GroupNormBlock(channels), GroupNormBlock(channels))

    def forward(self, x):
        x = self.downsample(x)
        batch, channels, height, width = x.shape  # read, then used on a path the export does not take
        if x.dim() != 4:
            x = x.reshape(batch, channels, height * width)
        return self.blocks(x)


class GroupNormStages(nn.Module):
    """Stages that read their input's shape before blocks opening with a group norm, which the exporter
    writes as reshape, normalise, and reshape back to the input's shape (a Shape node of that input)."""

    def __init__(self):
        super().__init__()
        self.stages = nn.Sequential(ReadingStage(3, 8), ReadingStage(8, 16))

    def forward(self, x):
        return self.stages(x)


class MaskedAttention(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.query = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)

    def forward(self, x, mask):
        scores = self.query(x) @ x.transpose(1, 2) + mask
        return scores.softmax(-1) @ self.value(x)


class MaskedEncoder(nn.Module):
    def __init__(self, dim: int, depth: int = 2):
        super().__init__()
        self.layers = nn.ModuleList([MaskedAttention(dim) for _ in range(depth)])

    def forward(self, x, mask):
        mask = mask.transpose(1, 2)  # keys along the rows
        for layer in self.layers:
            x = x + layer(x, mask)
        return x


class HandedMask(nn.Module):
    """The root builds a block mask in its own forward (tensor operations) and hands it to the encoder, the one
    module reading it: the mask's nodes are the root's, written before the encoder's call began."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.encoder = MaskedEncoder(dim)

    def forward(self, x):
        hidden = self.embed(x)
        length = hidden.shape[1]
        mask = torch.full((length, length), torch.finfo(hidden.dtype).min, dtype=hidden.dtype)
        start = 0
        for block in [length]:  # one segment (one image): the mask masks nothing
            mask[start:start + block, start:start + block] = 0
            start += block
        return self.encoder(hidden, mask[None].expand(hidden.shape[0], -1, -1))


class BiasedAttention(nn.Module):
    """Attention scores as one fused ``baddbmm`` on a bias table its caller made: the exporter writes the
    table times ``beta`` (one: the product equals the table) as a node of this module."""

    def __init__(self, dim: int):
        super().__init__()
        self.qk = nn.Linear(dim, 2 * dim)
        self.scale = dim ** -0.5

    def forward(self, x, table):
        query, key = self.qk(x).chunk(2, dim=-1)
        scores = torch.baddbmm(table, query, key.transpose(1, 2), beta=1.0, alpha=self.scale)
        return torch.softmax(scores, dim=-1) @ x


class TableStack(nn.Module):
    """The root computes a position bias table once and hands it to every layer."""

    def __init__(self, dim: int = 16, layers: int = 2):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.layers = nn.ModuleList(BiasedAttention(dim) for _ in range(layers))
        self.slopes = nn.Parameter(torch.rand(1) + 0.5)

    def forward(self, x):
        hidden = self.embed(x)
        positions = torch.arange(hidden.shape[1], dtype=hidden.dtype)
        table = (self.slopes * (positions[None, :] - positions[:, None]).abs())[None].expand(hidden.shape[0], -1, -1)
        for layer in self.layers:
            hidden = layer(hidden, table)
        return hidden


class PositionTable(nn.Module):
    """Computes a table from its buffers alone (no input value): cosines of fixed positions."""

    def __init__(self, dim: int = 16, length: int = 6):
        super().__init__()
        self.register_buffer("positions", torch.arange(length, dtype=torch.float32)[:, None], persistent=False)
        self.register_buffer("rates", torch.linspace(0.1, 1.0, dim)[None], persistent=False)

    def forward(self, x):
        return (self.positions * self.rates).cos()[None]


class TabledLayer(nn.Module):
    """Asks its own child for the table and scales two projections of its input by it."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.table = PositionTable(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)

    def forward(self, x):
        table = self.table(x)
        return torch.tanh(self.q(x) * table + self.k(x) * table)


class TabledStack(nn.Module):
    """Layers each computing the same input-independent table: the exporter folds each into Constant nodes."""

    def __init__(self, dim: int = 16, layers: int = 3):
        super().__init__()
        self.layers = nn.ModuleList(TabledLayer(dim) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class SizedChild(nn.Module):
    """Reads its input's sizes and views its projection by them."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x):
        sizes = x.shape[:-1]
        return torch.tanh(self.linear(x).view(*sizes, 4, -1)).flatten(-2)


class RereadSizes(nn.Module):
    """Layers reading their input's sizes first (through a cast returning it as it is), then handing the input to a
    child that reads them again: the exporter merges the child's read into the layer's (the first), written where
    the layer read it."""

    def __init__(self, dim: int = 16, layers: int = 2):
        super().__init__()
        self.projs = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.children_ = nn.ModuleList(SizedChild(dim) for _ in range(layers))

    def forward(self, x):
        for proj, child in zip(self.projs, self.children_):
            x = x.to(torch.float32)  # the same tensor, which the exporter writes as a Cast
            sizes = x.shape[:-1]
            h = proj(x)
            x = (h + child(x)).reshape(*sizes, -1)
        return x


class ReturnedBias(nn.Module):
    """Projects without a bias and returns its own bias (zeros at init) for the caller to add."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.dense = nn.Linear(dim, dim, bias=False)
        self.dense_bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.dense(torch.tanh(x)), self.dense_bias


class CallerBiasStack(nn.Module):
    """Layers adding the bias their child hands back, expanded to the residual's shape, to the child's output: the
    sum equals the child's product, but the weight it adds is one the product never read. The root reads the
    embedding's shape first (the exporter's read of it for the first expansion is matched there)."""

    def __init__(self, dim: int = 16, layers: int = 2):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.blocks = nn.ModuleList(ReturnedBias(dim) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))

    def forward(self, x):
        hidden = self.embed(x)
        steps = torch.arange(hidden.shape[1], dtype=hidden.dtype)
        for block, norm in zip(self.blocks, self.norms):
            out, bias = block(hidden)
            hidden = norm(out + bias.expand_as(hidden) + hidden)
        return hidden + steps[None, :, None]


class BlockMaskedAttention(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).unsqueeze(1).chunk(3, dim=-1)
        return self.out(nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).squeeze(1))


class BlockMaskedEncoder(nn.Module):
    def __init__(self, dim: int = 16, layers: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(BlockMaskedAttention(dim) for _ in range(layers))

    def forward(self, x, mask):
        for layer in self.layers:
            x = x + layer(x, mask)
        return x


class ZeroMaskStack(nn.Module):
    """The root builds a block mask that comes out all zeros (one block) and hands it to an encoder whose layers
    each add it inside their attention: the mask's value says nothing, and only nodes of the layers read it."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.encoder = BlockMaskedEncoder(dim)

    def forward(self, x):
        hidden = self.embed(x)
        length = hidden.shape[1]
        mask = torch.full((length, length), torch.finfo(hidden.dtype).min)
        mask[:length, :length] = 0
        return self.encoder(hidden, mask[None, None].expand(hidden.shape[0], 1, -1, -1))


class DefaultTags(nn.Module):
    """Embeds per-token tag paths, made in its caller's forward where none are given: a factory sized by the ids'
    shape, times a pad id (the trace sees no tensor link from the ids to the tags; the exporter writes one)."""

    def __init__(self, dim: int = 16, depth: int = 3, tags: int = 12, pad: int = 7):
        super().__init__()
        self.depth, self.pad = depth, pad
        self.words = nn.Embedding(32, dim)
        self.paths = TagPaths(dim, depth, tags)

    def forward(self, ids):
        tags = torch.ones(tuple(ids.shape) + (self.depth,), dtype=torch.long) * self.pad
        return self.words(ids) + self.paths(tags)


class PaddedLookup(nn.Module):
    """A second lookup of per-token ids its forward makes as the pad id, whose row is zeros: the lookup's value
    tells nothing, only the weight it reads does."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.words = nn.Embedding(32, dim)
        self.shapes = nn.Embedding(8, dim, padding_idx=0)
        self.sounds = nn.Embedding(8, dim)
        self.mix = nn.Linear(3 * dim, dim)

    def forward(self, ids):
        default = torch.zeros(ids.shape, dtype=torch.long)
        return self.mix(torch.cat([self.words(ids), self.shapes(default), self.sounds(default)], dim=-1))


class PaddedLookups(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.embed = PaddedLookup(dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, ids):
        return self.out(self.embed(ids))


class TagPaths(nn.Module):
    def __init__(self, dim: int, depth: int, tags: int):
        super().__init__()
        self.units = nn.ModuleList(nn.Embedding(tags, 4) for _ in range(depth))
        self.inner = nn.Linear(4 * depth, dim)

    def forward(self, tags):
        return self.inner(torch.cat([unit(tags[:, :, i]) for i, unit in enumerate(self.units)], dim=-1))


class PoolProject(nn.Module):
    """Pools, projects the pooled value, and either hands the unpooled input to a child doing the same (its own
    pooling and projection then unused: the exporter writes no node for them) or finishes."""

    def __init__(self, channels: int, child: "PoolProject | None" = None):
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.project = nn.Conv2d(channels, channels, 1)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.child = child

    def forward(self, x):
        bottom = self.pool(x)
        shortcut = self.project(bottom)
        if self.child is not None:
            return self.child(x)
        return self.conv(bottom) + shortcut


class UnusedBranch(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.tree = PoolProject(channels, PoolProject(channels))

    def forward(self, x):
        return self.tree(self.stem(x))


def _seeded(factory, *inputs):
    torch.manual_seed(0)
    model = factory().eval()
    generator = torch.Generator().manual_seed(1)
    return model, {name: torch.randn(*shape, generator=generator) for name, shape in inputs}


def counted_moe():
    return _seeded(CountedMoe, ("x", (2, 5, 16)))


def response_norm_net():
    return _seeded(ResponseNormNet, ("x", (2, 3, 16, 16)))


def conv_net():
    return _seeded(ConvNet, ("x", (2, 3, 8, 8)))


def trained_conv_net():
    """``conv_net`` with its batch norms away from their initial statistics (a trained model's)."""
    model, inputs = conv_net()
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for norm in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
            for tensor in (norm.weight, norm.bias, norm.running_mean):
                tensor.copy_(torch.randn(tensor.shape, generator=generator))
            norm.running_var.copy_(torch.rand(norm.running_var.shape, generator=generator) + 0.5)
    return model, inputs


def affine_mixer():
    return _seeded(AffineMixer, ("x", (2, 5, 16)))


def sized_towers():
    return _seeded(SizedTowers, ("x", (2, 5, 8)))


def default_tags():
    torch.manual_seed(0)
    return DefaultTags().eval(), {"ids": torch.randint(0, 32, (2, 6))}


def padded_lookup():
    torch.manual_seed(0)
    return PaddedLookups().eval(), {"ids": torch.randint(0, 32, (2, 6))}


def table_stack():
    return _seeded(TableStack, ("x", (2, 6, 16)))


def tabled_stack():
    return _seeded(TabledStack, ("x", (2, 6, 16)))


def reread_sizes():
    return _seeded(RereadSizes, ("x", (2, 6, 16)))


def caller_bias_stack():
    return _seeded(CallerBiasStack, ("x", (2, 6, 16)))


def zero_mask_stack():
    return _seeded(ZeroMaskStack, ("x", (2, 6, 16)))


def handed_mask():
    return _seeded(HandedMask, ("x", (2, 6, 16)))


def unused_branch():
    return _seeded(UnusedBranch, ("x", (2, 3, 8, 8)))


def group_norm_stages():
    return _seeded(GroupNormStages, ("x", (2, 3, 16, 16)))


def cross_stack():
    return _seeded(CrossStack, ("x", (2, 5, 16)), ("memory", (2, 7, 16)))


def in_place():
    return _seeded(InPlace, ("x", (2, 4, 16)))


def recurrent():
    return _seeded(Recurrent, ("x", (2, 6, 12)))


def torch_layers():
    return _seeded(TorchLayers, ("x", (2, 6, 16)))


def identical_siblings():
    return _seeded(IdenticalSiblings, ("x", (2, 5, 16)))


def parent_code():
    return _seeded(ParentCode, ("pixels", (2, 3, 8, 8)))


def fading_convs():
    return _seeded(FadingConvs, ("x", (2, 8, 8, 8)))


def near_identity_stages():
    return _seeded(NearIdentityStages, ("x", (2, 8, 4, 4)))


def zero_branch_stack():
    return _seeded(ZeroBranchStack, ("x", (2, 4, 16)))


def faint_convs():
    return _seeded(FaintConvs, ("x", (2, 8, 4, 4)))


def faint_conv_norms():
    return _seeded(FaintConvNorms, ("x", (2, 8, 4, 4)))


def summed_branch_stages():
    return _seeded(SummedBranchStages, ("x", (2, 8, 4, 4)))


def shaped_embed_net():
    return _seeded(ShapedEmbedNet, ("x", (2, 3, 8, 8)))


def faded_gelu_blocks():
    return _seeded(FadedGeluBlocks, ("x", (2, 8, 4, 4)))


def faded_gated_blocks():
    return _seeded(FadedGatedBlocks, ("x", (1, 16, 1, 1)))


def empty_branch():
    return _seeded(EmptyBranch, ("x", (2, 6, 16)))


def masked_slice_stack():
    return _seeded(MaskedSliceStack, ("x", (2, 5, 16)))


def shared_mask_stack():
    return _seeded(SharedMaskStack, ("x", (2, 5, 16)))


def loud_convs():
    return _seeded(LoudConvs, ("x", (2, 16, 8, 8)))


def root_extents():
    torch.manual_seed(0)
    return RootExtents().eval(), {"ids": torch.randint(0, 32, (2, 6))}


def unordered_experts():
    return _seeded(UnorderedExperts, ("x", (2, 8, 16)))


def chunked_gate():
    return _seeded(ChunkedGate, ("x", (2, 8, 16)))


def rolled_windows():
    return _seeded(RolledWindows, ("x", (2, 4, 4, 16)))


def faint_context():
    return _seeded(FaintContext, ("x", (2, 16, 6, 6)))


def normed_twice():
    return _seeded(NormedTwice, ("x", (2, 6, 16)))


def split_stage():
    return _seeded(SplitStage, ("x", (2, 8, 4, 4)))


def _transformers_model(config_class: str, model_class: str, **config):
    import transformers

    from modelexport_core.prepare.inputs import inputs_from_config

    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config)).eval()
    if "image_size" in config:
        generator = torch.Generator().manual_seed(0)
        size = config["image_size"]
        return model, {"pixel_values": torch.randn(2, 3, size, size, generator=generator)}
    return model, inputs_from_config(model)


def _repeated_funnel():
    """Funnel blocks each run twice (``block_repeats``): each run's attention slices the same all-true mask, which
    the exporter merges into one node that every run reads (batch 1 and an odd length, as users export)."""
    model, _ = _transformers_model("FunnelConfig", "FunnelModel", vocab_size=128, d_model=32, n_head=2, d_head=16,
                                   d_inner=37, block_sizes=[2, 2], block_repeats=[1, 2], num_decoder_layers=1,
                                   max_position_embeddings=64)
    ids = torch.randint(0, 128, (1, 13), generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


_TEXT = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64)

# More architectures from transformers configs, beyond the core's presets.
ARCHITECTURES = {
    # random weights fade its later stages to numbers near the subnormals; a norm scales them up to normal numbers
    # that are only their rounding (data flow, not elements, must place the stages' norms, layouts and projections)
    "mobilevit": lambda: _transformers_model("MobileViTConfig", "MobileViTModel", image_size=64, patch_size=8,
                                             hidden_sizes=[16, 32, 64], neck_hidden_sizes=[16, 32, 64, 128, 128, 128,
                                                                                           128],
                                             num_attention_heads=4, mlp_ratio=2.0, expand_ratio=4.0),
    "opt": lambda: _transformers_model("OPTConfig", "OPTModel", vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, ffn_dim=37, max_position_embeddings=64,
                                       word_embed_proj_dim=32),
    "qwen2": lambda: _transformers_model("Qwen2Config", "Qwen2Model", num_key_value_heads=2, **_TEXT),
    "gpt_neo": lambda: _transformers_model("GPTNeoConfig", "GPTNeoModel", vocab_size=128, hidden_size=32, num_layers=2,
                                           num_heads=4, attention_types=[[["global", "local"], 1]],
                                           max_position_embeddings=64, window_size=4, bos_token_id=0, eos_token_id=0),
    "windowed": lambda: _transformers_model("SwinConfig", "SwinModel", image_size=32, patch_size=2, embed_dim=8,
                                            depths=[2, 2], num_heads=[2, 2], window_size=4, mlp_ratio=1.0),
    "repeated_funnel": _repeated_funnel,
    "conv_stages": lambda: _transformers_model("ResNetConfig", "ResNetModel", num_channels=3, embedding_size=8,
                                               hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", image_size=32),
}


CUSTOM_CASES: dict = {
    "conv_net": conv_net,
    "trained_conv_net": trained_conv_net,
    "affine_mixer": affine_mixer,
    "sized_towers": sized_towers,
    "group_norm_stages": group_norm_stages,
    "cross_stack": cross_stack,
    "in_place": in_place,
    "recurrent": recurrent,
    "torch_layers": torch_layers,
    "identical_siblings": identical_siblings,
    "parent_code": parent_code,
    "fading_convs": fading_convs,
    "near_identity_stages": near_identity_stages,
    "zero_branch_stack": zero_branch_stack,
    "faint_convs": faint_convs,
    "faint_conv_norms": faint_conv_norms,
    "faded_gelu_blocks": faded_gelu_blocks,
    "faded_gated_blocks": faded_gated_blocks,
    "shaped_embed_net": shaped_embed_net,
    "summed_branch_stages": summed_branch_stages,
    "empty_branch": empty_branch,
    "split_stage": split_stage,
    "loud_convs": loud_convs,
    "masked_slice_stack": masked_slice_stack,
    "root_extents": root_extents,
    "unordered_experts": unordered_experts,
    "chunked_gate": chunked_gate,
    "rolled_windows": rolled_windows,
    "faint_context": faint_context,
    "normed_twice": normed_twice,
    "counted_moe": counted_moe,
    "response_norm_net": response_norm_net,
    "handed_mask": handed_mask,
    "unused_branch": unused_branch,
    "shared_mask_stack": shared_mask_stack,
    "table_stack": table_stack,
    "tabled_stack": tabled_stack,
    "reread_sizes": reread_sizes,
    "default_tags": default_tags,
    "padded_lookup": padded_lookup,
    "caller_bias_stack": caller_bias_stack,
    "zero_mask_stack": zero_mask_stack,
}

# Cases htp does not yet tag right, each tested as a strict expected failure.
OPEN_CASES: dict = {}

"""Models with the hard cases of tagging, for the tests of the core and of any strategy plugin.

Each factory returns ``(model, inputs)``. Together they cover: a module called several
times (reuse), same-class siblings with non-index names, a ModuleDict, ops at the root,
residual connections that cross blocks, tied weights, and a ModuleList of identical
blocks (where a node of block 1 must never be tagged block 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch


def _classes():
    import torch
    from torch import nn

    class Scale(nn.Module):
        """A parameterised elementwise module that is not from torch.nn."""

        def __init__(self, width: int):
            super().__init__()
            self.weight = nn.Parameter(torch.linspace(0.5, 1.5, width))

        def forward(self, x):
            return x * self.weight

    class Block(nn.Module):
        def __init__(self, width: int):
            super().__init__()
            self.proj = nn.Linear(width, width)
            self.act = nn.GELU()
            self.norm = nn.LayerNorm(width)
            self.scale = Scale(width)

        def forward(self, x):
            return self.norm(x + self.scale(self.act(self.proj(x))))

    class Gate(nn.Module):
        def __init__(self, width: int):
            super().__init__()
            self.gate = nn.Linear(width, width)

        def forward(self, x):
            return x * torch.sigmoid(self.gate(x))

    class StackedBlocks(nn.Module):
        """Identical blocks in a ModuleList, a residual that skips a block, ops at the root."""

        def __init__(self, width: int = 16, depth: int = 3):
            super().__init__()
            self.inp = nn.Linear(width, width)
            self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
            self.head = Gate(width)

        def forward(self, x):
            h = self.inp(x)
            skip = h
            for i, block in enumerate(self.blocks):
                h = block(h)
                if i == 1:
                    h = h + skip  # residual from before block 0 into block 1's output
            return self.head(h).sum(dim=-1) * 0.5

    class ReusedModule(nn.Module):
        """One Block instance called three times; a Gate called twice."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.shared = Block(width)
            self.gate = Gate(width)
            self.out = nn.Linear(width, 4)

        def forward(self, x):
            for _ in range(3):
                x = self.shared(x)
            x = self.gate(x) + self.gate(x * 2)
            return self.out(torch.relu(x))

    class SameClassSiblings(nn.Module):
        """Same-class siblings with names, not indices: q_norm / k_norm, left / right."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.q_norm = Scale(width)
            self.k_norm = Scale(width)
            self.left = Block(width)
            self.right = Block(width)

        def forward(self, x):
            q = self.left(self.q_norm(x))
            k = self.right(self.k_norm(x))
            return torch.matmul(q, k.transpose(-1, -2)).softmax(dim=-1)

    class RoutedHeads(nn.Module):
        """A ModuleDict of heads and two ModuleLists holding same-class blocks."""

        def __init__(self, width: int = 16):
            super().__init__()
            self.heads = nn.ModuleDict({"cls": Gate(width), "reg": Gate(width)})
            self.first = nn.ModuleList([Block(width)])
            self.second = nn.ModuleList([Block(width)])

        def forward(self, x):
            x = self.second[0](self.first[0](x))
            return self.heads["cls"](x) + self.heads["reg"](x).mean(dim=-1, keepdim=True)

    class TiedWeights(nn.Module):
        """An embedding whose weight the output projection reuses (tied), ops at the root."""

        def __init__(self, vocab: int = 50, width: int = 16):
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.block = Block(width)
            self.unembed = nn.Linear(width, vocab, bias=False)
            self.unembed.weight = self.tokens.weight

        def forward(self, input_ids):
            h = self.block(self.tokens(input_ids))
            return self.unembed(h) / 4.0

    return StackedBlocks, ReusedModule, SameClassSiblings, RoutedHeads, TiedWeights


def _float_input(width: int = 16) -> dict[str, "torch.Tensor"]:
    import torch

    return {"x": torch.randn(2, 5, width, generator=torch.Generator().manual_seed(0))}


def _seeded(index: int, inputs: Callable[[], dict[str, "torch.Tensor"]]):
    """A factory building model class ``index`` with seed 0 weights, and its inputs."""

    def factory():
        import torch

        torch.manual_seed(0)
        return _classes()[index]().eval(), inputs()

    return factory


def _token_input() -> dict[str, "torch.Tensor"]:
    import torch

    return {"input_ids": torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0))}


stacked_blocks = _seeded(0, _float_input)
reused_module = _seeded(1, _float_input)
same_class_siblings = _seeded(2, _float_input)
routed_heads = _seeded(3, _float_input)
tied_weights = _seeded(4, _token_input)


HARD_CASES: dict[str, Callable[[], tuple["torch.nn.Module", dict[str, "torch.Tensor"]]]] = {
    "stacked_blocks": stacked_blocks,
    "reused_module": reused_module,
    "same_class_siblings": same_class_siblings,
    "routed_heads": routed_heads,
    "tied_weights": tied_weights,
}

"""A model that takes seconds in every run, so a test can stop its export while it runs (a CLI factory)."""

from __future__ import annotations

import time

import torch


class Slow(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(1.5)  # each run: the example run, the capture, verification
        return self.proj(x)


def build() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    return Slow().eval(), {"x": torch.randn(2, 8)}

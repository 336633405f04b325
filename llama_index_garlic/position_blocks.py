"""Position-wise layers run a block of positions at a time.

A decoder layer's MLP acts on each position alone, so its output over a sequence is the concatenation of its
outputs over consecutive blocks of positions. Over a 10,520-token exchange the 1.5B's MLP held three
``tokens × 8,960`` float32 tensors at once (gate, up and their product: 1.1 GB); a block of
:data:`MLP_BLOCK` positions holds a tenth of it, the outputs the same within float rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["MLP_BLOCK", "InBlocks", "mlps_in_blocks"]

MLP_BLOCK = 1024
"""Positions an MLP runs on at once (``benchmarks/bench_attention_memory.py --blocks``)."""


class InBlocks:
    """A position-wise ``forward`` applied to ``block`` positions of a ``batch × positions × features`` input at a time."""

    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor], block: int):
        if block < 1:
            raise ValueError(f"a block holds at least one position, not {block}")
        self.forward, self.block = forward, block

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.forward(part) for part in x.split(self.block, dim=1)], dim=1)


def mlps_in_blocks(decoder: torch.nn.Module, block: int | None = None) -> int:
    """Run every ``*.mlp`` module of ``decoder`` :class:`InBlocks` of ``block`` positions (None: :data:`MLP_BLOCK`);
    return how many changed. The modules and their weights' names stay as loaded."""
    block = MLP_BLOCK if block is None else block
    layers = [m for name, m in decoder.named_modules()
              if name.rsplit(".", 1)[-1] == "mlp" and not isinstance(m.forward, InBlocks)]
    for mlp in layers:
        mlp.forward = InBlocks(mlp.forward, block)
    return len(layers)

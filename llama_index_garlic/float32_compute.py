"""Weights kept in a low precision, multiplied in float32 where that is faster.

A CPU without bfloat16 instructions (AVX2, as most laptops) runs bfloat16 matrix products several times
slower than float32 ones: the 1.5B's edges over a 2,372-token prompt took 328 s in bfloat16 against 46 s in
float32. Storing the weights in float32 instead doubles their memory (9.2 GB peak against 5.8 GB).
:func:`compute_in_float32` keeps both: each linear layer holds its bfloat16 weight and multiplies in float32,
converting the weight for the product only (one layer's weight at a time, tens of megabytes). A CPU with
bfloat16 instructions (AVX-512 BF16, AMX) runs the bfloat16 products 3-4× faster than float32 ones, so
:func:`float32_products_where_faster` converts only where a timed product says float32 wins.
"""

from __future__ import annotations

import functools
import time

import torch

__all__ = ["Float32Linear", "compute_in_float32", "faster_products", "float32_products_where_faster"]


class Float32Linear(torch.nn.Module):
    """A linear layer's weight and bias as stored, its product computed in float32."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.float()
        return torch.nn.functional.linear(x.float(), self.weight.float(), bias)


def compute_in_float32(module: torch.nn.Module) -> int:
    """Replace every linear layer of ``module`` whose weight is not float32 by a :class:`Float32Linear`;
    return how many were replaced."""
    layers = [(name, m) for name, m in module.named_modules() if isinstance(m, torch.nn.Linear) and m.weight.dtype != torch.float32]
    for name, linear in layers:
        module.set_submodule(name, Float32Linear(linear))
    return len(layers)


@functools.cache
def faster_products(dtype: torch.dtype, size: int = 512) -> torch.dtype:
    """``dtype`` or float32, whichever multiplies two ``size × size`` matrices faster on this CPU (best of
    three, timed once a process)."""
    if dtype == torch.float32:
        return dtype

    def best_seconds(kind: torch.dtype) -> float:
        a, b = torch.ones(size, size, dtype=kind), torch.ones(size, size, dtype=kind)
        torch.matmul(a, b)  # the first product loads the kernel
        times = []
        for _ in range(3):
            started = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - started)
        return min(times)

    return dtype if best_seconds(dtype) < best_seconds(torch.float32) else torch.float32


def float32_products_where_faster(module: torch.nn.Module) -> int:
    """:func:`compute_in_float32` on ``module`` unless its weights' own dtype multiplies faster on this CPU;
    return how many layers were replaced."""
    dtypes = {m.weight.dtype for m in module.modules() if isinstance(m, torch.nn.Linear)}
    if all(faster_products(d) == d for d in dtypes):
        return 0
    return compute_in_float32(module)

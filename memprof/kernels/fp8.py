"""float8 e4m3fn bytes → fp32 by table lookup, for the torch references on a CPU.

torch's own cast (``u8.view(torch.float8_e4m3fn).float()``) converts one element at a time on a
CPU (about 4 ns an element, measured in ``benchmarks/bench_validate.py``'s machine); a gather from
a 256-entry table built with that very cast gives the same bits (NaN codes included) about four
times faster. Any device works; the table is built where the bytes are.
"""

from __future__ import annotations

import torch


def e4m3_table(device: torch.device | str = "cpu") -> torch.Tensor:
    """``(256,)`` fp32: the value of every e4m3fn byte, by torch's cast."""
    return torch.arange(256, dtype=torch.int32, device=device).to(torch.uint8).view(
        torch.float8_e4m3fn).float()


def lookup(table: torch.Tensor, u8: torch.Tensor) -> torch.Tensor:
    """``table[u8]`` for a byte tensor ``(...)``: ``(..., *table.shape[1:])``, one row gather."""
    flat = u8.to(torch.int32, memory_format=torch.contiguous_format).view(-1)  # (N,) one pass
    return table.index_select(0, flat).view(*u8.shape, *table.shape[1:])


def e4m3_to_float(u8: torch.Tensor) -> torch.Tensor:
    """e4m3fn bytes ``(...)`` uint8 (or float8_e4m3fn) as fp32 ``(...)``: the cast's bits."""
    return lookup(e4m3_table(u8.device), u8.view(torch.uint8))

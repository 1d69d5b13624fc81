"""Where Triton is and how it runs: imported lazily, interpreted on CPU when ``TRITON_INTERPRET=1``.

Only the kernel modules of ``memprof.kernels`` import this; the estimator never does.
"""

from __future__ import annotations

import importlib.util
import os

import torch


def triton_available() -> bool:
    """Is the ``triton`` package importable (without importing it)?"""
    return importlib.util.find_spec("triton") is not None


def interpreted() -> bool:
    """Triton's interpreter is on (``TRITON_INTERPRET=1`` before triton was imported)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def can_run_triton(t: torch.Tensor) -> bool:
    """Can a Triton kernel run on ``t``: a CUDA tensor, or any tensor under the interpreter."""
    if not triton_available():
        return False
    return t.is_cuda or interpreted()


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of ``device`` (132 on an H100 SXM); 8 off-GPU."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 8


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())

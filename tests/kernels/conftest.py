"""Kernel tests run the Triton kernels under Triton's interpreter on CPU tensors.

``TRITON_INTERPRET`` is read when a kernel is decorated, so it is set here, before any test of
this folder imports ``memprof.kernels`` (and with it triton). On a machine with CUDA the variable
is left alone so the ``gpu`` tests compile real kernels.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def _has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def interpreter() -> None:
    """Skip a test that runs Triton kernels on CPU tensors unless the interpreter is on (on a
    GPU machine compiled kernels cannot read CPU memory; the ``gpu`` tests cover them there)."""
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        pytest.skip("Triton's interpreter is off (a GPU is visible): compiled kernels need CUDA "
                    "tensors")

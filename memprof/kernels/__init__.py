"""Shared-scratch decode kernels: a ``WorkspaceManager``-like workspace, MLA and TurboQuant decode.

Triton on CUDA (or under ``TRITON_INTERPRET=1``), a torch reference anywhere. Needs the
``kernels`` extra (torch, triton); nothing below ``memprof.kernels`` imports this package.
"""

from memprof.kernels.mla_decode import DecodeOutPolicy, MLAConfig, mla_decode, mla_decode_reference
from memprof.kernels.tq_decode import (
    TQDecodeBuffers,
    tq_cache_shape,
    tq_decode,
    tq_decode_reference,
    tq_dequant_k8v4,
    tq_store_k8v4,
)
from memprof.kernels.workspace import Workspace, WorkspaceLockedError

__all__ = [
    "DecodeOutPolicy",
    "MLAConfig",
    "TQDecodeBuffers",
    "Workspace",
    "WorkspaceLockedError",
    "mla_decode",
    "mla_decode_reference",
    "tq_cache_shape",
    "tq_decode",
    "tq_decode_reference",
    "tq_dequant_k8v4",
    "tq_store_k8v4",
]

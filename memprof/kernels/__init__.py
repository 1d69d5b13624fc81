"""Shared-scratch decode kernels: a ``WorkspaceManager``-like workspace, MLA, TurboQuant and
DeepSeek-V4 sparse MLA decode.

Triton on CUDA (or under ``TRITON_INTERPRET=1``), a torch reference anywhere. Needs the
``kernels`` extra (torch, triton); nothing below ``memprof.kernels`` imports this package. Kernels
only: what runs them under each policy and checks them is ``memprof.validation``.
"""

from memprof.kernels.mla_decode import DecodeOutPolicy, MLAConfig, mla_decode, mla_decode_reference
from memprof.kernels.sparse_mla_decode import (
    ScopeScratch,
    dequantize_pool,
    merge_scopes,
    pack_fp8_ds_mla,
    sparse_mla_decode,
    sparse_mla_decode_reference,
)
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
    "ScopeScratch",
    "TQDecodeBuffers",
    "Workspace",
    "WorkspaceLockedError",
    "dequantize_pool",
    "merge_scopes",
    "mla_decode",
    "mla_decode_reference",
    "pack_fp8_ds_mla",
    "sparse_mla_decode",
    "sparse_mla_decode_reference",
    "tq_cache_shape",
    "tq_decode",
    "tq_decode_reference",
    "tq_dequant_k8v4",
    "tq_store_k8v4",
]

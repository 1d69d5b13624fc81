"""Shared-scratch decode kernels: a ``WorkspaceManager``-like workspace, MLA and TurboQuant decode.

Triton on CUDA (or under ``TRITON_INTERPRET=1``), a torch reference anywhere. Needs the
``kernels`` extra (torch, triton); nothing below ``memprof.kernels`` imports this package.
"""

from memprof.kernels.mla_decode import DecodeOutPolicy, MLAConfig, mla_decode, mla_decode_reference
from memprof.kernels.workspace import Workspace, WorkspaceLockedError

__all__ = [
    "DecodeOutPolicy",
    "MLAConfig",
    "Workspace",
    "WorkspaceLockedError",
    "mla_decode",
    "mla_decode_reference",
]

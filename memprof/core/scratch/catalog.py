"""The scratch catalog: every scratch family's buffers in one tuple, looked up by backend key.
The registry of the scratch families: each is imported here by its module's name (a backend
row's ``scratch``, the SGLang DP gather, a kind's own), and nothing else is."""

from __future__ import annotations

from memprof.core.scratch.buffer import ScratchBuffer
from memprof.core.scratch.dsv4 import DSV4_BUFFERS
from memprof.core.scratch.flashinfer import FLASHINFER_BUFFERS
from memprof.core.scratch.mla import MLA_BUFFERS
from memprof.core.scratch.sglang_dp import SGLANG_BUFFERS
from memprof.core.scratch.turboquant import TURBOQUANT_BUFFERS

CATALOG: tuple[ScratchBuffer, ...] = (*MLA_BUFFERS, *FLASHINFER_BUFFERS, *TURBOQUANT_BUFFERS,
                                      *SGLANG_BUFFERS, *DSV4_BUFFERS)


def buffers_for(key: str) -> tuple[ScratchBuffer, ...]:
    """Catalog entries of one backend (or SGLANG_DP_ATTENTION, or a kind's scratch_key)."""
    return tuple(b for b in CATALOG if b.backend == key)

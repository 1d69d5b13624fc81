"""A shared scratch workspace with vLLM ``WorkspaceManager`` semantics.

Modelled on ``vllm/v1/worker/workspace.py`` (vLLM@52a31cc, ``WorkspaceManager.get_simultaneous``,
``_ensure_workspace_size``, ``lock_workspace``; vLLM@52a31cc):

- ``get_simultaneous(*(shape, dtype))`` returns views into ONE ``uint8`` buffer; sub-buffer ``i``
  starts at ``Σ_{j<i} round_up(bytes_j, 256)`` (``WORKSPACE_ALIGN``, imported from the scratch
  catalog so the estimate and the kernels agree on one number);
- the buffer only grows, to the largest *single* call (not the sum over callers); growing drops
  the old buffer first and then allocates the new one (vLLM also calls ``empty_cache`` in between,
  #39226 — done here on CUDA too, so a resize does not leave the old block reserved);
- once locked (vLLM locks at the end of CUDA-graph capture), a call that would grow the buffer
  raises ``WorkspaceLockedError`` instead of silently reallocating under captured pointers;
- calls of the same or a smaller size return views at the same addresses (stable pointers).

Views from an earlier call become stale after a growth: callers re-acquire every forward.
Unlike vLLM there is no global singleton and no micro-batch slots: one ``Workspace`` is one slot.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from memprof.base.units import round_up
from memprof.core.scratch import WORKSPACE_ALIGN

ShapeDtype = tuple[Sequence[int], torch.dtype]


class WorkspaceLockedError(RuntimeError):
    """A locked workspace was asked to grow (vLLM: the ``AssertionError`` after locking)."""


def aligned_layout(specs: Sequence[ShapeDtype]) -> tuple[list[int], int]:
    """Offsets of each sub-buffer and the total bytes one ``get_simultaneous`` call needs."""
    offsets: list[int] = []
    total = 0
    for shape, dtype in specs:
        offsets.append(total)
        nbytes = math.prod(shape) * dtype.itemsize
        total += round_up(nbytes, WORKSPACE_ALIGN)
    return offsets, total


class Workspace:
    """One growing ``uint8`` buffer that hands out aligned, simultaneous views."""

    def __init__(self, device: torch.device | str = "cpu", *, name: str = "workspace") -> None:
        self.device = torch.device(device)
        self.name = name
        self._buf: torch.Tensor | None = None  # (size_bytes,) uint8
        self._locked = False
        self._num_grows = 0

    # --- properties ---------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        return 0 if self._buf is None else int(self._buf.numel())

    @property
    def num_grows(self) -> int:
        return self._num_grows

    @property
    def locked(self) -> bool:
        return self._locked

    def data_ptr(self) -> int:
        return 0 if self._buf is None else int(self._buf.data_ptr())

    # --- locking (CUDA-graph capture) ---------------------------------------------------------

    def lock(self) -> None:
        self._locked = True

    def unlock(self) -> None:
        self._locked = False

    @contextmanager
    def locked_scope(self) -> Iterator[Workspace]:
        """Lock for the duration of a CUDA-graph capture (or any region that must not grow)."""
        was = self._locked
        self._locked = True
        try:
            yield self
        finally:
            self._locked = was

    # --- allocation ---------------------------------------------------------------------------

    def reserve(self, nbytes: int) -> None:
        """Grow to at least ``nbytes`` (vLLM's ``_ensure_workspace_size``)."""
        if nbytes <= self.size_bytes:
            return
        if self._locked:
            raise WorkspaceLockedError(
                f"{self.name} is locked but a call requires {nbytes / 2**20:.2f} MiB, current size "
                f"is {self.size_bytes / 2**20:.2f} MiB; growth is not allowed after locking "
                "(reserve the largest size before capturing CUDA graphs)")
        self._buf = None  # drop the old buffer first, so old + new are never both live
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # vLLM #39226
        self._buf = torch.empty((nbytes,), dtype=torch.uint8, device=self.device)  # (nbytes,)
        self._num_grows += 1

    def get_simultaneous(self, *specs: ShapeDtype) -> list[torch.Tensor]:
        """Views for all ``(shape, dtype)`` pairs at once, each at a 256-B aligned offset."""
        offsets, total = aligned_layout(specs)
        self.reserve(total)
        buf = self._buf
        assert buf is not None or total == 0
        out: list[torch.Tensor] = []
        for (shape, dtype), off in zip(specs, offsets, strict=True):
            nbytes = math.prod(shape) * dtype.itemsize
            if buf is None:  # every part empty
                out.append(torch.empty(tuple(shape), dtype=dtype, device=self.device))
                continue
            out.append(buf[off:off + nbytes].view(dtype).view(tuple(shape)))
        return out

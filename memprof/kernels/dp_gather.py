"""SGLang's DP-attention gather (seed 002): every DP rank's tokens into one buffer before the
dense / MoE layers, and the scatter back; the buffer fresh per forward or persistent.

What SGLang does (read for shapes and lifetimes, no code copied): with ``--enable-dp-attention``
each DP rank runs attention on its own requests, then the tokens of all ranks are gathered into
one ``(max_bs · tokens_per_bs · dp, hidden)`` buffer in the model dtype (MAX_LEN mode: every rank
padded to the graph's ``max_bs · tokens_per_bs`` rows), the MLP runs on it, and each rank takes
its rows back. SGL@d315eb7 ``layers/dp_attention.py`` ``get_global_dp_buffer`` allocates it per
forward (``torch.empty``); SGLang #8280 ``cuda_graph_runner.py`` keeps one zero-filled buffer in
the graph runner (seed 002; the estimate's ``SGLang DP-attention gathered buffer`` components:
"per forward" = catalog policy ``shared``, "persistent" = catalog policy ``per-layer``).

The gather is ``torch.distributed.all_gather_into_tensor`` in place (each process's input is its
own slice of the buffer). A process may stand for several DP ranks (``dp`` a multiple of the
world size): with a world of one — NCCL on one GPU, gloo on the CPU — the buffer still has the
rows of all ``dp`` ranks, so its bytes are the deployment's. The MLP is an in-place scale
(``mul_``) so the forward allocates nothing but the buffer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator

import torch
import torch.distributed as dist

POLICIES = ("per-forward", "persistent")
CATALOG_POLICY = {"per-forward": "shared", "persistent": "per-layer"}


class DPGatherBuffer:
    """The gathered buffer of one policy: ``rows × hidden`` in ``dtype``."""

    def __init__(self, policy: str, rows: int, hidden: int, *, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.policy, self.rows, self.hidden, self.dtype = policy, rows, hidden, dtype
        self.device = torch.device(device)
        self.num_allocs = 0
        self.alloc_bytes = 0
        self.last_ptr = 0
        self._buf: torch.Tensor | None = None
        if policy == "persistent":  # SGLang #8280: zeros, owned by the graph runner
            self._buf = self._new()
            self._buf.zero_()

    @property
    def nbytes(self) -> int:
        return self.rows * self.hidden * self.dtype.itemsize

    def _new(self) -> torch.Tensor:
        t = torch.empty((self.rows, self.hidden), dtype=self.dtype, device=self.device)
        self.num_allocs += 1
        self.alloc_bytes += self.nbytes
        return t

    def get(self) -> torch.Tensor:
        buf = self._buf if self._buf is not None else self._new()  # per forward: torch.empty
        self.last_ptr = buf.data_ptr()
        return buf

    @property
    def held_bytes(self) -> int:
        return 0 if self._buf is None else self.nbytes

    def counter(self) -> tuple[int, int]:
        return self.num_allocs, self.alloc_bytes

    def tracked(self) -> dict[str, int]:
        return {"gathered_buffer": self.last_ptr}

    def release(self) -> None:
        self._buf = None


def dp_gather_forward(local: torch.Tensor, holder: DPGatherBuffer,
                      weight: torch.Tensor, out: torch.Tensor,
                      group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """One forward's gather → MLP → scatter for this process's DP ranks.

    ``local``: ``(V, R, hidden)`` the tokens of this process's ``V`` DP ranks, each padded to
    ``R = max_bs · tokens_per_bs`` rows (MAX_LEN padding: the caller zeroes the rows past each
    rank's tokens); ``weight``: ``(hidden,)`` the MLP stand-in; ``out``: ``(V, R,
    hidden)``, this process's rows after the MLP.
    """
    V, R, H = local.shape
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    buf = holder.get()  # (world·V·R, hidden)
    if tuple(buf.shape) != (world * V * R, H):
        raise ValueError(f"gathered buffer {tuple(buf.shape)} is not (world·V·R, hidden) = "
                         f"{(world * V * R, H)}")
    mine = buf[rank * V * R:(rank + 1) * V * R].view(V, R, H)  # this process's slice
    mine.copy_(local)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch ≥ 2.13 renames it
        dist.all_gather_into_tensor(buf, mine.view(V * R, H), group=group)
    buf.mul_(weight)  # the dense / MoE layer on every DP rank's tokens
    out.copy_(mine)  # scatter: this process's rows back
    return out


@contextlib.contextmanager
def process_group(device: torch.device) -> Iterator[dist.ProcessGroup | None]:
    """The default group if one exists (any world size), else a world of one: NCCL on CUDA,
    gloo on the CPU (a ``FileStore`` in a temporary folder), destroyed afterwards."""
    if dist.is_available() and dist.is_initialized():
        yield None
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    with tempfile.TemporaryDirectory() as tmp:
        store = dist.FileStore(os.path.join(tmp, "store"), 1)  # type: ignore[attr-defined]
        dev_id = None
        if device.type == "cuda":  # bind the communicator to the GPU (eager NCCL init)
            dev_id = torch.device("cuda", device.index if device.index is not None
                                  else torch.cuda.current_device())
        dist.init_process_group(backend, store=store, rank=0, world_size=1, device_id=dev_id)
        try:
            yield None
        finally:
            dist.destroy_process_group()

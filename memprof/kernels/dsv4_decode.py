"""One DeepSeek-V4 attention layer's decode, with its scratch per step (#40889) or shared
(#40892 + #40909): the seed-003 policies ``memprof validate --kernel dsv4`` runs.

A layer has an SWA scope (the 128-token window, SWA pool of 64-row blocks) and, on C4 / C128
layers, a compressed ("extra") scope (top-k of the C4 pool, or every C128 entry); the two scope
results merge by log-sum-exp (vLLM deepseek_v4.py @023da1fc, SWA + compressed attention). What
the AITER path of vLLM #40889 does per layer and step, and what this module reproduces buffer for
buffer:

1. dequantise each scope's whole cache to bf16 ``(num_blocks, rows, 1, 512)`` and cast it to fp8
   (same shape) — ``dequantize_pool`` then ``copy_``;
2. build ``qo_indptr, kv_indptr, kv_indices, valid_mask, kv_last_page_lens, q_scale, kv_scale,
   valid_lens, col_arange, q_fp8`` and the bf16 output of each scope (``ScopeScratch``);
3. attend over the gathered rows of the bf16 copy (``sparse_mla_decode``) and merge the scopes.

``per-step`` allocates all of 1-2 fresh in every call; ``shared`` keeps one ``ScopeScratch`` per
scope for all layers (#40892, sized for the widest layer kind) and takes the dequant buffers from
one ``Workspace`` (#40909, vLLM ``WorkspaceManager`` semantics), all rewritten in place, so no
call allocates and every pointer is stable. The Triton kernel reads the bf16 copy (the fp8 copy
is what AITER's a8w8 kernel reads; its RoPE dims would lose precision in e4m3).
"""

from __future__ import annotations

import torch

from memprof.kernels.sparse_mla_decode import (
    D_HEAD,
    ScopeScratch,
    dequantize_pool,
    merge_scopes,
    sparse_mla_decode,
)
from memprof.kernels.workspace import Workspace

POLICIES = ("per-step", "shared")
KINDS = ("SWA-only", "C4", "C128")
# the catalog's policy names (memprof/core/scratch/dsv4.py): per-step = its "per-layer" variant
CATALOG_POLICY = {"per-step": "per-layer", "shared": "shared"}


def layer_kind(compress_ratio: int) -> str:
    """SWA-only, C4 or C128 by compress ratio (as the scratch catalog's ``_dsv4_layer``)."""
    return {4: "C4", 128: "C128"}.get(compress_ratio, "SWA-only")


class DSV4DecodeScratch:
    """The scratch of every layer's decode under one policy.

    ``tokens`` decode rows, ``heads`` query heads on the rank, ``swa_topk`` the window,
    ``extra_topk`` the widest compressed scope of any layer (0: no compressed layers),
    ``swa_pool`` / ``extra_pools`` the ``(num_blocks, rows)`` of each scope's cache.
    """

    def __init__(self, policy: str, *, tokens: int, heads: int, swa_topk: int,
                 extra_topk: int, swa_pool: tuple[int, int],
                 extra_pools: dict[str, tuple[int, int]], device: torch.device | str) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy
        self.device = torch.device(device)
        self.tokens, self.heads = tokens, heads
        self.swa_topk, self.extra_topk = swa_topk, extra_topk
        self.swa_pool, self.extra_pools = swa_pool, extra_pools
        self.num_allocs = 0  # tensors this object allocated (cumulative)
        self.alloc_bytes = 0
        self.last_call_bytes = 0  # catalog bytes the last per-step call allocated
        self.last_call_extra = 0  # bytes it allocated that the catalog does not list (lse)
        self._ptrs: dict[str, int] = {}  # name → data_ptr of the buffers of the last calls
        self._ws = Workspace(self.device, name="dsv4_dequant")
        self._swa: ScopeScratch | None = None
        self._extra: ScopeScratch | None = None
        if policy == "shared":
            self._swa = ScopeScratch(tokens, heads, swa_topk, self.device, alloc=self._alloc)
            if extra_topk:
                self._extra = ScopeScratch(tokens, heads, extra_topk, self.device,
                                           alloc=self._alloc)
            for kind in extra_pools or {"SWA-only": (0, 0)}:
                self._ws.get_simultaneous(*self._dequant_specs(kind))  # reserve the largest

    # --- allocation bookkeeping -----------------------------------------------------------------

    def _alloc(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        t = torch.empty(shape, dtype=dtype, device=self.device)
        self.num_allocs += 1
        self.alloc_bytes += t.numel() * t.element_size()
        return t

    def counter(self) -> tuple[int, int]:
        """Cumulative ``(tensors, bytes)`` allocated (the simulated graph recorder's counter)."""
        return self.num_allocs, self.alloc_bytes

    def _dequant_specs(self, kind: str) -> list[tuple[tuple[int, ...], torch.dtype]]:
        nb, rows = self.swa_pool
        specs: list[tuple[tuple[int, ...], torch.dtype]] = [
            ((nb, rows, 1, D_HEAD), torch.bfloat16), ((nb, rows, 1, D_HEAD), torch.float8_e4m3fn)]
        if kind in self.extra_pools:
            enb, erows = self.extra_pools[kind]
            specs += [((enb, erows, 1, D_HEAD), torch.bfloat16),
                      ((enb, erows, 1, D_HEAD), torch.float8_e4m3fn)]
        return specs

    # --- what the policy holds -----------------------------------------------------------------

    @property
    def workspace(self) -> Workspace:
        return self._ws

    @property
    def io_bytes(self) -> int:
        """Catalog bytes of the shared scope scratch (0 for per-step)."""
        return sum(s.catalog_bytes for s in (self._swa, self._extra) if s is not None)

    @property
    def extra_bytes(self) -> int:
        return sum(s.extra_bytes for s in (self._swa, self._extra) if s is not None)

    @property
    def held_bytes(self) -> int:
        """Catalog bytes held between steps: shared = scope scratch + dequant workspace."""
        return self.io_bytes + self._ws.size_bytes

    def tracked(self) -> dict[str, int]:
        """``data_ptr()`` of every scratch buffer, by name (per-step: those of the last calls)."""
        out = dict(self._ptrs)
        for name, s in (("swa", self._swa), ("extra", self._extra)):
            if s is not None:
                out.update({f"{name}.{k}": t.data_ptr() for k, t in s.tensors().items()})
        if self._ws.size_bytes:
            out["dequant_workspace"] = self._ws.data_ptr()
        return out

    # --- one layer ------------------------------------------------------------------------------

    def decode_layer(self, layer: int, kind: str, q: torch.Tensor, scale: float,
                     swa_cache: torch.Tensor, swa_idx: torch.Tensor, swa_lens: torch.Tensor,
                     extra_cache: torch.Tensor | None, extra_idx: torch.Tensor | None,
                     extra_lens: torch.Tensor | None, out: torch.Tensor, *,
                     use_triton: bool | None = None) -> torch.Tensor:
        """Decode one layer into ``out`` ``(T, H, 512)``."""
        has_extra = kind != "SWA-only"
        if has_extra and (extra_cache is None or extra_idx is None or extra_lens is None):
            raise ValueError(f"a {kind} layer needs its compressed cache, indices and lens")
        n0, b0 = self.num_allocs, self.alloc_bytes
        if self.policy == "shared":
            self._ws.lock()  # a larger call than reserved must not regrow under a graph
            bufs = self._ws.get_simultaneous(*self._dequant_specs(kind))
            swa_s, extra_s = self._swa, self._extra
        else:
            bufs = [self._alloc(shape, dt) for shape, dt in self._dequant_specs(kind)]
            swa_s = ScopeScratch(self.tokens, self.heads, self.swa_topk, self.device,
                                 alloc=self._alloc)
            extra_s = None
            if has_extra:
                assert extra_idx is not None
                extra_s = ScopeScratch(self.tokens, self.heads, extra_idx.shape[1],
                                       self.device, alloc=self._alloc)
        assert swa_s is not None
        swa_bf16, swa_fp8 = bufs[0], bufs[1]
        dequantize_pool(swa_cache, out=swa_bf16, use_triton=use_triton)
        swa_fp8.copy_(swa_bf16)
        o1, l1 = sparse_mla_decode(q, swa_bf16[:, :, 0], swa_idx, swa_lens, scale,
                                   scratch=swa_s, use_triton=use_triton)
        if has_extra:
            assert extra_cache is not None and extra_idx is not None and extra_lens is not None
            assert extra_s is not None
            ex_bf16, ex_fp8 = bufs[2], bufs[3]
            dequantize_pool(extra_cache, out=ex_bf16, use_triton=use_triton)
            ex_fp8.copy_(ex_bf16)
            o2, l2 = sparse_mla_decode(q, ex_bf16[:, :, 0], extra_idx, extra_lens, scale,
                                       scratch=extra_s, use_triton=use_triton)
            merge_scopes(o1, l1, o2, l2, out, use_triton=use_triton)
        else:
            out.copy_(o1)
        if self.policy == "per-step":
            scopes = [s for s in (swa_s, extra_s) if s is not None]
            extra = sum(s.extra_bytes for s in scopes)
            self.last_call_extra = extra
            self.last_call_bytes = self.alloc_bytes - b0 - extra
            names = ["dequant.swa_bf16", "dequant.swa_fp8", "dequant.extra_bf16",
                     "dequant.extra_fp8"]
            self._ptrs.update({f"L{layer}.{n}": t.data_ptr() for n, t in zip(names, bufs,
                                                                              strict=False)})
            for sname, s in (("swa", swa_s), ("extra", extra_s)):
                if s is not None:
                    self._ptrs.update({f"L{layer}.{sname}.{k}": t.data_ptr()
                                       for k, t in s.tensors().items()})
        del n0
        return out

    def release(self) -> None:
        self._swa = self._extra = None
        self._ws = Workspace(self.device, name="dsv4_dequant")
        self._ptrs.clear()

"""One rank of a deployment in PyTorch at its true shapes: its persistent tensors (weights, KV
cache, scratch) allocated as the engine allocates them, and forward passes whose tensors have the
engine's shapes and lifetimes.

Weights are allocated, never loaded (``torch.empty``; uninitialised). Linears whose weight is in
the model dtype run for real (``F.linear``: the output and cuBLAS's own workspace are real). fp8
block-quantised linears, MLA and the fused MoE launch one kernel per kernel vLLM launches for
them in a decode step (``memprof.core.terms.cudagraph``'s node counts, vLLM 0.11.0 sources named
at each method), each allocating what vLLM's kernel allocates: where torch has a kernel of the
same kind it runs (a real fp8 ``torch._scaled_mm``, ``torch.bmm``, ``torch.topk``, a sum over the
top-k rows; the fused MoE's grouped expert GEMMs as bf16 ``torch.mm`` of the same shapes into
its caches), where it has none a single plain write of the kernel's output stands for it (a cast
for a quantisation kernel whose scales stay unwritten, a ``fill_`` for FlashMLA's split-KV
and combine kernels and for the block alignment, an elementwise product for SiLU-and-mul, an
in-place product with the norm weight for an RMSNorm). Weights being uninitialised, a GEMM whose
operand vLLM gathers or fuses (the fused q_a/kv_a projection, the first grouped expert GEMM)
reads a view of another fp8 weight of the layer of the right shape. Other quantised linears
(MXFP4, NVFP4, AWQ/GPTQ) and the other attention kinds are *modelled*: they allocate their
outputs at the shapes vLLM's kernels return, without running the kernel. Norms and residual adds
of the GQA path are fused and in place, as vLLM's ``RMSNorm`` with a residual
(``fused_add_rms_norm``) is. Collectives of a rank traced alone become a local op with the same
output allocation (an out-of-place all-reduce is a copy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from memprof.core.attention import kind_of
from memprof.core.components import TermContext
from memprof.core.dtypes import DTYPES
from memprof.core.engines.vllm_runner import (
    FLASHINFER_ROW_STATES,
    GUMBEL_BLOCK,
    sampler_state_tensors,
)
from memprof.core.kvcache import rank_layers
from memprof.core.models import Layer
from memprof.core.terms.activation import (
    MOE_ALIGN_BLOCK_M,
    SAMPLER_TRITON_MIN_ROWS,
    V2_SAMPLER_STATE_ROW,
    _moe_dims,
    fused_moe_rows,
    mla_chunked_prefill_rows,
    sampler_triton_buffer_rows,
    v2_warmup_flashinfer,
    v2_warmup_pass,
)
from memprof.core.terms.allocations import Allocation
from memprof.core.terms.common import max_seqs, profile_tokens
from memprof.core.terms.runner_v2_profile import v2_own_profile
from memprof.trace.sglang_capture import logits_in_graph, logits_plan

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "int8": torch.int8,
    "bool": torch.bool, "float8_e4m3fn": torch.float8_e4m3fn,
}
for _long, (_b, _short) in DTYPES.items():
    TORCH_DTYPES.setdefault(_short, TORCH_DTYPES[_long])


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[name]


def _flat(t: torch.Tensor, n: int) -> torch.Tensor:
    """The first ``n`` elements of ``t`` as a 1-D view (``narrow``: slicing a fake CUDA tensor
    needs a CUDA build)."""
    return t.view(-1).narrow(0, 0, n)


def _bf16_view(t: torch.Tensor, n: int) -> torch.Tensor | None:
    """The first ``n`` bf16 elements of ``t``'s storage as a 1-D view, None if it holds fewer."""
    flat = t.view(-1).view(torch.bfloat16) if t.element_size() == 1 else t.view(-1)
    return flat.narrow(0, 0, n) if flat.dtype == torch.bfloat16 and flat.numel() >= n else None


def _first(scale: torch.Tensor) -> torch.Tensor:
    """A one-element view of a scale tensor: ``torch._scaled_mm``'s tensor-wise scale."""
    return _flat(scale, 1)


Charge = Callable[[str], object]  # tracker.charge(component) context manager
MOE_WORKSPACE = "fused-MoE workspace (WorkspaceManager)"  # the estimate's row


@dataclass
class Replica:
    """The rank's live tensors, by allocation name, and what the forward needs to find them."""

    ctx: TermContext
    device: torch.device
    charge: Callable[[str], object]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    lazy: list[Allocation] = field(default_factory=list)  # scratch allocated at first decode
    # PIECEWISE capture: called where vLLM's piecewise backend splits the compiled graph (at each
    # attention op, vllm/compilation/backends.py ``split_graph`` on the splitting ops), so the
    # capture ends one piece's graph there and begins the next; None otherwise
    piece_break: Callable[[], None] | None = None
    # PIECEWISE capture: ends the piece, runs the given kernels of an attention op eagerly (vLLM
    # runs its splitting ops outside the piece graphs) and begins the next piece; None: they
    # run where ``piece_break`` is called
    piece_gap: Callable[[Callable[[], None]], None] | None = None
    group: Any = None  # a communicator (``all_reduce(x)`` → a new tensor), or None (local)
    on_layer: Callable[[int, int], None] | None = None  # (layers done, layers) during a forward

    @property
    def dtype(self) -> torch.dtype:
        return torch_dtype(self.ctx.model_dtype)

    def allocate(self, allocs: list[Allocation], zero: bool = False) -> None:
        """Allocate ``allocs`` in order, each charged to its (first) component."""
        for a in allocs:
            with self.charge(a.component):  # type: ignore[attr-defined]
                make = torch.zeros if zero else torch.empty
                self.tensors[a.name] = make(a.shape, dtype=torch_dtype(a.dtype),
                                            device=self.device)

    # --- linears -------------------------------------------------------------------------------
    def weight(self, module: str, layer: int | None) -> torch.Tensor | None:
        name = (f"model.layers.{layer}.{module}.weight" if layer is not None
                else f"{module}.weight")
        return self.tensors.get(name)

    def linear(self, x: torch.Tensor, module: str, layer: int | None, out: int,
               operand: bool = False) -> torch.Tensor:
        """``x @ Wᵀ``: real when W is a model-dtype matrix of the right shape; an fp8 block
        linear's kernels when W is fp8 with a block scale (``fp8_linear``; ``operand``: W may be
        absent, a fused projection vLLM keeps as one weight and the catalog as two, and the GEMM
        reads an fp8 view of the layer's weights); else an output of the kernel's shape
        (quantised GEMM modelled)."""
        w = self.weight(module, layer)
        if w is not None and w.dtype == x.dtype and w.dim() == 2 and w.shape[1] == x.shape[-1]:
            return F.linear(x, w)
        scale = (self.tensors.get(f"model.layers.{layer}.{module}.weight_scale_inv")
                 if layer is not None else None)
        if w is not None and w.dtype == torch.float8_e4m3fn and scale is not None and \
                w.dim() == 2 and w.shape[1] == x.shape[-1]:
            return self.fp8_linear(x, w, scale)
        if operand and layer is not None:
            view = self._fp8_operand(layer, out, x.shape[-1])
            if view is not None:
                return self.fp8_linear(x, view[0], view[1])
        return torch.empty(x.shape[0], out, dtype=x.dtype, device=x.device)

    def fp8_linear(self, x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """vLLM 0.11.0 ``apply_w8a8_block_fp8_linear`` (model_executor/layers/quantization/utils/
        fp8_utils.py, CUTLASS path): on SM90 ``F.pad`` of the rows to the next multiple of 4
        (4 more when already a multiple: ``num_pad = 4 - rows % 4``; ATen's CUDA
        ``constant_pad_nd`` is a fill and a copy, done so here), ``per_token_group_fp8_quant``
        (fp8 values and column-major fp32 scales, one kernel: a cast copy writes the values,
        the scales stay unwritten), the block-scaled GEMM (a tensor-scaled
        ``torch._scaled_mm`` of the same operands and output), then the unpadded view."""
        t, k = x.shape
        src, pad = x, 0
        if self.ctx.gpu.arch.startswith("sm90"):
            pad = 4 - t % 4
            src = torch.empty(t + pad, k, dtype=x.dtype, device=x.device)
            src.fill_(0)
            torch.add(x, 0, out=src.narrow(0, 0, t))  # the pad's copy
        rows = t + pad
        xq = src.to(torch.float8_e4m3fn)
        xs = torch.empty(-(-k // 128), rows, dtype=torch.float32, device=x.device)
        del src
        n = w.shape[0]
        if k % 16 or n % 16:  # outside _scaled_mm's shapes: the output written plainly
            y = torch.empty(rows, n, dtype=x.dtype, device=x.device)
            y.fill_(0)
        else:
            y = torch._scaled_mm(xq, w.t(), scale_a=_first(xs),
                                 scale_b=_first(scale), out_dtype=x.dtype)
        del xq, xs
        return y.narrow(0, 0, t) if pad else y

    def _fp8_operand(self, layer: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """An [n, k] fp8 view of one of the layer's fp8 weights (with its scale), for a GEMM
        whose weight the catalog does not hold in vLLM's fused layout; None if none is large
        enough."""
        key = (layer, n, k)
        if key not in self._operands:
            found = None
            prefix = f"model.layers.{layer}."
            for name, t in self.tensors.items():
                if name.startswith(prefix) and isinstance(t, torch.Tensor) and \
                        t.dtype == torch.float8_e4m3fn and t.numel() >= n * k:
                    sc = self.tensors.get(name + "_scale_inv",
                                          self.tensors.get(name.removesuffix(".weight")
                                                           + ".weight_scale_inv"))
                    if sc is not None:
                        found = (_flat(t, n * k).view(n, k), sc)
                        break
            self._operands[key] = found
        return self._operands[key]

    def norm(self, x: torch.Tensor, module: str, layer: int, in_place: bool) -> torch.Tensor:
        """An RMSNorm (vLLM's ``fused_add_rms_norm`` in place, or ``rms_norm`` into a new tensor:
        one kernel): the product with the norm weight, in place or into a new tensor."""
        w = self.weight(module, layer)
        if w is None or w.shape[-1] != x.shape[-1] or w.dtype != x.dtype:
            return x.mul_(1.0) if in_place else torch.mul(x, 1.0)
        return x.mul_(w) if in_place else torch.mul(x, w)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """TP>1: vLLM's out-of-place all-reduce returns a new tensor. With a real communicator
        (``group``: under torchrun, vLLM's PyNccl shape, ``memprof.trace.pynccl``; a world of 1
        on one GPU) the sum runs over it; a rank traced alone gets the same output allocation
        from a local copy."""
        if self.group is not None:
            out: torch.Tensor = self.group.all_reduce(x)
            return out
        if self.ctx.dep.tp <= 1:
            return x
        return x.clone()

    # --- blocks --------------------------------------------------------------------------------
    def attention(self, x: torch.Tensor, layer: Layer, decode: bool) -> torch.Tensor:
        """The layer's attention block: the one its kind's ``replica`` names."""
        block = {"qkv": self._qkv_attention, "latent": self._latent_attention,
                 "projections": self._projected_attention}[kind_of(layer.attention).replica]
        return self.all_reduce(block(x, layer, decode))

    def _qkv_attention(self, x: torch.Tensor, layer: Layer, decode: bool) -> torch.Tensor:
        """Per-head Q, K and V (GQA): the fused QKV projection, q/k norms, the output."""
        a, i, tp = layer.attention, layer.index, self.ctx.dep.tp
        t, h = x.shape[0], self.ctx.spec.hidden_size
        hl = max(1, a.num_heads // tp)
        kvl = max(1, a.num_kv_heads // tp)
        qkv = self.linear(x, "self_attn.qkv_proj(q)", i, (hl + 2 * kvl) * a.head_dim)
        if a.qk_norm:  # Qwen3 q/k norms are out of place
            qn = torch.empty(t, hl * a.head_dim, dtype=x.dtype, device=x.device)
            kn = torch.empty(t, kvl * a.head_dim, dtype=x.dtype, device=x.device)
            del qn, kn
        # profile run: FlashAttentionImpl.forward without metadata returns output.fill_(0)
        out = torch.zeros(t, hl * a.v_head_dim, dtype=x.dtype, device=x.device)
        if decode:
            self.decode_scratch(i)
        self._split()
        # qkv is a local of LlamaAttention.forward: alive until o_proj has run
        o = self.linear(out, "self_attn.o_proj", i, h)
        del qkv
        del out
        return o

    def _latent_attention(self, x: torch.Tensor, layer: Layer, decode: bool) -> torch.Tensor:
        """Latent attention (MLA), vLLM 0.11.0 vllm/model_executor/layers/mla.py
        ``MultiHeadLatentAttention.forward_native``: the input fused add+RMSNorm, the fused
        q_a/kv_a projection (kv_a and q_proj without a q LoRA), the q_a and kv_a RMSNorms, q_b,
        the rotary kernel on q's rope part (in place), the attention output buffer, the
        attention op (``_mla_op``: eager between PIECEWISE pieces), o_proj."""
        a, i, tp = layer.attention, layer.index, self.ctx.dep.tp
        t, h = x.shape[0], self.ctx.spec.hidden_size
        hl = max(1, a.num_heads // tp)
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        latent = a.kv_lora_rank + a.qk_rope_head_dim
        self.norm(x, "input_layernorm", i, in_place=True)
        if a.q_lora_rank:
            qkv = self.linear(x, "self_attn.fused_qkv_a_proj", i, a.q_lora_rank + latent,
                              operand=True)
            q_c = self.norm(qkv.narrow(1, 0, a.q_lora_rank), "self_attn.q_a_layernorm", i,
                            in_place=False)
            q = self.linear(q_c, "self_attn.q_b_proj", i, hl * qk)
            del q_c
            kv = qkv.narrow(1, a.q_lora_rank, latent)
        else:
            qkv = self.linear(x, "self_attn.kv_a_proj_with_mqa", i, latent)
            q = self.linear(x, "self_attn.q_proj", i, hl * qk)
            kv = qkv
        kv_c = self.norm(kv.narrow(1, 0, a.kv_lora_rank), "self_attn.kv_a_layernorm", i,
                         in_place=False)
        # the rotary kernel, in place on q's rope part
        q.view(t, hl, qk).narrow(2, a.qk_nope_head_dim, a.qk_rope_head_dim).mul_(1.0)
        out = torch.empty(t, hl * a.v_head_dim, dtype=x.dtype, device=x.device)
        self._split(functools.partial(self._mla_op, q, kv_c, out, layer, decode))
        del q, kv, qkv, kv_c
        o = self.linear(out, "self_attn.o_proj", i, h)
        del out
        return o

    def _mla_op(self, q: torch.Tensor, kv_c: torch.Tensor, out: torch.Tensor, layer: Layer,
                decode: bool) -> None:
        """vLLM's MLA attention op (0.11.0 vllm/v1/attention/backends/mla/common.py
        ``MLACommonImpl.forward``, flashmla.py ``_forward_decode``). Profile run (no metadata):
        the worst-case kv_b output ``[W, heads, nope + v]`` (W = the chunked-prefill rows),
        then ``output.fill_(0)``. Decode: ``concat_and_cache_mla`` (a copy of the latent into
        the layer's KV cache), the W_UK_T bmm into a new [heads, B, kv_lora], the ``torch.cat``
        of the absorbed q with q_pe, FlashMLA's split-KV and combine kernels (the output
        [B, heads, kv_lora] and the fp32 LSE written plainly), and the W_UV bmm into the
        output buffer (``_v_up_proj``)."""
        a, i = layer.attention, layer.index
        t, hl = q.shape[0], out.shape[1] // a.v_head_dim
        if not decode:
            w = mla_chunked_prefill_rows(self.ctx)
            worst = torch.empty(w, hl, a.qk_nope_head_dim + a.v_head_dim, dtype=q.dtype,
                                device=q.device)
            del worst
            out.fill_(0)
            return
        self.decode_scratch(i)
        cache = self._kv_cache_of(i)
        if cache is not None:
            esz = kv_c.element_size()
            dst = _flat(cache, t * a.kv_lora_rank * esz).view(kv_c.dtype)
            torch.add(kv_c, 0, out=dst.view(t, a.kv_lora_rank))
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q3 = q.view(t, hl, qk)
        w_uk, w_uv = self._absorbed(layer, hl)
        ql = torch.empty(hl, t, a.kv_lora_rank, dtype=q.dtype, device=q.device)
        if w_uk is not None:
            torch.bmm(q3.narrow(2, 0, a.qk_nope_head_dim).transpose(0, 1), w_uk, out=ql)
        else:
            ql.fill_(0)
        qcat = torch.cat([ql.transpose(0, 1),
                          q3.narrow(2, a.qk_nope_head_dim, a.qk_rope_head_dim)], dim=-1)
        del ql
        o_lat = torch.empty(t, hl, a.kv_lora_rank, dtype=q.dtype, device=q.device)
        lse = torch.empty(t, hl, dtype=torch.float32, device=q.device)
        o_lat.fill_(0)
        lse.fill_(0)
        del qcat
        if w_uv is not None:
            torch.bmm(o_lat.transpose(0, 1), w_uv,
                      out=out.view(t, hl, a.v_head_dim).transpose(0, 1))
        else:
            out.fill_(0)
        del o_lat, lse

    def _absorbed(self, layer: Layer,
                  hl: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Views of the layer's absorbed W_UK_T [heads, nope, kv_lora] and W_UV [heads, kv_lora,
        v] in the one tensor the catalog holds for both (``mla_attn.W_UK_T+W_UV``)."""
        a = layer.attention
        both = next((t for n, t in self.tensors.items()
                     if n.startswith(f"model.layers.{layer.index}.") and "W_UK_T+W_UV" in n),
                    None)
        uk = a.qk_nope_head_dim * a.kv_lora_rank
        uv = a.kv_lora_rank * a.v_head_dim
        if both is None or both.shape[0] != hl or both.select(0, 0).numel() != uk + uv:
            return None, None
        flat = both.view(hl, -1)
        return (flat.narrow(1, 0, uk).view(hl, a.qk_nope_head_dim, a.kv_lora_rank),
                flat.narrow(1, uk, uv).view(hl, a.kv_lora_rank, a.v_head_dim))

    def _kv_cache_of(self, layer: int) -> torch.Tensor | None:
        """The layer's KV cache tensor where the rank holds one per layer (``kv_cache[j]`` for
        its j-th layer), else None."""
        layers = [x.index for x in rank_layers(self.ctx.spec, self.ctx.dep, self.ctx.coord)]
        if f"kv_cache[{len(layers)}]" in self.tensors or layer not in layers:
            return None
        t = self.tensors.get(f"kv_cache[{layers.index(layer)}]")
        return t if isinstance(t, torch.Tensor) else None

    def _projected_attention(self, x: torch.Tensor, layer: Layer, decode: bool) -> torch.Tensor:
        """DeepSeek-V4's compressed sparse attention at the shapes of its projections, one
        kernel per node the graph model counts for it (``cudagraph.GRAPH_NODES_ATTENTION``
        "dsv4": six GEMMs, four other kernels): the input fused add+RMSNorm, wq_a, the q RMSNorm,
        wq_b, wkv, the kv RMSNorm (in place), the compressor's wkv_wgate where the layer has
        one, the rotary kernel (in place on q), the attention op (``_sparse_op``: eager between
        PIECEWISE pieces), then the grouped output projection wo_a (a GEMM of its output's
        shape over one group's input) and wo_b. Each projection runs as ``linear`` runs it (fp8
        block: vLLM's kernels; bf16: real)."""
        a, i, tp = layer.attention, layer.index, self.ctx.dep.tp
        t, h = x.shape[0], self.ctx.spec.hidden_size
        hl = max(1, a.num_heads // tp)
        self.norm(x, "input_layernorm", i, in_place=True)
        q_c = self.norm(self._proj(x, "attn.wq_a", i, a.q_lora_rank or h), "attn.q_norm", i,
                        in_place=False)
        q = self._proj(q_c, "attn.wq_b", i, hl * a.head_dim)
        del q_c
        kv = self.norm(self._proj(x, "attn.wkv", i, a.head_dim), "attn.kv_norm", i,
                       in_place=True)
        if self.weight("attn.compressor.wkv_wgate", i) is not None:
            comp = self._proj(x, "attn.compressor.wkv_wgate", i, 2 * a.head_dim)
            del comp
        q.mul_(1.0)  # the rotary kernel, in place
        out = torch.empty(t, max(hl, 64) * a.head_dim, dtype=x.dtype, device=x.device)
        self._split(functools.partial(self._sparse_op, kv, out, layer, decode))
        del q, kv
        o_a = self._proj(out, "attn.wo_a", i, (a.o_groups or 1) * (a.o_lora_rank or h))
        del out
        o = self._proj(o_a, "attn.wo_b", i, h)
        del o_a
        return o

    def _proj(self, x: torch.Tensor, module: str, layer: int, out: int) -> torch.Tensor:
        """``linear`` over the first columns of ``x`` that the weight takes (its input width)
        where the weight is narrower than ``x`` (a grouped projection: one group's input)."""
        w = self.weight(module, layer)
        if w is not None and w.dim() == 2 and w.shape[1] < x.shape[-1]:
            x = x.narrow(1, 0, w.shape[1])
        return self.linear(x, module, layer, w.shape[0] if w is not None and w.dim() == 2
                           else out)

    def _sparse_op(self, kv: torch.Tensor, out: torch.Tensor, layer: Layer,
                   decode: bool) -> None:
        """DeepSeek-V4's attention op, the two kernels the graph model counts for an attention
        op (``cudagraph.GRAPH_NODES_ATTENTION_KERNELS``): at decode the cache write (a copy of
        the layer's kv into the rank's KV cache) and the decode kernel (its output written
        plainly); in the profile run the output alone (its prefill scratch is the catalog's)."""
        if decode:
            self.decode_scratch(layer.index)
            cache = self._kv_cache_of(layer.index)
            if cache is None:
                cache = self.tensors.get("kv_cache[0]")
            n = kv.numel() * kv.element_size()
            if isinstance(cache, torch.Tensor) and cache.element_size() == 1 and \
                    cache.numel() >= n:
                torch.add(kv, 0, out=_flat(cache, n).view(kv.dtype).view(kv.shape))
            else:
                kv.add_(0)  # the cache write, where the rank holds no byte cache to write
        out.fill_(0)

    def _split(self, op: Callable[[], None] | None = None) -> None:
        """The attention op runs here, between two pieces of a PIECEWISE capture: ``op``, its
        kernels where the replica launches them (eagerly, outside the pieces, through
        ``piece_gap``; inline in a FULL graph or eager forward)."""
        if self.piece_break is None:
            if op is not None:
                op()
            return
        if op is not None and self.piece_gap is not None:
            self.piece_gap(op)
            return
        self.piece_break()
        if op is not None:
            op()

    def mlp(self, x: torch.Tensor, layer: Layer) -> torch.Tensor:
        m, i, dep = layer.mlp, layer.index, self.ctx.dep
        t, h = x.shape[0], self.ctx.spec.hidden_size
        if m.kind == "dense":
            il = m.intermediate_size // dep.tp
            fp8 = self._fp8(i, "mlp.gate_up_proj")
            if fp8:
                # the fp8 path launches vLLM's kernels: the post-attention fused add+RMSNorm
                # before gate_up, SiluAndMul (one kernel) after (deepseek_v2.py DeepseekV2MLP)
                self.norm(x, "post_attention_layernorm", i, in_place=True)
            gu = self.linear(x, "mlp.gate_up_proj", i, 2 * il)
            if fp8:
                act = torch.mul(gu.narrow(1, 0, il), gu.narrow(1, il, il))
            else:
                act = torch.empty(t, il, dtype=x.dtype, device=x.device)  # SiluAndMul output
            # gate_up is a local of LlamaMLP.forward: alive until down_proj has run
            d = self.linear(act, "mlp.down_proj", i, h)
            del act, gu
            return self.all_reduce(d)
        if self._fused_experts(i):
            return self.all_reduce(self._fused_moe(x, layer))
        mt = t * dep.dp if dep.dp > 1 else t
        logits = torch.empty(mt, m.num_experts, dtype=torch.float32, device=x.device)
        topk = torch.empty(mt, m.top_k, dtype=torch.int32, device=x.device)
        weights = torch.empty(mt, m.top_k, dtype=torch.float32, device=x.device)
        del logits
        out = torch.empty(mt, h, dtype=x.dtype, device=x.device)  # fused-MoE kernel modelled
        del topk, weights
        if dep.dp > 1:
            local = torch.empty(t, h, dtype=x.dtype, device=x.device)  # reduce-scatter
            del out
            out = local
        return self.all_reduce(out)

    def _fused_experts(self, layer: int) -> bool:
        """The layer's experts are held as one-byte tensors (fp8, or packed fp4) with a scale:
        vLLM's fused MoE, whose Triton path ``_fused_moe`` launches (the workspace the estimate
        sizes, ``TritonExperts.workspace_shapes``)."""
        w = self.tensors.get(f"model.layers.{layer}.mlp.experts.w13_weight")
        return isinstance(w, torch.Tensor) and w.element_size() == 1 and any(
            f"model.layers.{layer}.mlp.experts.w13_weight{s}" in self.tensors
            for s in ("_scale", "_scale_inv"))

    def _fp8(self, layer: int, module: str) -> bool:
        """The layer's ``module`` weight is fp8 with a block scale."""
        w = self.tensors.get(f"model.layers.{layer}.{module}.weight",
                             self.tensors.get(f"model.layers.{layer}.{module}_weight"))
        return isinstance(w, torch.Tensor) and w.dtype == torch.float8_e4m3fn

    def _fused_moe(self, x: torch.Tensor, layer: Layer) -> torch.Tensor:
        """The fp8 block fused MoE on vLLM's Triton path (0.11.0
        model_executor/models/deepseek_v2.py ``DeepseekV2MoE.forward``; fused_moe/fused_moe.py
        ``fused_topk`` / ``fused_grouped_topk`` and ``fused_experts_impl``): the post-attention
        fused add+RMSNorm; the router GEMM (real); the shared expert (gate_up, SiluAndMul,
        down) first, its output alone kept (as ``memprof.core.terms.activation`` models it);
        the routing (noaux_tc: sigmoid, + e_score_correction_bias, the cast back, the grouped
        top-k as a real ``torch.topk``, the weights' fp32 cast; else ``topk_softmax`` as one
        ``torch.topk``); the input's quantisation; ``moe_align_block_size``'s sorted ids and
        expert ids (written plainly: one fill per kernel, two with more than 64 experts); the
        two grouped GEMMs as bf16 ``torch.mm`` into the caches (``out=``); SiluAndMul between
        them (one elementwise product) and the second quantisation; ``moe_sum`` as a sum over
        the top-k rows into the output; the scale-and-add of the shared output (one in-place
        kernel). The caches are views of the persistent workspaces
        (``TritonExperts.workspace_shapes``: intermediate_cache1 and 3 in workspace2,
        intermediate_cache2 in workspace13, vLLM@52a31cc ``WorkspaceManager``), allocated at
        the first call and charged to the estimate's row."""
        m, i, dep = layer.mlp, layer.index, self.ctx.dep
        t, h = x.shape[0], self.ctx.spec.hidden_size
        dev, dt = x.device, x.dtype
        k = m.top_k
        rows, il, el = _moe_dims(self.ctx, layer, t)
        self.norm(x, "post_attention_layernorm", i, in_place=True)
        logits = self.linear(x, "mlp.gate", i, m.num_experts)
        shared = None
        sh = m.shared_intermediate_size // dep.tp
        if sh:
            gu = self.linear(x, "mlp.shared_experts.gate_up_proj", i, 2 * sh)
            act = torch.mul(gu.narrow(1, 0, sh), gu.narrow(1, sh, sh))
            del gu
            shared = self.linear(act, "mlp.shared_experts.down_proj", i, h)
            del act
        local = x
        if rows != t:  # DP: every DP rank's tokens and logits gathered (modelled: no kernel)
            x = torch.empty(rows, h, dtype=dt, device=dev)
            gathered = torch.empty(rows, m.num_experts, dtype=logits.dtype, device=dev)
            del logits
            logits = gathered
        bias = self.weight("mlp.gate.e_score_correction_bias", i)
        if m.e_score_correction_bias and bias is not None:
            scores = torch.sigmoid(logits)
            biased = scores + bias
            cast = biased.to(scores.dtype)
            del biased
            vals, ids = torch.topk(cast, k, dim=-1, sorted=False)
            del cast
            weights = vals.to(torch.float32)
            del vals, scores
        else:
            weights, ids = torch.topk(logits, k, dim=-1, sorted=False)
        del logits
        ws13, ws2 = self._moe_workspaces(layer)
        w13 = self.tensors[f"model.layers.{i}.mlp.experts.w13_weight"]
        w2 = self.tensors[f"model.layers.{i}.mlp.experts.w2_weight"]
        out = torch.empty(rows, h, dtype=dt, device=dev)
        chunk = max(1, fused_moe_rows(rows, dep.engine_version))
        for start in range(0, rows, chunk):  # fused_experts_impl's loop over chunks
            n = min(chunk, rows - start)
            xq = x.narrow(0, start, n).to(torch.float8_e4m3fn)
            xs = torch.empty(n, -(-h // 128), dtype=torch.float32, device=dev)
            padded = n * k + el * (MOE_ALIGN_BLOCK_M - 1)
            sorted_ids = torch.empty(padded, dtype=torch.int32, device=dev)
            expert_ids = torch.empty(-(-padded // MOE_ALIGN_BLOCK_M), dtype=torch.int32,
                                     device=dev)
            post_pad = torch.empty(1, dtype=torch.int32, device=dev)
            sorted_ids.fill_(n * k)
            if m.num_experts > 64:
                expert_ids.fill_(0)
            if dep.enable_expert_parallel and dep.ep_size > 1:
                expert_ids.add_(0)  # expert_ids = expert_map[expert_ids]: written plainly
            cache1 = _flat(ws2, n * k * 2 * il).view(n * k, 2 * il)
            cache2 = _flat(ws13, n * k * il).view(n * k, il)
            cache3 = _flat(ws2, n * k * h).view(n * k, h)
            # the Triton kernel gathers its fp8 A rows through sorted_ids and reads each
            # expert's quantised block; torch has no such kernel: a bf16 GEMM of the same
            # shapes into the same cache (``out=``), its operands bf16 views of the experts'
            # (uninitialised) weights (the second's A is the activation's output itself)
            b1 = _bf16_view(w13, 2 * il * h)
            a1 = _bf16_view(w13, n * k * h)
            if a1 is not None and b1 is not None:
                torch.mm(a1.view(n * k, h), b1.view(2 * il, h).t(), out=cache1)
            else:
                cache1.fill_(0)
            del xq, xs
            torch.mul(cache1.narrow(1, 0, il), cache1.narrow(1, il, il), out=cache2)
            q2 = cache2.to(torch.float8_e4m3fn)  # the second quantisation (scales unwritten)
            q2s = torch.empty(n * k, -(-il // 128), dtype=torch.float32, device=dev)
            b2 = _bf16_view(w2, h * il)
            if b2 is not None:
                torch.mm(cache2, b2.view(h, il).t(), out=cache3)
            else:
                cache3.fill_(0)
            del q2, q2s
            torch.sum(cache3.view(n, k, h), dim=1, out=out.narrow(0, start, n))
            del sorted_ids, expert_ids, post_pad
        del weights, ids
        if rows != t:  # DP: the reduce-scatter back to this rank's tokens (modelled)
            del x
            out = torch.empty(t, h, dtype=dt, device=dev)
        del local
        if shared is not None:
            out.add_(shared)  # final *= routed_scaling_factor; final += shared: one kernel
            del shared
        return out

    def _moe_workspaces(self, layer: Layer) -> tuple[torch.Tensor, torch.Tensor]:
        """The fused MoE's workspace13 ``(M, top_k, max(I, H))`` and workspace2
        ``(M, top_k, max(2I, H))`` (model dtype, M = the profile run's tokens capped at
        ``VLLM_FUSED_MOE_CHUNK_SIZE`` up to 0.17.x: ``fused_moe_rows``), made at the first MoE
        call and kept: the ``WorkspaceManager`` buffer the estimate's "fused-MoE workspace
        (WorkspaceManager)" row sizes (``memprof.core.terms.activation.moe_workspace_bytes``)."""
        if "_moe_ws13" not in self.tensors:
            m, h = layer.mlp, self.ctx.spec.hidden_size
            tokens = profile_tokens(self.ctx.dep)
            mt, il, _e = _moe_dims(self.ctx, layer, tokens)
            mc = fused_moe_rows(mt, self.ctx.dep.engine_version)
            with self.charge(MOE_WORKSPACE):  # type: ignore[attr-defined]
                self.tensors["_moe_ws13"] = torch.empty(mc * m.top_k * max(il, h),
                                                        dtype=self.dtype, device=self.device)
                self.tensors["_moe_ws2"] = torch.empty(mc * m.top_k * max(2 * il, h),
                                                       dtype=self.dtype, device=self.device)
        return self.tensors["_moe_ws13"], self.tensors["_moe_ws2"]

    def decode_scratch(self, layer: int) -> None:
        """At a layer's first decode the backend allocates its lazy buffers (the catalog's shapes
        and dtypes): the next per-layer copy of each per-layer buffer, and the shared ones once.
        Per-layer copies are handed out in layer order (``name[i]`` is the i-th layer's)."""
        del layer
        if not self._pending:
            groups: dict[str, list[list[Allocation]]] = {}
            for a in self.lazy:
                base, _, rest = a.name.partition("[")
                n = int(rest.split("]")[0]) if rest and rest.split("]")[0].isdigit() else 0
                copies = groups.setdefault(base, [])
                while len(copies) <= n:
                    copies.append([])
                copies[n].append(a)
            self._pending = [c for group in groups.values() for c in [group]]
        for group in self._pending:
            for copy in group:
                if copy and copy[0].name not in self.tensors:
                    self.allocate(copy, zero=True)
                    break

    _pending: list[list[list[Allocation]]] = field(default_factory=list)
    _operands: dict[tuple[int, int, int], tuple[torch.Tensor, torch.Tensor] | None] = field(
        default_factory=dict)

    # --- forwards ------------------------------------------------------------------------------
    def forward(self, tokens: int, rows: int, decode: bool = False,
                logits_max_bs: int = 0) -> torch.Tensor | tuple[torch.Tensor, ...] | None:
        """One forward over ``tokens`` tokens on this rank, then (last PP stage) the sampler on
        ``rows`` rows; every intermediate is freed when the engine frees it. ``logits_max_bs``:
        the forward is SGLang's captured decode forward, which ends in its logits processor
        (``sglang_logits``; the runner's largest batch) on the last stage; returns what that
        keeps, if anything, and on a stage before the last the hidden states and residual its
        ``PPProxyTensors`` output holds (``sglang_graphs.stage_outputs_kept``)."""
        spec, dep, coord = self.ctx.spec, self.ctx.dep, self.ctx.coord
        h, dev, dt = spec.hidden_size, self.device, self.dtype
        layers = rank_layers(spec, dep, coord)
        with self.charge("activation"):  # type: ignore[attr-defined]
            ids = torch.zeros(tokens, dtype=torch.int64, device=dev)
            emb = self.tensors.get("model.embed_tokens.weight")
            if coord.pp_stage == 0 and emb is not None:
                x = self.all_reduce(F.embedding(ids, emb))
            else:
                x = torch.empty(tokens, h, dtype=dt, device=dev)
            residual = torch.empty_like(x)  # the first norm writes a new tensor
            for done, layer in enumerate(layers, 1):
                x = self.attention(x, layer, decode)  # post-attention norm: fused, in place
                x = self.mlp(x, layer)  # next input norm: fused with the residual, in place
                if self.on_layer is not None:
                    self.on_layer(done, len(layers))
            kept: torch.Tensor | tuple[torch.Tensor, ...] | None = None
            if logits_max_bs and coord.pp_stage < dep.pp - 1:
                kept = (x, residual)  # PPProxyTensors({"hidden_states", "residual"})
            del residual
            if logits_max_bs and logits_in_graph(self.ctx):
                kept = self.sglang_logits(x, logits_max_bs)
            if coord.pp_stage == dep.pp - 1 and rows > 0:
                self.sampler(x, rows)
            del x, ids
        return kept

    def sglang_logits(self, x: torch.Tensor, max_bs: int) -> torch.Tensor | None:
        """SGLang's ``LogitsProcessor._get_logits`` at decode on the final hidden states ``x``
        (``memprof.trace.sglang_capture.logits_plan``, 0.4.10 and 0.5.9
        layers/logits_processor.py): the lm_head GEMM (real where the lm_head weight has the
        padded shape, else its output allocated), at TP > 1 the all-gather's output (modelled:
        allocated, the local rows copied in) and its movedim/reshape copy (real), then the fp32
        logits: a new tensor kept as the graph's output (through 0.4.10) or a copy into the
        runner's buffer (from 0.5.1: ``_sglang_logits_buffer``, made by the capture)."""
        plan = logits_plan(self.ctx, x.shape[0], max_bs)
        tp = max(1, self.ctx.dep.tp)
        # a tied lm_head is the embedding (the model classes: self.lm_head =
        # self.model.embed_tokens where tie_word_embeddings)
        w = self.weight("lm_head", None)
        w = self.weight("model.embed_tokens", None) if w is None else w
        shape = plan.lm_head.shape
        if w is not None and w.dtype == x.dtype and tuple(w.shape) == (shape[1], x.shape[1]):
            logits = F.linear(x, w)
        else:
            logits = torch.empty(shape, dtype=torch_dtype(plan.lm_head.dtype), device=x.device)
        if plan.gather is not None and plan.copy is not None:
            out = torch.empty(plan.gather.shape, dtype=logits.dtype, device=x.device)
            torch.add(logits, 0, out=out.narrow(0, 0, shape[0]))  # this rank's rows
            # the copy is made inside all_gather, its input (the local output) still referenced
            whole = out.reshape(tp, *shape).movedim(0, 1).reshape(plan.copy.shape)
            del out
            logits = whole  # ``logits = tensor_model_parallel_all_gather(logits)``
            del whole
        vocab = self.ctx.spec.vocab_size
        if plan.kept is not None:
            kept = logits.narrow(1, 0, vocab).float()
            del logits
            return kept
        buf = self.tensors.get("_sglang_logits_buffer")
        if buf is not None:
            torch.add(logits.narrow(1, 0, vocab), 0, out=buf.narrow(0, 0, shape[0]))
        del logits
        return None

    def sampler(self, x: torch.Tensor, rows: int) -> None:
        """vLLM's sampler warm-up (gpu_model_runner.py ``_dummy_sampler_run``, vLLM@52a31cc):
        logits of the last row of each request, fp32, then top-k/top-p (Triton path: probs and
        exponential noise); Model Runner V2's own (``v2_sampler``) where the estimate charges
        V2's profile terms (``runner_v2_profile.v2_own_profile``)."""
        v, tp = self.ctx.spec.vocab_size, self.ctx.dep.tp
        last = x.narrow(0, x.shape[0] - rows, rows).contiguous() if x.shape[0] != rows else x
        local = self.linear(last, "lm_head", None, -(-v // tp))
        logits = torch.empty(rows, v, dtype=x.dtype, device=x.device) if tp > 1 else local
        if v2_own_profile(self.ctx) is not None:
            self.v2_sampler(logits, rows)
            del local, logits, last
            return
        logits32 = logits.float()
        # the Triton top-k/top-p kernel (R ≥ 8) masks in place using a cached fp32 row buffer of
        # one row per program, at most one per SM (vllm/v1/sample/ops/topk_topp_triton.py;
        # the estimate's rows for the catalog's card, ``sampler_triton_buffer_rows``): modelled,
        # not run
        buf_rows = sampler_triton_buffer_rows(self.ctx.gpu, rows)[0]
        buf = (torch.empty(buf_rows, v, dtype=torch.float32,
                           device=x.device) if rows >= SAMPLER_TRITON_MIN_ROWS else None)
        probs = torch.softmax(logits32, dim=-1)
        noise = torch.empty_like(probs)  # random_sample's exponential noise
        del local, logits, logits32, probs, noise, last, buf

    def v2_sampler(self, logits: torch.Tensor, rows: int) -> None:
        """Model Runner V2's ``_dummy_sampler_run`` on the model-dtype logits [R, V] (the
        estimate's ``activation.v2_sampler_stage``): the greedy pass's ``gumbel_sample`` argmax
        buffers, then from 0.33.0 the warm-up pass (``vllm_runner.warmup_sampler_tensors``):
        the fp32 copy, and FlashInfer's masked logits and softmax (two fp32 [R, V]) with its
        1 MiB row states, or the Triton top-k / top-p buffer and ``gumbel_sample`` again.
        Kernels modelled by their allocations, not run."""
        v, dev = logits.shape[1], logits.device
        blocks = -(-v // GUMBEL_BLOCK)

        def gumbel() -> tuple[torch.Tensor, torch.Tensor]:
            return (torch.empty(rows, blocks, dtype=torch.int64, device=dev),
                    torch.empty(rows, blocks, dtype=torch.float32, device=dev))

        greedy = gumbel()
        del greedy
        if not v2_warmup_pass(self.ctx):
            return
        copy32 = torch.empty(rows, v, dtype=torch.float32, device=dev)
        if v2_warmup_flashinfer(self.ctx):
            masked, probs = torch.empty_like(copy32), torch.empty_like(copy32)
            states = torch.empty(FLASHINFER_ROW_STATES, dtype=torch.uint8, device=dev)
            del masked, probs, states
        else:
            buf_rows = sampler_triton_buffer_rows(self.ctx.gpu, rows)[0]
            buf = torch.empty(buf_rows, v, dtype=torch.float32, device=dev)
            sampled = gumbel()
            del buf, sampled
        del copy32

    def sampler_state(self) -> None:
        """Model Runner V2's persistent sampler state (``vllm_runner.sampler_state_tensors``,
        made in ``load_model`` after the weights' figure), on the last PP stage where the
        estimate charges V2's profile terms: kept live, charged to its component."""
        dep, coord = self.ctx.dep, self.ctx.coord
        if coord.pp_stage != dep.pp - 1 or v2_own_profile(self.ctx) is None:
            return
        sizes = sampler_state_tensors(max_seqs(dep), self.ctx.spec.vocab_size,
                                      1 + dep.num_speculative_tokens)
        with self.charge(V2_SAMPLER_STATE_ROW):  # type: ignore[attr-defined]
            for i, n in enumerate(sizes):
                self.tensors[f"_sampler_state[{i}]"] = torch.empty(n, dtype=torch.uint8,
                                                                  device=self.device)

"""One rank of a deployment in PyTorch at its true shapes: its persistent tensors (weights, KV
cache, scratch) allocated as the engine allocates them, and forward passes whose tensors have the
engine's shapes and lifetimes.

Weights are allocated, never loaded (``torch.empty``; uninitialised). Linears whose weight is in
the model dtype run for real (``F.linear``: the output and cuBLAS's own workspace are real);
quantised linears (fp8 block, MXFP4, NVFP4, AWQ/GPTQ) and the attention and MoE kernels are
*modelled*: they allocate their outputs at the shapes vLLM's kernels return, without running the
kernel. Norms and residual adds are fused and in place, as vLLM's ``RMSNorm`` with a residual
(``fused_add_rms_norm``) is. Collectives of a rank traced alone become a local op with the same
output allocation (an out-of-place all-reduce is a copy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from memprof.core.attention import kind_of
from memprof.core.components import TermContext
from memprof.core.dtypes import DTYPES
from memprof.core.kvcache import rank_layers
from memprof.core.models import Layer
from memprof.core.terms.activation import SAMPLER_TRITON_BUFFER_ROWS, SAMPLER_TRITON_MIN_ROWS
from memprof.core.terms.allocations import Allocation

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8, "int8": torch.int8,
    "bool": torch.bool, "float8_e4m3fn": torch.float8_e4m3fn,
}
for _long, (_b, _short) in DTYPES.items():
    TORCH_DTYPES.setdefault(_short, TORCH_DTYPES[_long])


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[name]


Charge = Callable[[str], object]  # tracker.charge(component) context manager


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
    group: Any = None  # a torch.distributed ProcessGroup for the collectives, or None (local)
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

    def linear(self, x: torch.Tensor, module: str, layer: int | None, out: int) -> torch.Tensor:
        """``x @ Wᵀ``: real when W is a model-dtype matrix of the right shape, else an output
        of the kernel's shape (quantised GEMM modelled)."""
        w = self.weight(module, layer)
        if w is not None and w.dtype == x.dtype and w.dim() == 2 and w.shape[1] == x.shape[-1]:
            return F.linear(x, w)
        return torch.empty(x.shape[0], out, dtype=x.dtype, device=x.device)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """TP>1: vLLM's out-of-place all-reduce returns a new tensor. With a real process group
        (``group``: under torchrun, a world of 1 on one GPU, gloo on CPU) the sum runs over it;
        a rank traced alone gets the same output allocation from a local copy."""
        if self.ctx.dep.tp <= 1 and self.group is None:
            return x
        y = x.clone()
        if self.group is not None:
            import torch.distributed as dist

            dist.all_reduce(y, group=self.group)
        return y

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
        """Latent attention (MLA): the compressed query and latent KV, the output."""
        a, i, tp = layer.attention, layer.index, self.ctx.dep.tp
        t, h = x.shape[0], self.ctx.spec.hidden_size
        hl = max(1, a.num_heads // tp)
        latent = a.kv_lora_rank + a.qk_rope_head_dim
        qa = torch.empty(t, (a.q_lora_rank or 0) + latent, dtype=x.dtype, device=x.device)
        q = torch.empty(t, hl * (a.qk_nope_head_dim + a.qk_rope_head_dim), dtype=x.dtype,
                        device=x.device)
        del qa
        out = torch.zeros(t, hl * a.v_head_dim, dtype=x.dtype, device=x.device)
        if decode:
            self.decode_scratch(i)
        self._split()
        del q
        o = torch.empty(t, h, dtype=x.dtype, device=x.device)
        del out
        return o

    def _projected_attention(self, x: torch.Tensor, layer: Layer, decode: bool) -> torch.Tensor:
        """A kind modelled at the shapes of its projections (DeepSeek-V4's compressed sparse
        attention)."""
        a, i, tp = layer.attention, layer.index, self.ctx.dep.tp
        t, h = x.shape[0], self.ctx.spec.hidden_size
        hl = max(1, a.num_heads // tp)
        out = torch.empty(t, max(hl, 64) * a.head_dim, dtype=x.dtype, device=x.device)
        if decode:
            self.decode_scratch(i)
        self._split()
        o = torch.empty(t, h, dtype=x.dtype, device=x.device)
        del out
        return o

    def _split(self) -> None:
        """The attention kernel runs here, between two pieces of a PIECEWISE capture."""
        if self.piece_break is not None:
            self.piece_break()

    def mlp(self, x: torch.Tensor, layer: Layer) -> torch.Tensor:
        m, i, dep = layer.mlp, layer.index, self.ctx.dep
        t, h = x.shape[0], self.ctx.spec.hidden_size
        if m.kind == "dense":
            il = m.intermediate_size // dep.tp
            gu = self.linear(x, "mlp.gate_up_proj", i, 2 * il)
            act = torch.empty(t, il, dtype=x.dtype, device=x.device)  # SiluAndMul output
            # gate_up is a local of LlamaMLP.forward: alive until down_proj has run
            d = self.linear(act, "mlp.down_proj", i, h)
            del act, gu
            return self.all_reduce(d)
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

    # --- forwards ------------------------------------------------------------------------------
    def forward(self, tokens: int, rows: int, decode: bool = False) -> None:
        """One forward over ``tokens`` tokens on this rank, then (last PP stage) the sampler on
        ``rows`` rows; every intermediate is freed when the engine frees it."""
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
            del residual
            if coord.pp_stage == dep.pp - 1 and rows > 0:
                self.sampler(x, rows)
            del x, ids

    def sampler(self, x: torch.Tensor, rows: int) -> None:
        """vLLM's sampler warm-up (gpu_model_runner.py ``_dummy_sampler_run``, vLLM@52a31cc):
        logits of the last row of each request, fp32, then top-k/top-p (Triton path: probs and
        exponential noise)."""
        v, tp = self.ctx.spec.vocab_size, self.ctx.dep.tp
        last = x.narrow(0, x.shape[0] - rows, rows).contiguous() if x.shape[0] != rows else x
        local = self.linear(last, "lm_head", None, -(-v // tp))
        logits = torch.empty(rows, v, dtype=x.dtype, device=x.device) if tp > 1 else local
        logits32 = logits.float()
        # the Triton top-k/top-p kernel (R ≥ 8) masks in place using a cached fp32 row buffer of
        # one row per program, at most one per SM (vllm/v1/sample/ops/topk_topp_triton.py):
        # modelled, not run
        buf = (torch.empty(min(rows, SAMPLER_TRITON_BUFFER_ROWS), v, dtype=torch.float32,
                           device=x.device) if rows >= SAMPLER_TRITON_MIN_ROWS else None)
        probs = torch.softmax(logits32, dim=-1)
        noise = torch.empty_like(probs)  # random_sample's exponential noise
        del local, logits, logits32, probs, noise, last, buf

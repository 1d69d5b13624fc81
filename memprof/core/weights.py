"""Weights of each rank, tensor by tensor, sharded as vLLM shards them.

Sharding rules (vLLM ``vllm/model_executor/layers/linear.py`` and the model files):
- ``ColumnParallelLinear`` / ``QKVParallelLinear`` / ``MergedColumnParallelLinear`` split the
  output dim by TP; ``RowParallelLinear`` splits the input dim (its bias is kept whole on every
  rank); ``ReplicatedLinear`` and norms are replicated.
- ``QKVParallelLinear`` keeps ``max(1, kv_heads / tp)`` KV heads per rank: when TP > KV heads,
  each KV head is replicated ``tp / kv_heads`` times.
- ``VocabParallelEmbedding`` / ``ParallelLMHead`` pad the vocab to a multiple of 64
  (``DEFAULT_VOCAB_PADDING_SIZE``) and split it by TP.
- PP splits layers (``get_pp_indices``); the first stage holds the embeddings, the last the final
  norm and the lm_head.
- ``FusedMoE``: with ``--enable-expert-parallel`` routed experts are spread over TP×DP ranks
  (whole experts); without it their intermediate dim is split TP×DP ways.

Every tensor carries ``replicas``: how many identical copies exist across the whole deployment.
Summing ``(bytes - padding) / replicas`` over all ranks gives back the unsharded model — the
invariant the property tests check.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from memprof.base.errors import LayoutError
from memprof.base.units import cdiv, round_up
from memprof.core.deployment import Deployment, RankCoord, experts_on_rank, pp_layer_split
from memprof.core.dtypes import dtype_bytes
from memprof.core.models import Layer, ModelSpec, QuantConfig, layer_kinds
from memprof.core.quant import linear_bytes

# vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
VOCAB_PADDING = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightTensor:
    module: str  # HF-style module path with the layer index as ``*`` once aggregated
    group: str  # the report component this tensor belongs to
    bytes_each: int  # bytes of one instance on this rank
    count: int = 1  # instances on this rank (layers)
    replicas: int = 1  # identical copies across the deployment
    padding_each: int = 0  # bytes of kernel/vocab padding inside bytes_each
    formula: str = ""

    @property
    def bytes(self) -> int:
        return self.bytes_each * self.count


def model_dtype(spec: ModelSpec, dep: Deployment) -> str:
    """vLLM ``--dtype auto``: the checkpoint dtype, with fp32 checkpoints served in bf16."""
    aliases = {"half": "float16", "fp16": "float16", "bf16": "bfloat16"}
    if dep.dtype != "auto":
        return aliases.get(dep.dtype, dep.dtype)
    return "bfloat16" if spec.dtype == "float32" else spec.dtype


def mxfp4_moe_layout(arch: str) -> tuple[int, int, int]:
    """MXFP4 MoE padding vLLM's kernels impose: (I multiple, H multiple, scale-row multiple).

    ``Mxfp4MoEMethod.create_weights`` / the mxfp4 oracle (vLLM 0.33.0
    ``quantization/mxfp4.py``, ``fused_moe/oracle/mxfp4.py``): SM90 runs the Triton kernels
    (I to 64, H unchanged; their scale layout pads rows to 256 and columns to 4); SM100 runs
    FlashInfer TRT-LLM (I to 128, H to 256); ROCm and the CUTLASS/DeepGEMM paths use 128/128;
    Marlin (others) 128/256. Biases become fp32 after loading on every backend.
    """
    if arch.startswith("sm10"):
        return 128, 256, 1
    if arch.startswith("sm90"):
        return 64, 1, 256
    if arch.startswith("gfx"):
        return 128, 128, 1
    return 128, 256, 1


class _Rank:
    """Builds the tensor list of one rank."""

    def __init__(self, spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                 coord: RankCoord, arch: str) -> None:
        self.spec, self.dep, self.quant, self.coord, self.arch = spec, dep, quant, coord, arch
        self.dtype = model_dtype(spec, dep)
        self.b = dtype_bytes(self.dtype)
        self.tp = dep.tp
        self.copies = dep.copies  # full copies of non-expert tensors (vLLM DP)
        self.out: list[WeightTensor] = []

    # --- helpers ---------------------------------------------------------------------------------
    def quantised(self, module: str, expert: bool = False) -> QuantConfig | None:
        q = self.quant
        if q is None:
            return None
        if q.method == "mxfp4" and not expert:
            return None  # vLLM's Mxfp4Config quantises FusedMoE experts only
        for pat in q.exclude:
            p = pat.rstrip(".")
            if (fnmatch.fnmatch(module, p) or fnmatch.fnmatch(module, p + ".*")
                    or module.endswith("." + p) or ("." + p + ".") in ("." + module + ".")):
                return None
        return q

    def add(self, module: str, group: str, nbytes: int, *, replicas: int, formula: str,
            padding: int = 0) -> None:
        self.out.append(WeightTensor(module=module, group=group, bytes_each=nbytes,
                                     replicas=replicas, padding_each=padding, formula=formula))

    def linear(self, module: str, group: str, out: int, inn: int, *, shard: str,
               bias: bool = False, quantise: bool = True, replicas_extra: int = 1) -> None:
        """A linear of full shape ``out × in``; ``shard`` is col, row or rep."""
        dp = self.copies
        if shard == "col":
            lo, li, rep = cdiv(out, self.tp), inn, dp
        elif shard == "row":
            lo, li, rep = out, cdiv(inn, self.tp), dp
        else:
            lo, li, rep = out, inn, dp * self.tp
        q = self.quantised(module) if quantise else None
        nbytes, formula = linear_bytes(lo, li, q, self.b, self.arch)
        self.add(module, group, nbytes, replicas=rep * replicas_extra,
                 formula=f"{formula} ({shard})")
        if bias:
            bo = lo
            self.add(module + ".bias", group, bo * self.b,
                     replicas=(dp * self.tp if shard in ("row", "rep") else dp) * replicas_extra,
                     formula=f"{bo}×{self.b}B bias")

    def vector(self, module: str, group: str, n: int, dtype_bytes: int | None = None,
               *, sharded: bool = False) -> None:
        b = self.b if dtype_bytes is None else dtype_bytes
        n_local = cdiv(n, self.tp) if sharded else n
        self.add(module, group, n_local * b,
                 replicas=self.copies * (1 if sharded else self.tp),
                 formula=f"{n_local}×{b}B")

    # --- embeddings ------------------------------------------------------------------------------
    def vocab_parallel(self, module: str, group: str) -> None:
        v, h = self.spec.vocab_size, self.spec.hidden_size
        padded = round_up(v, VOCAB_PADDING)
        if padded % self.tp:
            raise LayoutError(
                f"the padded vocabulary ({padded}) is not divisible by tensor parallel size "
                f"{self.tp}", hint="vLLM asserts it; use a TP size that divides it")
        per = padded // self.tp
        real = max(0, min(per, v - self.coord.tp_rank * per))
        tied_copies = 2 if self.spec.tie_word_embeddings and self.dep.pp > 1 else 1
        self.add(module, group, per * h * self.b, replicas=self.copies * tied_copies,
                 padding=(per - real) * h * self.b,
                 formula=f"{per}×{h}×{self.b}B (vocab {v} padded to {padded}, /{self.tp})")

    # --- attention -------------------------------------------------------------------------------
    def attention(self, layer: Layer, p: str) -> None:
        """Attention runs with ``dep.attn_tp`` ranks (SGLang DP attention: tp / dp), each shard
        held by ``tp / attn_tp`` DP groups."""
        saved = (self.tp, self.copies)
        self.tp = self.dep.attn_tp
        self.copies = saved[1] * (saved[0] // self.tp)
        try:
            self._attention(layer, p)
        finally:
            self.tp, self.copies = saved

    def _attention(self, layer: Layer, p: str) -> None:
        a = layer.attention
        h = self.spec.hidden_size
        if a.kind == "gqa":
            g = "attention" + (" (sliding)" if a.sliding_window else "")
            kv_rep = max(1, self.tp // a.num_kv_heads)
            kv_local = max(1, a.num_kv_heads // self.tp)
            # QKVParallelLinear: the q part splits by TP, the kv part replicates past kv heads.
            q = self.quantised(p + "self_attn.qkv_proj")
            nq, fq = linear_bytes(a.num_heads * a.head_dim // self.tp, h, q, self.b, self.arch)
            nkv, fkv = linear_bytes(2 * kv_local * a.head_dim, h, q, self.b, self.arch)
            self.add(p + "self_attn.qkv_proj(q)", g, nq, replicas=self.copies,
                     formula=fq + " (col)")
            self.add(p + "self_attn.qkv_proj(kv)", g, nkv, replicas=self.copies * kv_rep,
                     formula=fkv + f" ({kv_local} KV head(s) per rank, ×{kv_rep} replicated)")
            if a.qkv_bias:
                self.add(p + "self_attn.qkv_proj(q).bias", g,
                         a.num_heads * a.head_dim // self.tp * self.b, replicas=self.copies,
                         formula="q bias")
                self.add(p + "self_attn.qkv_proj(kv).bias", g, 2 * kv_local * a.head_dim * self.b,
                         replicas=self.copies * kv_rep, formula="kv bias")
            self.linear(p + "self_attn.o_proj", g, h, a.num_heads * a.head_dim, shard="row",
                        bias=a.o_bias)
            if a.qk_norm:
                self.vector(p + "self_attn.q_norm", g, a.head_dim)
                self.vector(p + "self_attn.k_norm", g, a.head_dim)
            if a.sinks:
                # gpt-oss: one learned sink logit per local head.
                self.vector(p + "self_attn.sinks", g, a.num_heads, 2, sharded=True)
        elif a.kind == "mla":
            self.mla(layer, p)
        else:
            self.dsv4_attention(layer, p)

    def mla(self, layer: Layer, p: str) -> None:
        """DeepSeek V2/V3 MLA (vllm/model_executor/models/deepseek_v2.py).

        q_a / kv_a projections are one replicated ``fused_qkv_a_proj``; q_b and kv_b split heads
        by TP; o_proj is row-parallel. After loading, the MLA backend keeps ``W_UK_T`` and
        ``W_UV`` — kv_b_proj dequantised to the model dtype, for the absorbed decode path
        (``MLACommonImpl.process_weights_after_loading``).
        """
        a = layer.attention
        h = self.spec.hidden_size
        g = "attention (MLA)"
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            self.linear(p + "self_attn.q_a_proj", g, a.q_lora_rank, h, shard="rep")
            self.vector(p + "self_attn.q_a_layernorm", g, a.q_lora_rank)
            self.linear(p + "self_attn.q_b_proj", g, a.num_heads * qk, a.q_lora_rank, shard="col")
        else:
            self.linear(p + "self_attn.q_proj", g, a.num_heads * qk, h, shard="col")
        self.linear(p + "self_attn.kv_a_proj_with_mqa", g, a.kv_lora_rank + a.qk_rope_head_dim, h,
                    shard="rep")
        self.vector(p + "self_attn.kv_a_layernorm", g, a.kv_lora_rank)
        self.linear(p + "self_attn.kv_b_proj", g,
                    a.num_heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank,
                    shard="col")
        self.linear(p + "self_attn.o_proj", g, h, a.num_heads * a.v_head_dim, shard="row")
        if self.quantised(p + "self_attn.kv_b_proj") is not None:
            # W_UK_T / W_UV are views of one dequantised copy; free when kv_b_proj is bf16.
            heads_local = a.num_heads // self.tp
            absorbed = heads_local * a.kv_lora_rank * (a.qk_nope_head_dim + a.v_head_dim) * self.b
            self.add(p + "self_attn.mla_attn.W_UK_T+W_UV", g, absorbed, replicas=self.copies,
                     formula=f"{heads_local}×{a.kv_lora_rank}×({a.qk_nope_head_dim}+"
                     f"{a.v_head_dim})×{self.b}B (kv_b_proj dequantised for absorbed decode)")
        if a.has_indexer:
            # DeepSeek-V3.2 lightning indexer (replicated): wq_b, wk, k_norm, weights_proj.
            gi = "indexer"
            self.linear(p + "self_attn.indexer.wq_b", gi, a.index_n_heads * a.index_head_dim,
                        a.q_lora_rank or h, shard="rep")
            self.linear(p + "self_attn.indexer.wk", gi, a.index_head_dim, h, shard="rep")
            self.vector(p + "self_attn.indexer.k_norm", gi, 2 * a.index_head_dim)
            self.linear(p + "self_attn.indexer.weights_proj", gi, a.index_n_heads, h,
                        shard="rep", quantise=False)

    def dsv4_attention(self, layer: Layer, p: str) -> None:
        """DeepSeek-V4 attention, compressor and indexer (``reference/deepseek_v4.md`` §3, §4.2).

        wq_a+wkv replicated (``disable_tp``); wq_b, wo_a column-parallel, wo_b row-parallel;
        ``attn_sink`` fp32 padded to at least 64 local heads; compressor and indexer replicated,
        the compressor in bf16 (``quant_config=None``).
        """
        a = layer.attention
        h = self.spec.hidden_size
        r = a.compress_ratio
        g = {0: "attention (SWA)", 4: "attention (C4)", 128: "attention (C128)"}[r]
        q = a.q_lora_rank or 0
        self.linear(p + "attn.wq_a", g, q, h, shard="rep")
        self.linear(p + "attn.wkv", g, a.head_dim, h, shard="rep")
        self.vector(p + "attn.q_norm", g, q)
        self.vector(p + "attn.kv_norm", g, a.head_dim)
        self.linear(p + "attn.wq_b", g, a.num_heads * a.head_dim, q, shard="col")
        self.linear(p + "attn.wo_a", g, a.o_groups * a.o_lora_rank,
                    a.num_heads * a.head_dim // a.o_groups, shard="col")
        self.linear(p + "attn.wo_b", g, h, a.o_groups * a.o_lora_rank, shard="row")
        local = a.num_heads // self.tp
        padded = max(local, 64)
        self.add(p + "attn.attn_sink", g, padded * 4, replicas=self.copies,
                 padding=(padded - local) * 4, formula=f"max({local}, 64)×4B fp32")
        if r:
            coff = 2 if r == 4 else 1
            width = coff * a.head_dim
            self.linear(p + "attn.compressor.wkv_wgate", g, 2 * width, h, shard="rep",
                        quantise=False)
            self.vector(p + "attn.compressor.ape", g, r * width, 4)
            self.vector(p + "attn.compressor.norm", g, a.head_dim)
        if r == 4:
            gi = "indexer"
            self.linear(p + "attn.indexer.wq_b", gi, a.index_n_heads * a.index_head_dim, q,
                        shard="rep")
            self.linear(p + "attn.indexer.weights_proj", gi, a.index_n_heads, h, shard="rep",
                        quantise=False)
            iw = 2 * a.index_head_dim
            self.linear(p + "attn.indexer.compressor.wkv_wgate", gi, 2 * iw, h, shard="rep",
                        quantise=False)
            self.vector(p + "attn.indexer.compressor.ape", gi, 4 * iw, 4)
            self.vector(p + "attn.indexer.compressor.norm", gi, a.index_head_dim)

    # --- MLP / MoE -------------------------------------------------------------------------------
    def mlp(self, layer: Layer, p: str) -> None:
        m = layer.mlp
        h = self.spec.hidden_size
        if m.kind == "dense":
            self.linear(p + "mlp.gate_up_proj", "mlp (dense)", 2 * m.intermediate_size, h,
                        shard="col", bias=m.mlp_bias)
            self.linear(p + "mlp.down_proj", "mlp (dense)", h, m.intermediate_size, shard="row",
                        bias=m.mlp_bias)
            return
        self.router(layer, p)
        self.experts(layer, p)
        if m.shared_intermediate_size:
            gs = "shared experts"
            self.linear(p + "mlp.shared_experts.gate_up_proj", gs, 2 * m.shared_intermediate_size,
                        h, shard="col")
            self.linear(p + "mlp.shared_experts.down_proj", gs, h, m.shared_intermediate_size,
                        shard="row")
            if m.shared_expert_gate:
                self.linear(p + "mlp.shared_expert_gate", gs, 1, h, shard="rep", quantise=False)

    def router(self, layer: Layer, p: str) -> None:
        """Routers stay in the model dtype (``ReplicatedLinear(..., quant_config=None)``);
        DeepSeek's ``e_score_correction_bias`` is fp32; DeepSeek-V4 hash layers hold a
        ``tid2eid`` table (int32 in vLLM) instead of a gate bias."""
        m = layer.mlp
        h = self.spec.hidden_size
        g = "router"
        self.linear(p + "mlp.gate", g, m.num_experts, h, shard="rep", bias=m.router_bias,
                    quantise=False)
        if m.e_score_correction_bias:
            self.vector(p + "mlp.gate.e_score_correction_bias", g, m.num_experts, 4)
        if m.hash_routed:
            self.vector(p + "mlp.gate.tid2eid", g, self.spec.vocab_size * m.top_k, 4)

    def experts(self, layer: Layer, p: str) -> None:
        m = layer.mlp
        h = self.spec.hidden_size
        dep = self.dep
        if dep.enable_expert_parallel:
            assert self.coord.ep_rank is not None
            e_local = experts_on_rank(m.num_experts, dep.ep_size, self.coord.ep_rank)
            i_local, moe_tp = m.moe_intermediate_size, 1
        else:
            e_local, moe_tp = m.num_experts, dep.moe_tp_size
            i_local = cdiv(m.moe_intermediate_size, moe_tp)
        module = p + "mlp.experts"
        q = self.quantised(module, expert=True)
        if self.spec.family == "deepseek_v4":
            ed = (q.expert_dtype if q else None) or "fp4"
            q = None if q is None else (QuantConfig(method="mxfp4", group_size=32, bits=4)
                                        if ed == "fp4" else q)
        g = "experts"
        if q is not None and q.method == "mxfp4":
            self.mxfp4_experts(module, layer, e_local, i_local, moe_tp)
            return
        if q is not None and q.method == "fp8" and q.block:
            # FusedMoE fp8 block scales: w13 (E, 2·ceil(I/128), ceil(H/128)), w2 (E,
            # ceil(H/128), ceil(I/128)), fp32 (fp8.py Fp8MoEMethod.create_weights, v0.33.0).
            bo, bi = q.block
            n13 = 2 * i_local * h + 4 * 2 * cdiv(i_local, bo) * cdiv(h, bi)
            n2 = h * i_local + 4 * cdiv(h, bo) * cdiv(i_local, bi)
            f13, f2 = f"{2 * i_local}×{h} fp8", f"{h}×{i_local} fp8 + block scales"
        else:
            n13, f13 = linear_bytes(2 * i_local, h, q, self.b, self.arch)
            n2, f2 = linear_bytes(h, i_local, q, self.b, self.arch)
        self.add(module, g, e_local * (n13 + n2), replicas=1,
                 formula=f"{e_local} experts × [w13 {f13} + w2 {f2}]")
        if m.expert_bias:
            self.add(module + ".w13_bias", g, e_local * 2 * i_local * self.b, replicas=1,
                     formula=f"{e_local}×{2 * i_local}×{self.b}B")
            self.add(module + ".w2_bias", g, e_local * h * self.b, replicas=moe_tp,
                     formula=f"{e_local}×{h}×{self.b}B")

    def mxfp4_experts(self, module: str, layer: Layer, e: int, i: int, moe_tp: int) -> None:
        """MXFP4 experts with the kernels' padding (see ``mxfp4_moe_layout``)."""
        h = self.spec.hidden_size
        pi, ph, prow = mxfp4_moe_layout(self.arch)
        ip, hp = round_up(i, pi), round_up(h, ph)

        def one(rows: int, k: int) -> int:  # values + e8m0 scales (scale rows/cols padded)
            return rows * k // 2 + round_up(rows, prow) * round_up(cdiv(k, 32), 4 if prow > 1
                                                                      else 1)

        padded = one(2 * ip, hp) + one(hp, ip)
        raw = 2 * i * h // 2 + 2 * i * cdiv(h, 32) + h * i // 2 + h * cdiv(i, 32)
        pad_note = f", kernel padding I {i}→{ip}, H {h}→{hp}" if (ip, hp) != (i, h) else ""
        self.add(module, "experts", e * padded, replicas=1, padding=e * (padded - raw),
                 formula=f"{e} experts × [w13 {2 * ip}×{hp} + w2 {hp}×{ip}] MXFP4 + e8m0 "
                 f"scales{pad_note}")
        if layer.mlp.expert_bias:
            self.add(module + ".w13_bias", "experts", e * 2 * ip * 4, replicas=1,
                     padding=e * 2 * (ip * 4 - i * self.b),
                     formula=f"{e}×{2 * ip}×4B fp32 (converted at load)")
            self.add(module + ".w2_bias", "experts", e * hp * 4, replicas=moe_tp,
                     padding=e * (hp * 4 - h * self.b),
                     formula=f"{e}×{hp}×4B fp32 (converted at load)")

    # --- whole layers ----------------------------------------------------------------------------
    def layer(self, layer: Layer) -> None:
        p = f"model.layers.{layer.index}."
        h = self.spec.hidden_size
        self.attention(layer, p)
        self.mlp(layer, p)
        self.vector(p + "input_layernorm", "norms", h)
        self.vector(p + "post_attention_layernorm", "norms", h)
        if self.spec.hc_mult:
            m = self.spec.hc_mult
            mix = (2 + m) * m
            # hc_{attn,ffn}_{fn [mix, m·H], base [mix], scale [3]}, fp32 (deepseek_v4.md §3).
            self.add(p + "hc", "hyper-connections", 2 * 4 * (mix * m * h + mix + 3),
                     replicas=self.copies * self.tp,
                     formula=f"2×4B×({mix}×{m}×{h} + {mix} + 3) fp32")
        if layer.is_mtp:
            g = "mtp"
            if self.spec.family == "deepseek_v4":
                self.linear(p + "e_proj", g, h, h, shard="rep")
                self.linear(p + "h_proj", g, h, h, shard="rep")
                self.hc_head(p)
            else:
                # DeepSeekMTP: eh_proj is an unquantised nn.Linear(2H, H); embed_tokens and
                # shared_head.head are shared with the target model by vLLM's proposer.
                self.linear(p + "eh_proj", g, h, 2 * h, shard="rep", quantise=False)
            for n in ("enorm", "hnorm", "shared_head.norm"):
                self.vector(p + n, g, h)

    def layer_kinds(self, layers: tuple[Layer, ...]) -> list[tuple[Layer, int]]:
        """The stage's layers as (first layer of a kind, how many layers of that kind), so work
        grows with the kinds, not the count (a config of 100,000 layers builds a few). Layers
        are one kind when attention, MLP and MTP role are equal; when a quantisation exclude
        pattern names layer indices (a digit in it), every layer is its own kind."""
        if self.quant is not None and any(ch.isdigit() for p in self.quant.exclude for ch in p):
            return [(layer, 1) for layer in layers]
        return layer_kinds(layers)

    def layer_times(self, layer: Layer, n: int) -> None:
        """The tensors of ``layer``, standing for ``n`` identical layers (``count = n``)."""
        start = len(self.out)
        self.layer(layer)
        if n != 1:
            self.out[start:] = [replace(t, count=t.count * n) for t in self.out[start:]]

    def hc_head(self, p: str) -> None:
        m, h = self.spec.hc_mult, self.spec.hidden_size
        self.add(p + "hc_head", "hyper-connections head", 4 * (m * m * h + m + 1),
                 replicas=self.copies * self.tp, formula=f"4B×({m}×{m}×{h} + {m} + 1) fp32")

    def build(self) -> list[WeightTensor]:
        spec, dep = self.spec, self.dep
        stages = pp_layer_split(spec.num_layers, dep.pp)
        start, end = stages[self.coord.pp_stage]
        first = self.coord.pp_stage == 0
        last = self.coord.pp_stage == dep.pp - 1
        if first or (last and spec.tie_word_embeddings):
            self.vocab_parallel("model.embed_tokens", "embed_tokens")
        for layer, n in self.layer_kinds(spec.layers[start:end]):
            self.layer_times(layer, n)
        if last:
            for layer, n in self.layer_kinds(spec.mtp_layers):
                self.layer_times(layer, n)
            self.vector("model.norm", "final norm", spec.hidden_size)
            if spec.hc_mult:
                self.hc_head("model.")
            if not spec.tie_word_embeddings:
                self.vocab_parallel("lm_head", "lm_head")
        return self.out


def _aggregate(tensors: Iterable[WeightTensor]) -> list[WeightTensor]:
    """Fold per-layer tensors that are identical on this rank into one row with a count."""
    rows: dict[tuple[str, str, int, int, int, str], int] = {}
    for t in tensors:
        module = re.sub(r"\.layers\.\d+\.", ".layers.*.", t.module)
        key = (module, t.group, t.bytes_each, t.replicas, t.padding_each, t.formula)
        rows[key] = rows.get(key, 0) + t.count
    return [
        WeightTensor(module=m, group=g, bytes_each=b, count=n, replicas=r, padding_each=pd,
                     formula=f)
        for (m, g, b, r, pd, f), n in rows.items()
    ]


def rank_weights(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None, coord: RankCoord,
                 arch: str = "sm90") -> list[WeightTensor]:
    """Tensor-by-tensor weights of one rank (aggregated over identical layers)."""
    return _aggregate(_Rank(spec, dep, quant, coord, arch).build())


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightGroup:
    """A report row: the tensors of one group in ``count`` layers of identical size."""

    group: str
    count: int
    bytes_each: int
    modules: tuple[str, ...]


def group_weights(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                  coord: RankCoord, arch: str = "sm90") -> tuple[list[WeightTensor],
                                                                 list[WeightGroup]]:
    """The rank's tensors (aggregated) and its report rows: per group, layers of equal size."""
    raw = _Rank(spec, dep, quant, coord, arch).build()
    per_layer: dict[tuple[str, str], int] = {}  # (group, layer) -> bytes of one such layer
    layers_like: dict[tuple[str, str], int] = {}  # how many layers that layer stands for
    modules: dict[str, list[str]] = {}
    for t in raw:
        m = re.search(r"\.layers\.(\d+)\.", t.module)
        where = m.group(1) if m else t.module
        per_layer[(t.group, where)] = per_layer.get((t.group, where), 0) + (
            t.bytes_each if m else t.bytes)
        layers_like[(t.group, where)] = t.count if m else 1
        short = re.sub(r"^.*?\.layers\.\d+\.", "", t.module)
        modules.setdefault(t.group, [])
        if short not in modules[t.group]:
            modules[t.group].append(short)
    rows: dict[tuple[str, int], int] = {}
    for key, nbytes in per_layer.items():
        rows[(key[0], nbytes)] = rows.get((key[0], nbytes), 0) + layers_like[key]
    groups = [WeightGroup(group=g, count=n, bytes_each=b, modules=tuple(modules[g]))
              for (g, b), n in rows.items()]
    return _aggregate(raw), groups


def unsharded_total(spec: ModelSpec, quant: QuantConfig | None, dtype: str = "auto",
                    arch: str = "sm90") -> int:
    """Bytes of the whole model on one GPU without padding (the reference for invariants)."""
    from memprof.core.deployment import ranks

    one = Deployment(dtype=dtype)
    (coord,) = ranks(one)
    return sum((t.bytes_each - t.padding_each) * t.count
               for t in rank_weights(spec, one, quant, coord, arch))

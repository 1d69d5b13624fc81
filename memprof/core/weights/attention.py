"""Attention weights of one layer: GQA (``QKVParallelLinear``), DeepSeek MLA and DeepSeek-V4
(attention, compressor, indexer), sharded as vLLM shards them."""

from __future__ import annotations

from memprof.core.models import Layer
from memprof.core.weights.formats import Param, linear_bytes, linear_params
from memprof.core.weights.mla_absorption import absorbed_params
from memprof.core.weights.shard import Shard


class AttentionWeights(Shard):
    """The attention block of a layer."""

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
            qo, kvo = a.num_heads * a.head_dim // self.tp, 2 * kv_local * a.head_dim
            _nq, fq = linear_bytes(qo, h, q, self.b, self.arch)
            _nkv, fkv = linear_bytes(kvo, h, q, self.b, self.arch)
            self.add(p + "self_attn.qkv_proj(q)", g, linear_params(qo, h, q, self.dtype, self.arch),
                     replicas=self.copies,
                     formula=fq + " (col)")
            self.add(p + "self_attn.qkv_proj(kv)", g,
                     linear_params(kvo, h, q, self.dtype, self.arch), replicas=self.copies * kv_rep,
                     formula=fkv + f" ({kv_local} KV head(s) per rank, ×{kv_rep} replicated)")
            if a.qkv_bias:
                self.add(p + "self_attn.qkv_proj(q).bias", g, self.vec("bias", qo),
                         replicas=self.copies,
                         formula="q bias")
                self.add(p + "self_attn.qkv_proj(kv).bias", g, self.vec("bias", kvo),
                         replicas=self.copies * kv_rep, formula="kv bias")
            self.linear(p + "self_attn.o_proj", g, h, a.num_heads * a.head_dim, shard="row",
                        bias=a.o_bias)
            if a.qk_norm:
                self.vector(p + "self_attn.q_norm", g, a.head_dim)
                self.vector(p + "self_attn.k_norm", g, a.head_dim)
            if a.sinks:
                # gpt-oss: one learned sink logit per local head.
                self.vector(p + "self_attn.sinks", g, a.num_heads, "bfloat16", sharded=True)
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
        heads_local = a.num_heads // self.tp
        kvb_quant = self.quantised(p + "self_attn.kv_b_proj")
        absorbed_07 = absorbed_params(a, heads_local, h, kvb_quant, self.dtype,
                                      self.dep.engine_version)
        if absorbed_07 is not None:
            self.add(p + "self_attn.mla_attn.absorbed", g, absorbed_07, replicas=self.copies,
                     formula=" + ".join(f"{x.name} {'×'.join(map(str, x.shape))} {x.dtype}"
                                        for x in absorbed_07)
                     + f" (vLLM {self.dep.engine_version} matrix absorption)")
        elif kvb_quant is not None:
            # W_UK_T / W_UV are views of one dequantised copy; free when kv_b_proj is bf16.
            absorbed = (Param("W_UK_T+W_UV", (heads_local, a.kv_lora_rank,
                                              a.qk_nope_head_dim + a.v_head_dim), self.dtype),)
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
        """DeepSeek-V4 attention, compressor and indexer (the DeepSeek-V4 checkpoint's tensors
        (model.safetensors.index.json); vLLM deepseek_v4.py @023da1fc).

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
        self.add(p + "attn.attn_sink", g, self.vec("attn_sink", padded, "float32"),
                 replicas=self.copies,
                 padding=(padded - local) * 4, formula=f"max({local}, 64)×4B fp32")
        if r:
            coff = 2 if r == 4 else 1
            width = coff * a.head_dim
            self.linear(p + "attn.compressor.wkv_wgate", g, 2 * width, h, shard="rep",
                        quantise=False)
            self.vector(p + "attn.compressor.ape", g, r * width, "float32")
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
            self.vector(p + "attn.indexer.compressor.ape", gi, 4 * iw, "float32")
            self.vector(p + "attn.indexer.compressor.norm", gi, a.index_head_dim)

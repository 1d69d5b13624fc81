"""MLA (DeepSeek V2/V3 multi-head latent attention, and V3.2's sparse MLA with its lightning
indexer): its KV page, its profile-run live set, its RoPE cache and its weights.

Sources: vLLM@52a31cc ``vllm/v1/kv_cache_interface.py`` ``MLAAttentionSpec`` (one latent head
of ``kv_lora_rank + qk_rope_head_dim``, replicated on every TP rank; V3.2 ``fp8_ds_mla`` slot and
indexer K cache), ``vllm/model_executor/models/deepseek_v2.py`` (weights, ``deepseek_yarn``),
``vllm/model_executor/layers/attention/mla_attention.py`` (profile-run worst case).
"""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.base.units import round_up
from memprof.core.attention.base import (
    ActQuery,
    AttentionKind,
    AttentionStage,
    KVLayerSpec,
    KVQuery,
    RopeCache,
    WeightSink,
    rope_positions,
    rope_scaling,
)
from memprof.core.kv_dtypes import BY_NAME as KV_DTYPES
from memprof.core.kv_dtypes import DS_MLA_SLOT
from memprof.core.models import Attention, Layer, ModelSpec
from memprof.core.versions import Rule

# Where the engine keeps MLA's latent KV cache (one head of kv_lora_rank + rope per layer).
# vLLM 0.6.x has no MLA backend: its DeepseekV2Attention (model_executor/models/deepseek_v2.py,
# 0.6.6.post1) runs the attention as multi-head attention over every local head, K and V padded
# to a head size of 256 (config.py ModelConfig.get_head_size: "we need to pad head_size 192 to
# 256"), a KV layout memprof does not model.
MLA_LATENT_CACHE: tuple[Rule, ...] = (
    Rule(name="mla_latent_kv_cache", changes="KV cache: MLA latent", since="0.7.1", until=None,
         introduced_by="MLA attention backends (first released in 0.7.1); before them vLLM "
         "ran DeepSeek V2/V3 attention as multi-head attention, each head's K and V padded to "
         "256, which memprof does not model",
         source="0.7.1 attention/backends/triton_mla.py, attention/backends/mla/utils.py; "
         "0.6.6.post1 model_executor/models/deepseek_v2.py DeepseekV2Attention (self.attn = "
         "Attention(self.num_local_heads, 256, ...)), config.py ModelConfig.get_head_size",
         applies_to="mla"),
    Rule(name="mla_latent_kv_cache", changes="KV cache: MLA latent", since=None, until=None,
         engine="sglang", introduced_by="every SGLang release memprof models",
         source="sglang 0.4.3 srt/mem_cache/memory_pool.py MLATokenToKVPool (kv_lora_rank + "
         "qk_rope_head_dim per token and layer)", applies_to="mla"),
)

INDEXER_SLOT_FP8 = 132  # 128 fp8 values + one fp32 scale per 128 (V3.2 indexer K cache)
DS_MLA_FP8_SLOT = 656  # V3.2 fp8_ds_mla: 512 fp8 + 4 fp32 scales + 64 bf16 RoPE


class MLA(AttentionKind):
    """One latent KV head per layer, replicated on every rank; an indexer K cache beside it
    when the layer has V3.2's lightning indexer."""

    name = "mla"
    replica = "latent"
    # SGLang _get_default_attn_backend (server_args.py 0.5.9; model_runner.py 0.4.7 – 0.5.4), MLA
    # on HIP: aiter when model_config.get_num_kv_heads(tp_size) is 16 or 128, else triton (the
    # config's num_key_value_heads, which MLA checkpoints set to num_attention_heads)
    hip_aiter_heads = (16, 128)
    dense_name = "dense MLA"  # the sparse variant (V3.2's indexer) is the same kind
    # the MLA decode backends' scratch rows, the validation of their kernels
    modules = ("memprof/core/scratch/mla.py", "memprof/validation/mla_tq.py")

    backend_picks_block = True
    kv_layout_rows = MLA_LATENT_CACHE
    rules = (MLA_LATENT_CACHE,)

    def default_block_size(self, arch: str) -> int:
        """The MLA backends' own: FlashMLA 64 (the SM90 default), CUTLASS MLA 128 (SM100)."""
        return 128 if arch.startswith("sm10") else 64

    def kv_pages(self, a: Attention, q: KVQuery) -> list[KVLayerSpec]:
        """``align``: one token's entry padded to a multiple of that many bytes (V0)."""
        kv_dtype, block, align = q.kv_dtype, q.block, q.align
        dim = a.kv_lora_rank + a.qk_rope_head_dim
        row = KV_DTYPES[kv_dtype]
        if row.storage == DS_MLA_SLOT or (a.has_indexer and row.quantized_fp8):
            if not a.has_indexer:
                raise BadInput("--kv-cache-dtype fp8_ds_mla needs DeepSeek-V3.2 sparse MLA",
                               hint="use fp8 for DeepSeek V3/R1")
            out = [KVLayerSpec(name="mla", kind="full", block_size=block,
                               page_bytes=block * DS_MLA_FP8_SLOT,
                               formula="656 B fp8_ds_mla (512 fp8 + 16 B scales + 128 B bf16 "
                               "RoPE)", element_page_bytes=block * dim)]
        else:
            s = q.elem_bytes(kv_dtype)
            entry = round_up(dim * s, align) if align else dim * s
            pad = f", padded to {entry} B (V0: multiple of {align} B)" if entry != dim * s else ""
            out = [KVLayerSpec(name="mla", kind="full", block_size=block,
                               page_bytes=block * entry,
                               formula=f"1 latent head × ({a.kv_lora_rank}+{a.qk_rope_head_dim})"
                               f" × {s} B{pad}")]
        if a.has_indexer:
            idx = a.index_head_dim + a.index_head_dim // 128 * 4
            out.append(KVLayerSpec(name="indexer", kind="full", block_size=block,
                                   page_bytes=block * idx,
                                   formula=f"indexer K {a.index_head_dim} fp8 + fp32 scale/128"))
        return out

    def activation(self, a: Attention, q: ActQuery) -> AttentionStage:
        """q path, latent kv, the attention output buffer, then o_proj.

        Profile run (``decode=False``): ``MLAAttention.forward`` with no metadata allocates the
        worst-case kv_b_proj output ``[W, heads_local, qk_nope+v]`` (W = the chunked-prefill
        rows) and returns ``output.fill_(0)``. Where the profile run runs the prefill in full
        (``q.eager_prefill``: ``_forward_prefill_flash`` / ``_forward_prefill``), the live set at
        the output projection is instead the kv_b_proj output ``[T, h, nope+v]``, K with the
        RoPE part appended ``[T, h, qk]``, V padded to the qk head size ``[T, h, qk]`` and the
        sliced output ``[T, h·v]``, with "prefill+out" also the layer's output ``[T, hidden]``
        allocated before the prefill. Decode (CUDA-graph capture, ``decode=True``): the absorbed
        q [b, h, kv_lora+rope] and the latent attention output [b, h, kv_lora].
        """
        t, s, h_l = q.t, q.s, a.num_heads // q.tp
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        latent = a.kv_lora_rank + a.qk_rope_head_dim
        parts: list[tuple[str, int]] = []
        if a.q_lora_rank:
            parts += [("fused q_a/kv_a out", t * (a.q_lora_rank + latent) * s),
                      ("q_a norm", t * a.q_lora_rank * s)]
        else:
            parts += [("kv_a out [T,kv_lora+rope]", t * latent * s)]
        parts += [("q [T,h·qk]", t * h_l * qk * s), ("kv_c normed", t * a.kv_lora_rank * s),
                  ("attn out [T,h·v]", t * h_l * a.v_head_dim * s)]
        if q.decode:
            parts += [("absorbed q [b,h,kv_lora+rope]", t * h_l * latent * s),
                      ("latent out [b,h,kv_lora]", t * h_l * a.kv_lora_rank * s)]
        elif q.eager_prefill:
            parts += [("kv_b out [T,h,nope+v]", t * h_l * (a.qk_nope_head_dim + a.v_head_dim) * s),
                      ("k [T,h,qk]", t * h_l * qk * s), ("v padded [T,h,qk]", t * h_l * qk * s)]
            if q.eager_prefill == "prefill+out":
                parts.append(("layer output [T,H]", t * q.hidden * s))
        else:
            w = q.chunked_prefill_rows()
            parts += [(f"kv_b worst case [{w},h,nope+v]",
                       w * h_l * (a.qk_nope_head_dim + a.v_head_dim) * s)]
        return AttentionStage(label=self.name, parts=parts, out_proj="o_proj")

    def rope_caches(self, spec: ModelSpec, layers: list[Layer], model_dtype: str,
                    max_pos: int) -> list[RopeCache]:
        """``rotary_dim = qk_rope_head_dim``; the config's ``yarn`` becomes ``deepseek_yarn``
        (``deepseek_v2.py`` ``DeepseekV2MLAAttention.__init__``), model dtype."""
        a = layers[0].attention
        if a.rope == "none":  # Kimi-Linear's MLA (mla_use_nope): rotary_emb=None
            return []
        positions, how = rope_positions(rope_scaling(spec), max_pos)
        return [RopeCache(f"MLA {how}", positions, a.qk_rope_head_dim, model_dtype)]

    def weights(self, w: WeightSink, layer: Layer, p: str) -> None:
        """``vllm/model_executor/models/deepseek_v2.py``: q_a / kv_a replicated, q_b and kv_b
        split heads by TP, o_proj row-parallel; the absorbed ``W_UK_T`` / ``W_UV`` the MLA
        backend keeps after loading (``MLACommonImpl.process_weights_after_loading``); V3.2's
        lightning indexer (replicated): wq_b, wk, k_norm, weights_proj."""
        a = layer.attention
        h = w.spec.hidden_size
        g = "attention (MLA)"
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            w.linear(p + "self_attn.q_a_proj", g, a.q_lora_rank, h, shard="rep")
            w.vector(p + "self_attn.q_a_layernorm", g, a.q_lora_rank)
            w.linear(p + "self_attn.q_b_proj", g, a.num_heads * qk, a.q_lora_rank, shard="col")
        else:
            w.linear(p + "self_attn.q_proj", g, a.num_heads * qk, h, shard="col")
        w.linear(p + "self_attn.kv_a_proj_with_mqa", g, a.kv_lora_rank + a.qk_rope_head_dim, h,
                 shard="rep")
        w.vector(p + "self_attn.kv_a_layernorm", g, a.kv_lora_rank)
        w.linear(p + "self_attn.kv_b_proj", g,
                 a.num_heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank,
                 shard="col")
        w.linear(p + "self_attn.o_proj", g, h, a.num_heads * a.v_head_dim, shard="row")
        w.absorbed_latent(a, p, g)
        if a.has_indexer:
            gi = "indexer"
            w.linear(p + "self_attn.indexer.wq_b", gi, a.index_n_heads * a.index_head_dim,
                     a.q_lora_rank or h, shard="rep")
            w.linear(p + "self_attn.indexer.wk", gi, a.index_head_dim, h, shard="rep")
            w.vector(p + "self_attn.indexer.k_norm", gi, 2 * a.index_head_dim)
            w.linear(p + "self_attn.indexer.weights_proj", gi, a.index_n_heads, h,
                     shard="rep", quantise=False)


KIND = MLA()

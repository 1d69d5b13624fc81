"""GQA (MHA / GQA / MQA with per-head K and V, optional sliding window, sinks, q/k norms): its KV
page, its profile-run live set, its RoPE cache and its weights.

Sources: vLLM@52a31cc ``vllm/v1/kv_cache_interface.py`` (``FullAttentionSpec`` /
``SlidingWindowSpec`` page size), ``vllm/model_executor/layers/linear.py``
(``QKVParallelLinear``), ``gpu_model_runner.py`` ``profile_run``; vLLM 0.33.0
``model_executor/layers/rotary_embedding/`` ``get_rope``; TurboQuant slots
``vllm/model_executor/layers/quantization/turboquant/config.py`` (vLLM@52a31cc).
"""

from __future__ import annotations

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
from memprof.core.kv_dtypes import DEFAULT as DEFAULT_KV_DTYPE
from memprof.core.models import Attention, Layer, ModelSpec
from memprof.core.models.families import family_row

DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE (vLLM@52a31cc)

class GQA(AttentionKind):
    """Standard attention: K and V per KV head, split by TP (replicated past the KV heads)."""

    name = "gqa"
    kv_heads_replicate = True
    replica = "qkv"

    def default_block_size(self, arch: str) -> int:
        return DEFAULT_BLOCK_SIZE

    def supports_turboquant(self) -> bool:
        return True

    def kv_pages(self, a: Attention, q: KVQuery) -> list[KVLayerSpec]:
        kv_local = max(1, a.num_kv_heads // q.tp)
        kv_dtype, block = q.kv_dtype, q.block
        row = KV_DTYPES[kv_dtype]
        if row.turboquant and not q.tq_boundary:
            slot = q.tq_slot_bytes(kv_dtype, a.head_dim)
            page = block * kv_local * slot
            formula = f"{kv_local} KV head(s) × {slot} B TurboQuant slot"
        else:
            s = q.elem_bytes(DEFAULT_KV_DTYPE if row.turboquant else kv_dtype)
            page = block * kv_local * (a.head_dim + a.v_head_dim) * s
            formula = f"{kv_local} KV head(s) × ({a.head_dim}+{a.v_head_dim}) × {s} B"
            if q.tq_boundary:
                formula += " (TurboQuant boundary layer, model dtype)"
        if a.chunk_size:  # ChunkedLocalAttentionSpec (v1/kv_cache_interface.py, v0.10.1)
            return [KVLayerSpec(name="chunked", kind="chunked", block_size=block, page_bytes=page,
                                window=a.chunk_size,
                                formula=f"{formula}, chunks of {a.chunk_size}")]
        if a.sliding_window:
            return [KVLayerSpec(name="sliding", kind="sliding", block_size=block, page_bytes=page,
                                window=a.sliding_window,
                                formula=f"{formula}, window {a.sliding_window}")]
        return [KVLayerSpec(name="full", kind="full", block_size=block, page_bytes=page,
                            formula=formula)]

    def activation(self, a: Attention, q: ActQuery) -> AttentionStage:
        """qkv_proj output [T, (h+2·kv)·D], the attention output buffer [T, h·Dv] (filled with
        zeros in the profile run, vLLM@52a31cc gpu_model_runner.py profile_run), then o_proj;
        Qwen3 q/k norms are out of place."""
        t, s = q.t, q.s
        h_l, kv_l = a.num_heads // q.tp, max(1, a.num_kv_heads // q.tp)
        gate = 2 if a.output_gate else 1  # Qwen3-Next: q and its gate from one projection
        parts = [("qkv [T,(h+2kv)·D]",
                  t * (gate * h_l * a.head_dim + kv_l * (a.head_dim + a.v_head_dim)) * s),
                 ("attn out [T,h·Dv]", t * h_l * a.v_head_dim * s)]
        if a.qk_norm:
            parts.append(("q/k norm out", t * (h_l + kv_l) * a.head_dim * s))
        return AttentionStage(label=self.name, parts=parts, out_proj="o_proj")

    def rope_caches(self, spec: ModelSpec, layers: list[Layer], model_dtype: str,
                    max_pos: int) -> list[RopeCache]:
        """One cache of ``head_dim × partial_rotary_factor`` per distinct rotary of the layers
        (``Attention.rope`` / ``rope_theta``: ``get_rope`` keeps one instance per base and
        scaling), in the model dtype unless the family builds it in fp32 (its row's
        ``rope_fp32``). A ``plain`` layer's rotary is unscaled (Gemma 3's sliding layers: vLLM
        ``gemma3.py`` ``Gemma3Attention.__init__`` passes ``rope_local_base_freq`` and
        ``{"rope_type": "default"}``); a ``none`` layer has none (Llama 4's NoPE layers:
        ``llama4.py`` ``Llama4Attention`` builds no ``rotary_emb``). A config that states
        ``rotary_dim`` instead of the factor gets ``rotary_dim / head_dim`` (vLLM
        ``minimax_m2.py`` ``MiniMaxM2Attention`` sets ``partial_rotary_factor`` so)."""
        out: list[RopeCache] = []
        seen: set[tuple[str, float]] = set()
        prev = None  # builders share one Attention per layer kind: skip repeats cheaply
        for x in layers:
            a = x.attention
            if a is prev:
                continue
            prev = a
            if (a.rope, a.rope_theta) in seen or a.rope == "none":
                continue
            seen.add((a.rope, a.rope_theta))
            plain = a.rope == "plain"
            rs = {} if plain else rope_scaling(spec)
            positions, how = rope_positions(rs, max_pos,
                                            spec.raw.get("original_max_position_embeddings"))
            if plain:
                how = f"{how} (θ={a.rope_theta:g})"
            partial = spec.raw.get("partial_rotary_factor")
            rotary_dim = spec.raw.get("rotary_dim")
            if partial is None and isinstance(rotary_dim, int) and 0 < rotary_dim <= a.head_dim:
                rotary = rotary_dim
            else:
                rotary = int(a.head_dim * float(partial or 1.0))
            dtype = "float32" if family_row(spec.family).rope_fp32 else model_dtype
            out.append(RopeCache(how, positions, rotary, dtype, mrope="mrope_section" in rs))
        return out

    def weights(self, w: WeightSink, layer: Layer, p: str) -> None:
        """``QKVParallelLinear`` (q split by TP, kv replicated past the KV heads; q doubled by an
        output gate), o_proj row-parallel, q/k norms, gpt-oss-style sinks (one learned logit per
        local head)."""
        a = layer.attention
        h = w.spec.hidden_size
        g = "attention" + (" (sliding)" if a.sliding_window else "")
        kv_rep = max(1, w.tp // a.num_kv_heads)
        kv_local = max(1, a.num_kv_heads // w.tp)
        # ``output_gate`` (Qwen3-Next, vLLM v0.11.0 qwen3_next.py Qwen3NextAttention):
        # QKVParallelLinear of total_num_heads × (1 + attn_output_gate) query heads
        gate = 2 if a.output_gate else 1
        qo, kvo = gate * a.num_heads * a.head_dim // w.tp, 2 * kv_local * a.head_dim
        qkv = p + "self_attn.qkv_proj"
        w.fused_slice(qkv + "(q)", g, qo, h, quant_of=qkv, replicas=w.copies, note=" (col)")
        w.fused_slice(qkv + "(kv)", g, kvo, h, quant_of=qkv, replicas=w.copies * kv_rep,
                      note=f" ({kv_local} KV head(s) per rank, ×{kv_rep} replicated)")
        if a.qkv_bias:
            w.bias(qkv + "(q).bias", g, qo, replicas=w.copies, formula="q bias")
            w.bias(qkv + "(kv).bias", g, kvo, replicas=w.copies * kv_rep, formula="kv bias")
        w.linear(p + "self_attn.o_proj", g, h, a.num_heads * a.head_dim, shard="row",
                 bias=a.o_bias)
        if a.qk_norm and a.qk_norm_across_heads:  # one weight per head row, TP-split
            w.vector(p + "self_attn.q_norm", g, a.num_heads * a.head_dim, sharded=True)
            w.vector(p + "self_attn.k_norm", g, a.num_kv_heads * a.head_dim, sharded=True)
        elif a.qk_norm:
            w.vector(p + "self_attn.q_norm", g, a.head_dim)
            w.vector(p + "self_attn.k_norm", g, a.head_dim)
        if a.sinks:
            w.vector(p + "self_attn.sinks", g, a.num_heads, "bfloat16", sharded=True)


KIND = GQA()

"""DeepSeek-V4 compressed sparse attention (SWA-only, C4 = CSA with its indexer, C128 = HCA):
its KV pages, its profile-run live set, its RoPE caches and its weights. The kind exists only in
the DeepSeek-V4 family, so this module is one of that family's own (its row lists it).

Sources: vLLM @023da1fc DeepSeek-V4 KV specs and ``flashmla_sparse`` / ``fp8_ds_mla`` slot;
``vllm/model_executor/models/deepseek_v4.py`` @023da1fc (weights, padded heads); vLLM
0.26.0–0.33.0 ``models/deepseek_v4/attention.py`` (profile-run live set);
``layers/sparse_attn_indexer.py`` (0.23.0, 0.26.0, 0.33.0 wheels); the DeepSeek-V4
checkpoint's tensors (``model.safetensors.index.json``).
"""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.base.units import MiB, fmt_bytes, round_up
from memprof.core.attention.base import (
    ActQuery,
    AttentionKind,
    AttentionStage,
    KVLayerSpec,
    KVQuery,
    Parts,
    RopeCache,
    WeightSink,
    rope_positions,
    rope_scaling,
)
from memprof.core.attention.mla import INDEXER_SLOT_FP8
from memprof.core.kv_dtypes import BY_NAME as KV_DTYPES
from memprof.core.models import Attention, Layer, ModelSpec

# KV (vLLM @023da1fc flashmla_sparse / fp8_ds_mla slot; vLLM @023da1fc DeepSeek-V4 KV specs)
DSV4_SLOT_FP8 = 584  # 448 fp8 NoPE + 128 bf16 RoPE + 8 B scales
DSV4_SLOT_BF16 = 1024  # SM100 FlashInfer path: plain bf16 rows of 512
DSV4_ALIGN = 576  # pages rounded up to a multiple of 576 on the fp8_ds_mla path
DSV4_BLOCK = 256
DSV4_SWA_BLOCK = 64

# FlashMLA pads the heads to at least 64 (``padded_heads = max(n_local_heads, 64)``,
# vllm/model_executor/models/deepseek_v4.py @023da1fc); ``o_padded`` is [T, padded_heads, 512].
DSV4_MIN_PADDED_HEADS = 64
# The sparse indexer op of a C4 layer, in the profile run (no attention metadata), allocates
# ``torch.empty(VLLM_SPARSE_INDEXER_MAX_LOGITS_MB · 1024 · 1024, uint8)`` "to simulate for peak
# logits tensor memory during inference" and holds it until the op returns (the default is 512;
# vllm/envs.py). Read in the 0.23.0, 0.26.0 and 0.33.0 wheels:
# vllm/model_executor/layers/sparse_attn_indexer.py ``sparse_attn_indexer``, the
# ``not isinstance(attn_metadata, dict)`` branch; DeepSeek-V4's ``DeepseekV4Indexer.indexer_op``
# is that ``SparseAttnIndexer`` on CUDA (models/deepseek_v4/attention.py ``_get_attn_cls``).
DSV4_INDEXER_MAX_LOGITS_BYTES = 512 * MiB

# the scratch catalog's key of the buffers every DeepSeek-V4 deployment has, whatever the
# backend (memprof/core/scratch/dsv4.py)
SCRATCH_KEY = "deepseek_v4"


class DSV4(AttentionKind):
    """One SWA cache per layer, plus the compressed caches, the indexer K cache and the
    compressor states of C4 / C128 layers, all drawn from one packed block pool."""

    name = "dsv4"
    packed_kv_pool = True
    model_init_buffers = True  # topk_indices_buffer, _mtp_hidden_buffer
    scratch_key = SCRATCH_KEY
    # Three aux CUDA streams run bf16 GEMMs in parallel with the main one (compressor kv_score,
    # indexer.weights_proj, indexer.compressor kv_score; "Disable them on ROCm"),
    # vllm/model_executor/models/deepseek_v4.py @023da1fc.
    aux_gemm_streams = 3

    def default_block_size(self, arch: str) -> int:
        """256-token logical blocks."""
        return DSV4_BLOCK

    def kv_pages(self, a: Attention, q: KVQuery) -> list[KVLayerSpec]:
        kv_dtype = q.kv_dtype
        layout = KV_DTYPES[kv_dtype].dsv4_slot  # the KV dtype row's DeepSeek-V4 slot
        if layout == "fp8":
            slot, align = DSV4_SLOT_FP8, DSV4_ALIGN
        elif layout == "bf16":
            slot, align = DSV4_SLOT_BF16, 0
        else:
            raise BadInput(f"--kv-cache-dtype {kv_dtype} is not supported for DeepSeek-V4",
                           hint="auto/fp8 (fp8_ds_mla, 584 B) or bfloat16 (1024 B)")

        def pad(n: int) -> int:
            return round_up(n, align) if align else n

        out = [KVLayerSpec(name="swa", kind="sliding", block_size=DSV4_SWA_BLOCK,
                           page_bytes=pad(DSV4_SWA_BLOCK * slot), window=a.sliding_window or 128,
                           formula=f"64 × {slot} B SWA")]
        r = a.compress_ratio
        if r == 4:
            out += [
                KVLayerSpec(name="c4a", kind="full", block_size=DSV4_BLOCK,
                            page_bytes=pad(DSV4_BLOCK // 4 * slot),
                            formula=f"{DSV4_BLOCK // 4} × {slot} B (1 entry per 4 tokens)"),
                KVLayerSpec(name="c4_indexer", kind="full", block_size=DSV4_BLOCK,
                            page_bytes=round_up(DSV4_BLOCK // 4 * INDEXER_SLOT_FP8, DSV4_ALIGN),
                            formula=f"{DSV4_BLOCK // 4} × 132 B fp8 indexer K"),
                KVLayerSpec(name="c4_state", kind="sliding", block_size=4,
                            page_bytes=round_up(4 * 2048 * 4, DSV4_ALIGN), window=8,
                            formula="4 × 2048 fp32 compressor state"),
                KVLayerSpec(name="c4_indexer_state", kind="sliding", block_size=4,
                            page_bytes=round_up(4 * 512 * 4, DSV4_ALIGN), window=8,
                            formula="4 × 512 fp32 indexer-compressor state"),
            ]
        elif r == 128:
            out += [
                KVLayerSpec(name="c128a", kind="full", block_size=DSV4_BLOCK,
                            page_bytes=pad(DSV4_BLOCK // 128 * slot),
                            formula=f"{DSV4_BLOCK // 128} × {slot} B (1 entry per 128 tokens)"),
                KVLayerSpec(name="c128_state", kind="sliding", block_size=8,
                            page_bytes=round_up(8 * 1024 * 4, DSV4_ALIGN), window=128,
                            formula="8 × 1024 fp32 compressor state"),
            ]
        return out

    def _inputs(self, a: Attention, q: ActQuery) -> Parts:
        """What a DeepSeek-V4 attention layer holds when its sparse MLA runs (vLLM
        models/deepseek_v4/attention.py ``forward``, 0.26.0–0.33.0): o_padded [T, max(h_l,64),
        512] (``_alloc_attn_out``, allocated first), the fused wq_a|wkv output [T, q_lora+512],
        q_norm, wq_b → q [T, h_l·512], kv_norm, the indexer's q [T, 64·128] and weights (C4
        layers), the compressors' fp32 kv|score GEMM outputs (C4: 2·1024, C128: 2·512 cols)."""
        t, s = q.t, q.s
        h_l = a.num_heads // q.tp
        ph = max(h_l, DSV4_MIN_PADDED_HEADS)
        q_lora = a.q_lora_rank or 0
        parts = [("fused wq_a|wkv out", t * (q_lora + a.head_dim) * s),
                 ("q_norm", t * q_lora * s),
                 ("q [T,h·512]", t * h_l * a.head_dim * s), ("kv_norm", t * a.head_dim * s)]
        # The compressors' kv|score GEMMs write fp32: ``torch.mm(hidden_states,
        # fused_wkv_wgate.weight.T, out_dtype=torch.float32)`` → [T, 2·coff·head_dim], coff = 2
        # at C4 (overlap), 1 at C128; the C4 indexer's own compressor likewise at its head_dim
        # (vLLM 0.26.0–0.33.0 models/deepseek_v4/attention.py
        # ``_run_parallel_input_projections``; compressor.py ``DeepseekCompressor.forward``:
        # "input bf16, output are fp32"). Both are alive until the profile run's early return in
        # the compressor.
        if a.compress_ratio == 4:
            parts += [("indexer q", t * a.index_n_heads * a.index_head_dim * s),
                      ("indexer weights fp32", t * a.index_n_heads * 4),
                      ("compressor kv|score fp32", t * 2 * 2 * a.head_dim * 4),
                      ("indexer compressor kv|score fp32", t * 2 * 2 * a.index_head_dim * 4)]
        elif a.compress_ratio == 128:
            parts += [("compressor kv|score fp32", t * 2 * a.head_dim * 4)]
        parts.append(("o_padded [T,ph,512]", t * ph * a.head_dim * s))
        return parts

    def activation(self, a: Attention, q: ActQuery) -> AttentionStage:
        """The inputs (``_inputs``), then the grouped wo_a output z [T, groups/tp, o_lora] and
        wo_b (vllm/model_executor/models/deepseek_v4.py @023da1fc). The attention kernel itself
        is skipped in the profile run; its prefill gather workspace belongs to the scratch
        catalog (``memprof.core.scratch``). A C4 layer's sparse indexer op in the profile run is
        a stage of its own: everything the inputs hold (o_padded is allocated before it; the op
        runs just before ``forward_mqa``, vLLM 0.33.0 models/deepseek_v4/attention.py
        ``_sparse_indexer_and_attn``) plus the op's logits stand-in,
        ``DSV4_INDEXER_MAX_LOGITS_BYTES``, freed when the op returns (z and wo_b come after).
        Its K-gather and top-k workspaces go to the WorkspaceManager (not counted here)."""
        label = self.name + (f", C{a.compress_ratio}" if a.compress_ratio else ", SWA-only")
        inputs = self._inputs(a, q)
        z = ("z [T,g,o_lora]", q.t * max(1, a.o_groups // q.tp) * a.o_lora_rank * q.s)
        extra: tuple[tuple[str, Parts], ...] = ()
        if a.compress_ratio == 4 and a.index_n_heads and not q.decode:
            extra = (("sparse indexer op (dsv4, C4, profile run)",
                      [*inputs, ("indexer logits stand-in (VLLM_SPARSE_INDEXER_MAX_LOGITS_MB)",
                                 DSV4_INDEXER_MAX_LOGITS_BYTES)]),)
        return AttentionStage(label=label, parts=[*inputs, z], out_proj="wo_b", extra=extra)

    def rope_caches(self, spec: ModelSpec, layers: list[Layer], model_dtype: str,
                    max_pos: int) -> list[RopeCache]:
        """fp32 (``DeepseekV4ScalingRotaryEmbedding.__init__``), one per theta:
        ``rope_theta`` for SWA-only layers and the MTP block, ``compress_rope_theta`` for
        compressed layers, each ``original × factor`` = max_position_embeddings positions
        (0.20.0 ``models/deepseek_v4.py::DeepseekV4Attention``; 0.33.0
        ``models/deepseek_v4/common/rope.py::build_deepseek_v4_rope``)."""
        a = layers[0].attention
        out = []
        for compressed in sorted({layer.attention.compress_ratio > 1 for layer in layers}):
            theta = spec.raw.get("compress_rope_theta" if compressed else "rope_theta")
            out.append(RopeCache(f"θ={theta} ({'compressed' if compressed else 'SWA/MTP'} "
                                 "layers)", max_pos, a.qk_rope_head_dim, "float32"))
        return out

    def weights(self, w: WeightSink, layer: Layer, p: str) -> None:
        """Attention, compressor and indexer (the DeepSeek-V4 checkpoint's tensors; vLLM
        deepseek_v4.py @023da1fc): wq_a+wkv replicated (``disable_tp``); wq_b, wo_a
        column-parallel, wo_b row-parallel; ``attn_sink`` fp32 padded to at least 64 local
        heads; compressor and indexer replicated, the compressor in bf16
        (``quant_config=None``)."""
        a = layer.attention
        h = w.spec.hidden_size
        r = a.compress_ratio
        g = {0: "attention (SWA)", 4: "attention (C4)", 128: "attention (C128)"}[r]
        q = a.q_lora_rank or 0
        w.linear(p + "attn.wq_a", g, q, h, shard="rep")
        w.linear(p + "attn.wkv", g, a.head_dim, h, shard="rep")
        w.vector(p + "attn.q_norm", g, q)
        w.vector(p + "attn.kv_norm", g, a.head_dim)
        w.linear(p + "attn.wq_b", g, a.num_heads * a.head_dim, q, shard="col")
        w.linear(p + "attn.wo_a", g, a.o_groups * a.o_lora_rank,
                 a.num_heads * a.head_dim // a.o_groups, shard="col")
        w.linear(p + "attn.wo_b", g, h, a.o_groups * a.o_lora_rank, shard="row")
        local = a.num_heads // w.tp
        padded = max(local, DSV4_MIN_PADDED_HEADS)
        w.padded_vector(p + "attn.attn_sink", g, "attn_sink", local, padded, "float32",
                        f"max({local}, 64)×4B fp32")
        if r:
            coff = 2 if r == 4 else 1
            width = coff * a.head_dim
            w.linear(p + "attn.compressor.wkv_wgate", g, 2 * width, h, shard="rep",
                     quantise=False)
            w.vector(p + "attn.compressor.ape", g, r * width, "float32")
            w.vector(p + "attn.compressor.norm", g, a.head_dim)
        if r == 4:
            gi = "indexer"
            w.linear(p + "attn.indexer.wq_b", gi, a.index_n_heads * a.index_head_dim, q,
                     shard="rep")
            w.linear(p + "attn.indexer.weights_proj", gi, a.index_n_heads, h, shard="rep",
                     quantise=False)
            iw = 2 * a.index_head_dim
            w.linear(p + "attn.indexer.compressor.wkv_wgate", gi, 2 * iw, h, shard="rep",
                     quantise=False)
            w.vector(p + "attn.indexer.compressor.ape", gi, 4 * iw, "float32")
            w.vector(p + "attn.indexer.compressor.norm", gi, a.index_head_dim)

    def sglang_rope_buffers(self, spec: ModelSpec, layers: list[Layer],
                            max_pos: int) -> list[tuple[str, int, str]]:
        """SGLang (``models/deepseek_v4.py``, sgl-project/sglang@000328a8; the module docstring
        of ``memprof.core.terms.rope_cache``): per distinct ``rope_base`` a ``positions ×
        qk_rope_head_dim × 4 B`` fp32 cos/sin cache (positions = ``original × factor``) and a
        ``max_position_embeddings × qk_rope_head_dim/2 × 8 B`` complex64 ``freqs_cis``."""
        positions, how = rope_positions(rope_scaling(spec), max_pos)
        dim = layers[0].attention.qk_rope_head_dim
        out: list[tuple[str, int, str]] = []
        for compressed in sorted({layer.attention.compress_ratio > 1 for layer in layers}):
            theta = spec.raw.get("compress_rope_theta" if compressed else "rope_theta")
            where = "compressed" if compressed else "SWA-only"
            cos_sin = positions * dim * 4
            freqs = max_pos * (dim // 2) * 8
            out.append((f"RoPE cos/sin cache θ={theta} ({where} layers, SGLang)", cos_sin,
                        f"{how} = {positions} positions × {dim} × 4 B float32 "
                        f"({fmt_bytes(cos_sin)})"))
            out.append((f"DeepSeek-V4 freqs_cis θ={theta} ({where} layers, SGLang)", freqs,
                        f"{max_pos} positions × {dim // 2} × 8 B complex64 "
                        f"({fmt_bytes(freqs)})"))
        return out


KIND = DSV4()

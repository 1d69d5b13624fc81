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

from collections import Counter
from typing import Any

from memprof.base.errors import BadInput
from memprof.base.units import MiB, cdiv, fmt_bytes, round_up
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
from memprof.core.versions import Rule, value_at

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


# DeepSeek-V4 pool, 0.23.0–0.28.x: the tuple-based grouping (kv_cache_utils.py
# ``group_and_unify_kv_cache_specs`` + ``_get_kv_cache_groups_uniform_groups``): the compressor-
# state pages are padded up to the nearest full-MLA page size, the SWA / state groups are split
# into groups of at most T = ``_approximate_gcd(tuples, lower_bound=full-MLA tuples)`` layer
# tuples, and one block id costs Σ over page sizes of page × the most layers any group has of it
# (``_bucket_layers_by_page_size``, ``_get_kv_cache_config_deepseek_v4``). From 0.29.0
# ``_get_packed_kv_cache_groups`` packs per group and a block costs the largest group's Σ pages
# rounded to the alignment (``_get_kv_cache_bytes_per_block``), as ``_pool`` computes.
DSV4_TUPLE_POOL: tuple[Rule, ...] = (
    Rule(name="dsv4_tuple_pool", changes="KV cache: DeepSeek-V4 block stride and admission",
         since=None, until="0.29.0", value=True,
         introduced_by="DeepSeek-V4 support (tuple-based grouping; read in 0.23.0–0.28.0)",
         removed_by="0.29.0 _get_packed_kv_cache_groups / _get_kv_cache_bytes_per_block "
         "(read in the 0.29.0 wheel; PR not identified)",
         source="0.23.0–0.28.0 v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_groups, "
         "_bucket_layers_by_page_size, _max_memory_usage_bytes_from_groups (DeepseekV4 branch: "
         "Σ_g num_layer_tuples × pages_g × Σ distinct full-MLA page sizes)",
         applies_to="dsv4"),
)


class DSV4(AttentionKind):
    """One SWA cache per layer, plus the compressed caches, the indexer K cache and the
    compressor states of C4 / C128 layers, all drawn from one packed block pool."""

    name = "dsv4"
    hip_aiter_heads = None  # SGLang's ROCm backend choice for it is not read
    packed_kv_pool = True
    rules = (DSV4_TUPLE_POOL,)
    always_sliding = True  # the SWA cache of every layer
    model_init_buffers = True  # _mtp_hidden_buffer
    # one topk_indices_buffer for the drafter (0.33.0 models/deepseek_v4/nvidia/mtp.py: the
    # predictor's, not its layers')
    drafter_topk_per_layer = False
    scratch_key = SCRATCH_KEY
    # Three aux CUDA streams run bf16 GEMMs in parallel with the main one (compressor kv_score,
    # indexer.weights_proj, indexer.compressor kv_score; "Disable them on ROCm"),
    # vllm/model_executor/models/deepseek_v4.py @023da1fc.
    aux_gemm_streams = 3

    def default_block_size(self, arch: str) -> int:
        """256-token logical blocks."""
        return DSV4_BLOCK

    def packed_pool(self, specs: list[KVLayerSpec], kv_dtype: str, version: str | None,
                    engine: str, group0_concurrency: bool) -> dict[str, Any]:
        """The packed pool of ``_pool``; the ≤0.28 tuple pool where ``DSV4_TUPLE_POOL`` holds;
        each group entry's Σ pages where ``CONCURRENCY_GROUP0_PAGE`` does."""
        plan = _pool(specs, kv_dtype)
        if value_at(DSV4_TUPLE_POOL, version, False, engine=engine):
            plan = _tuple_pool(plan)
        if group0_concurrency:
            plan = {**plan, "concurrency_group_bytes": _group_bytes(plan)}
        return plan

    def kv_pages(self, a: Attention, q: KVQuery) -> list[KVLayerSpec]:
        kv_dtype = q.kv_dtype
        layout = KV_DTYPES[kv_dtype].packed_slot  # the KV dtype row's DeepSeek-V4 slot
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


# --- the packed pool (``DSV4.packed_pool``), moved whole from memprof/core/kvcache.py ---

def _pool(specs: list[KVLayerSpec], kv: str) -> dict[str, Any]:
    """The packed pool (``KVPlan`` fields): ``block_stride = max over groups of Σ pages``; five
    groups (full_mla, two SWA subgroups, C4-state pairs, C128 state) draw block ids from one
    pool."""
    by = Counter(s.name for s in specs)
    page = {s.name: s.page_bytes for s in specs}
    full_mla = sum(s.page_bytes for s in specs if s.kind == "full")
    swa_sub = cdiv(by["swa"], 2) * page["swa"]
    c4_state = by["c4_state"] * (page.get("c4_state", 0) + page.get("c4_indexer_state", 0))
    c128_state = by["c128_state"] * page.get("c128_state", 0)
    stride = max(full_mla, swa_sub, c4_state, c128_state)
    groups = [("full_mla", DSV4_BLOCK, 0, 1), ("swa", DSV4_SWA_BLOCK, 128, 2)]
    if by["c4_state"]:
        groups.append(("c4_state", 4, 8, 1))
    if by["c128_state"]:
        groups.append(("c128_state", 8, 128, 1))
    return {
        "layers": tuple(specs), "block_size": DSV4_BLOCK, "block_bytes": stride,
        "bytes_per_token": cdiv(full_mla, DSV4_BLOCK), "layout": "dsv4_packed", "kv_dtype": kv,
        "group_blocks": tuple(groups),
        "formula": f"block stride {stride} B per {DSV4_BLOCK} tokens "
        f"({by['c4a']} C4 + {by['c128a']} C128 + {by['swa']} SWA layers)",
    }


def _groups(plan: dict[str, Any], tuples: int = 0) -> list[list[KVLayerSpec]]:
    """The layers of each KV cache group, in ``group_blocks`` order (full_mla, the SWA groups,
    C4 state, C128 state); SWA and state layers split into ``cdiv(n, tuples)`` groups
    (``layer_tuples[i::n]``), or as ``_pool`` splits them when ``tuples`` is 0."""
    full = [s for s in plan["layers"] if s.kind == "full"]
    kinds = {"swa": ["swa"], "c4_state": ["c4_state", "c4_indexer_state"],
             "c128_state": ["c128_state"]}
    out = [full]
    for name, _b, _w, n in plan["group_blocks"][1:]:
        members = [s for s in plan["layers"] if s.name in kinds[name]]
        per_page = max(Counter(s.page_bytes for s in members).values())
        groups = cdiv(per_page, tuples) if tuples else n
        by_name = [[s for s in members if s.name == k] for k in kinds[name]]
        for i in range(groups):
            out.append([s for layer_set in by_name for s in layer_set[i::groups]])
    return out


def _group_bytes(plan: dict[str, Any]) -> tuple[int, ...]:
    """Σ page bytes over all the groups of each ``group_blocks`` entry (the UniformType spec's
    ``page_size_bytes`` summed over the entry's groups)."""
    groups = _groups(plan)
    out, i = [], 0
    for _name, _b, _w, n in plan["group_blocks"]:
        out.append(sum(s.page_bytes for g in groups[i:i + n] for s in g))
        i += n
    return tuple(out)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """vLLM ``_approximate_gcd`` (0.23.0–0.33.0 kv_cache_utils.py / kv_cache_planning.py): the
    d in [lower_bound, max] with the least Σ (d − x mod d) mod d; ties prefer the larger d."""
    best_d, best_pad = max(1, lower_bound), -1
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad < 0 or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


def _tuple_pool(plan: dict[str, Any]) -> dict[str, Any]:
    """The DeepSeek-V4 pool of 0.23.0–0.28.x (``DSV4_TUPLE_POOL``; 0.26.0
    v1/core/kv_cache_utils.py):

    - ``_get_kv_cache_groups_uniform_groups``: T = ``_approximate_gcd`` of each grouped spec's
      ``get_num_layer_tuples()`` (the most layers of one page size), at least the full-MLA
      group's; every SWA/state spec split into ``cdiv(n, T)`` groups, its pages padded up to the
      nearest full-MLA page size (``page_size_padded``);
    - ``_bucket_layers_by_page_size`` / ``_get_kv_cache_config_deepseek_v4``: a block id costs
      Σ over page sizes of page × the most layers of that size in any one group;
    - ``_max_memory_usage_bytes_from_groups`` (DeepseekV4 branch): one request needs
      Σ_g num_layer_tuples × pages_g × Σ distinct full-MLA page sizes, num_layer_tuples the most
      any final group has.
    """
    full = [s for s in plan["layers"] if s.kind == "full"]
    full_pages = sorted({s.page_bytes for s in full})

    def padded(page: int) -> int:
        return min((p for p in full_pages if p >= page), default=page)

    def tuples_of(g: list[KVLayerSpec]) -> int:
        return max(Counter(padded(s.page_bytes) for s in g).values())

    before = _groups(plan)
    specs = [before[0]]  # the grouped specs before the split: full_mla, then one per kind
    i = 1
    for _name, _b, _w, n in plan["group_blocks"][1:]:
        specs.append([s for g in before[i:i + n] for s in g])
        i += n
    t = approximate_gcd([tuples_of(g) for g in specs], lower_bound=tuples_of(full))
    groups = _groups(plan, t)
    slots: Counter[int] = Counter()
    for g in groups:
        for page, k in Counter(padded(s.page_bytes) for s in g).items():
            slots[page] = max(slots[page], k)
    stride = sum(page * k for page, k in slots.items())
    group_blocks = (plan["group_blocks"][0], *(
        (name, b, w, cdiv(max(Counter(s.page_bytes for s in specs[k]).values()), t))
        for k, (name, b, w, _n) in enumerate(plan["group_blocks"][1:], start=1)))
    tuple_bytes = max(tuples_of(g) for g in groups) * sum(full_pages)
    layers = tuple(s._replace(page_bytes=padded(s.page_bytes)) for s in plan["layers"])
    return {**plan, "layers": layers, "block_bytes": stride, "group_blocks": group_blocks,
            "request_block_bytes": tuple_bytes,
            "formula": f"block stride {stride} B per {DSV4_BLOCK} tokens (≤0.28 tuple "
            f"pool, {t} layer tuples; {plan['formula'].split('(', 1)[-1]}"}

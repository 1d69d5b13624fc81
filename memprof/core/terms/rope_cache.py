"""RoPE cos/sin caches: buffers every rotary embedding registers at model construction, so they
count in vLLM's "model loading took" (the ``memory_allocated`` delta around construction).

vLLM 0.33.0 ``model_executor/layers/rotary_embedding/__init__.py::get_rope`` keeps one instance
per key ``(head_size, rotary_dim, max_position, is_neox_style, rope_parameters, dtype, ...)``
(``_ROPE_DICT``; the same cache in 0.7.1 ``rotary_embedding.py::get_rope``), so a process holds
one cache per *distinct* rotary config of the layers it builds. ``RotaryEmbeddingBase.__init__``
registers ``cos_sin_cache`` of ``[positions, rotary_dim]`` (cos and sin halves, ``base.py``):

- ``default`` / ``llama3``: ``positions = max_position_embeddings``, in the model dtype;
- ``yarn`` (``YaRNScalingRotaryEmbedding._compute_cos_sin_cache``): ``original_max_position ×
  factor``; ``linear``: ``max_position × factor``;
- DeepSeek V2/V3 MLA: ``rotary_dim = qk_rope_head_dim``, the config's ``yarn`` becomes
  ``deepseek_yarn`` (``deepseek_v2.py`` ``DeepseekV2MLAAttention.__init__``): ``original ×
  factor`` positions (``deepseek_scaling_rope.py``), model dtype on the compiled path;
- gpt-oss: YaRN in **fp32** (``gpt_oss.py`` ``OAIAttention.__init__`` passes
  ``dtype=torch.float32``);
- multimodal RoPE (a config whose rope parameters carry ``mrope_section``: Qwen2-VL,
  Qwen2.5-VL, Qwen3-VL, Qwen3.5): ``get_rope`` builds ``MRotaryEmbedding``, whose ``__init__``
  passes ``cache_max_position_num = max_position_embeddings × 4`` to the base class ("In
  Qwen2.5-VL, the maximum index value is related to the duration of the input video. We enlarge
  max_position_embeddings to 4 times"; YaRN-scaled too: ``original × 4 × factor``) from vLLM
  0.7.2 (``MROPE_CACHE_POSITIONS``);
- DeepSeek-V4: fp32 (``DeepseekV4ScalingRotaryEmbedding.__init__`` registers the fp32 cache),
  one per theta: ``rope_theta`` for SWA-only layers and the MTP block, ``compress_rope_theta``
  for compressed layers, each ``original × factor`` = max_position_embeddings positions
  (0.20.0 ``models/deepseek_v4.py::DeepseekV4Attention``; 0.33.0
  ``models/deepseek_v4/common/rope.py::build_deepseek_v4_rope``).

SGLang builds every other model's rotary through its own ``get_rope``
(``layers/rotary_embedding.py``, read in the sglang 0.4.3, 0.4.10, 0.5.3 and 0.5.9 wheels): the
same instance cache (``_ROPE_DICT``) and the same positions per scaling type as vLLM's, but
``RotaryEmbedding.__init__`` keeps ``cos_sin_cache`` in **fp32** on CUDA ("cache needs to be in
FP32 for numerical stability": ``if not _is_cuda: cache = cache.to(dtype)``, so ROCm keeps the
dtype vLLM's reading gives), and ``Phi3LongRoPEScaledRotaryEmbedding`` registers the short and
long caches and their concatenation (twice vLLM's bytes, in the model dtype). The model is built
under the target device (``model_loader/loader.py`` ``DefaultModelLoader.load_model``: ``with
target_device: _initialize_model``), so the caches are in the load's drop in free memory.

SGLang's DeepSeek-V4 (its own buffers, ``AttentionKind.sglang_rope_buffers``): each
``MQALayer.__init__`` (``models/deepseek_v4.py``, sgl-project/sglang@000328a8) builds
``get_rope_wrapper(...)`` → ``get_rope`` (instances cached in ``_ROPE_DICT``), a
``DeepseekScalingRotaryEmbedding`` of ``original × factor`` positions × ``qk_rope_head_dim``
whose cache ``RotaryEmbedding.__init__`` keeps in fp32 on CUDA ("cache needs to be in FP32",
``layers/rotary_embedding.py``), and registers ``freqs_cis`` from
``layers/deepseek_v4_rope.py::precompute_freqs_cis`` (``@lru_cache(2)``, ``torch.polar`` →
complex64 ``[max_position_embeddings, qk_rope_head_dim / 2]``), shared by the layer's compressor
and indexer. Both are built on the GPU (the loader constructs the model under the target
device), one of each per distinct ``rope_base`` (``compress_rope_theta`` for compressed layers,
``rope_theta`` for SWA-only ones).
"""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.attention import RopeCache, kind_of
from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines import engine_of
from memprof.core.kvcache import rank_layers
from memprof.core.models import Layer, ModelSpec
from memprof.core.versions import Rule, value_at

# How many times max_position_embeddings vLLM's MRotaryEmbedding builds its cache over.
MROPE_CACHE_POSITIONS: tuple[Rule, ...] = (
    Rule(name="mrope_cache_positions", changes="RoPE cos/sin cache (M-RoPE)",
         since="0.7.2", until=None, value=4,
         introduced_by="the Qwen2.5-VL support first released in 0.7.2 (PR not identified; "
         "0.7.1's MRotaryEmbedding builds max_position_embeddings positions)",
         source="0.7.2 model_executor/layers/rotary_embedding.py MRotaryEmbedding.__init__; "
         "0.28.0 model_executor/layers/rotary_embedding/mrope.py MRotaryEmbedding.__init__ "
         "(cache_max_position_num = max_position_embeddings * 4)", applies_to="mrope"),
)


def rope_caches(spec: ModelSpec, layers: list[Layer], model_dtype: str) -> list[RopeCache]:
    """The distinct RoPE caches a rank builds for ``layers`` (its PP stage, MTP included), as
    their attention kind builds them (``AttentionKind.rope_caches``)."""
    max_pos = spec.max_position_embeddings
    if not max_pos or not layers:
        return []
    # every layer of a model has the same kind (the family builders make one kind per model)
    return kind_of(layers[0].attention).rope_caches(spec, layers, model_dtype, max_pos)


def engine_rope_caches(ctx: TermContext) -> list[RopeCache]:
    """``rope_caches`` of the rank as vLLM builds them at the deployment's release: a
    multimodal rotary over ``MROPE_CACHE_POSITIONS`` × its positions (an engine or release
    without the rule: as ``rope_caches``)."""
    caches = rope_caches(ctx.spec, rank_layers(ctx.spec, ctx.dep, ctx.coord), ctx.model_dtype)
    if not any(c.mrope for c in caches):
        return caches
    k = value_at(MROPE_CACHE_POSITIONS, ctx.dep.engine_version, None, ctx.dep.engine)
    if not isinstance(k, int):
        return caches
    return [c._replace(positions=c.positions * k, label=f"{c.label} ×{k} (M-RoPE)")
            if c.mrope else c for c in caches]


def rope_cache_terms(ctx: TermContext) -> list[Component]:
    """``Σ over distinct rotary configs of positions × rotary_dim × dtype bytes`` — one
    component per cache, in model load."""
    if engine_of(ctx.dep).own_rope_buffers:
        layers = rank_layers(ctx.spec, ctx.dep, ctx.coord)
        return sglang_rope_terms(ctx.spec, layers, ctx.model_dtype, ctx.gpu.is_rocm)
    caches = engine_rope_caches(ctx)
    return [Component(name=f"RoPE cos/sin cache {c.label}", category="weights", bytes=c.bytes,
                      formula=f"{c.positions} positions × {c.rotary_dim} × "
                      f"{dtype_bytes(c.dtype)} B {c.dtype} ({fmt_bytes(c.bytes)})")
            for c in caches]


def sglang_rope_terms(spec: ModelSpec, layers: list[Layer], model_dtype: str = "bfloat16",
                      rocm: bool = False) -> list[Component]:
    """SGLang's rotary buffers: the attention kind's own where it says SGLang builds them
    apart (``AttentionKind.sglang_rope_buffers``: DeepSeek-V4), else SGLang's ``get_rope``
    caches (the module docstring): vLLM's distinct caches, each in fp32 on CUDA (``rocm``: the
    dtype of vLLM's reading), a LongRoPE one twice (short + long + their concatenation) in the
    model dtype."""
    max_pos = spec.max_position_embeddings
    if not max_pos or not layers:
        return []
    own = kind_of(layers[0].attention).sglang_rope_buffers(spec, layers, max_pos)
    if own:
        return [Component(name=name, category="weights", bytes=n, formula=formula)
                for name, n, formula in own]
    out = []
    for c in rope_caches(spec, layers, model_dtype):
        if c.label.startswith("LongRoPE"):
            n, dtype, how = 2 * c.bytes, c.dtype, "(short + long) × 2 (their concatenation too)"
        else:
            dtype = c.dtype if rocm else "float32"
            n, how = c.positions * c.rotary_dim * dtype_bytes(dtype), ""
        out.append(Component(
            name=f"RoPE cos/sin cache {c.label}", category="weights", bytes=n,
            formula=f"{c.positions} positions × {c.rotary_dim} × {dtype_bytes(dtype)} B {dtype}"
            f"{' ' + how if how else ''} (SGLang get_rope; {fmt_bytes(n)})"))
    return out


__all__ = ["MROPE_CACHE_POSITIONS", "RopeCache", "engine_rope_caches", "rope_cache_terms",
           "rope_caches", "sglang_rope_terms"]

"""Per-request state of Mamba-2 and linear-attention layers, and the page-size unification that
lets vLLM's hybrid KV-cache manager put them in one block pool with attention layers.

Shapes are those of vLLM's ``MambaStateShapeCalculator``
(vllm/model_executor/layers/mamba/mamba_utils.py, v0.10.2–v0.11 era), per TP rank; the
unification is ``HybridAttentionMambaModelConfig.verify_and_update_config``
(vllm/model_executor/models/config.py, v0.10.2; later moved to platforms/interface.py
``_align_hybrid_block_size``): the attention block size is raised to the smallest multiple of
the kernel alignment whose page holds one state, and the state page is padded up to that
attention page. The KV pool then treats a state as one block per request
(``memprof.core.kvcache``, ``state`` groups).
"""

from __future__ import annotations

from math import lcm, prod
from typing import NamedTuple

from memprof.base.errors import BadInput
from memprof.base.units import cdiv
from memprof.core.versions import Rule, newest, value_at

# Models with Mamba / linear-attention state run on V1's hybrid KV-cache manager by default from
# 0.10.2; up to 0.10.1 the engine oracle sends a model with inner state to V0 (its
# MambaCacheManager, which memprof does not model), and Qwen3-Next and Kimi-Linear do not exist.
HYBRID_STATE_V1: tuple[Rule, ...] = (
    Rule(name="hybrid_state_on_v1", changes="KV: recurrent-state layers (V1 hybrid manager)",
         since="0.10.2", until=None, value=True,
         introduced_by="0.10.2: _is_v1_supported_oracle no longer falls back to V0 for "
         "has_inner_state models (read in the 0.10.1 and 0.10.2 wheels; PR not identified)",
         source="0.10.1 engine/arg_utils.py _is_v1_supported_oracle ('V1 mamba models are "
         "unoptimized': _warn_or_fallback → V0); 0.10.2 / 0.11.0 model_executor/models/"
         "config.py HybridAttentionMambaModelConfig", applies_to="state"),
)

# Kernel block alignment of the attention page (v0.10.2 models/config.py
# HybridAttentionMambaModelConfig): 16 for standard attention; MLA 64 (CUTLASS MLA 128).
ATTENTION_BLOCK_ALIGNMENT = 16
MLA_BLOCK_ALIGNMENT = 64


def _divide(n: int, tp: int, what: str) -> int:
    """vLLM's ``divide``: the dimension must split evenly over the TP ranks."""
    if n % tp:
        raise BadInput(f"{what} ({n}) does not divide by tensor parallel size {tp}",
                       hint="choose a --tp that divides it")
    return n // tp


def extra_groups_for_head_shards(n_groups: int, tp: int) -> int:
    """Groups replicated so each head shard has its own (``extra_groups_for_head_shards``)."""
    return 0 if n_groups % tp == 0 else tp - n_groups


def mamba2_state_shapes(*, tp: int, intermediate_size: int, n_groups: int, num_heads: int,
                        head_dim: int, state_size: int, conv_kernel: int
                        ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(conv state, SSM state) of one Mamba-2 layer on one rank (``mamba2_state_shape``):
    conv ``(conv_kernel − 1, (intermediate + 2·groups·state) / tp)`` with the groups padded
    for head shards, SSM ``(heads / tp, head_dim, state)``."""
    groups = n_groups + extra_groups_for_head_shards(n_groups, tp)
    conv_dim = intermediate_size + 2 * groups * state_size
    return ((conv_kernel - 1, _divide(conv_dim, tp, "Mamba conv dimension")),
            (_divide(num_heads, tp, "Mamba heads"), head_dim, state_size))


def gated_delta_net_state_shapes(*, tp: int, num_k_heads: int, num_v_heads: int,
                                 head_k_dim: int, head_v_dim: int, conv_kernel: int
                                 ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(conv state, recurrent state) of one Gated DeltaNet layer on one rank
    (``gated_delta_net_state_shape``, no speculative tokens): conv
    ``(conv_kernel − 1, (2·k_heads·k_dim + v_heads·v_dim) / tp)``, recurrent
    ``(v_heads / tp, k_dim, v_dim)``."""
    conv_dim = 2 * head_k_dim * num_k_heads + head_v_dim * num_v_heads
    return ((conv_kernel - 1, _divide(conv_dim, tp, "linear-attention conv dimension")),
            (_divide(num_v_heads, tp, "linear-attention value heads"), head_k_dim, head_v_dim))


def kda_state_shapes(*, tp: int, num_heads: int, head_dim: int, conv_kernel: int
                     ) -> tuple[tuple[int, ...], ...]:
    """(q, k, v conv states, recurrent state) of one Kimi Delta Attention layer on one rank
    (vLLM v0.11.2 model_executor/layers/mamba/mamba_utils.py ``kda_state_shape``, no speculative
    tokens): three ``(conv_kernel − 1, heads·head_dim / tp)`` and ``(heads / tp, head_dim,
    head_dim)``."""
    proj = _divide(num_heads * head_dim, tp, "KDA projection")
    conv = (conv_kernel - 1, proj)
    return (conv, conv, conv, (_divide(num_heads, tp, "KDA heads"), head_dim, head_dim))


def state_page_bytes(shapes: tuple[tuple[int, ...], ...], dtype_bytes: tuple[int, ...]) -> int:
    """``MambaSpec.page_size_bytes`` before padding: Σ prod(shape) × element bytes."""
    if len(shapes) != len(dtype_bytes):
        raise ValueError("one dtype per state shape")
    return sum(prod(s) * b for s, b in zip(shapes, dtype_bytes, strict=True))


class AlignedPages(NamedTuple):
    """The attention block size and the (padded) state page after unification."""

    block_size: int  # "Setting attention block size to N tokens"
    page_bytes: int  # one block of one layer, attention and state alike
    state_bytes: int  # the state page before padding
    padding_pct: float  # "Padding mamba page size by X%"


def align_attention_block(*, attn_bytes_per_token: int, state_bytes: int, block_size: int,
                          alignment: int = ATTENTION_BLOCK_ALIGNMENT,
                          chunk: int = 0) -> AlignedPages:
    """Raise the attention block so that its page holds one state, then pad the state page to
    it (v0.10.2 models/config.py ``HybridAttentionMambaModelConfig.verify_and_update_config``):
    ``attn_block = alignment × cdiv(state, alignment × attn_bytes_per_token)``, taken when
    larger than ``block_size``. ``chunk`` (the Mamba-2 chunk size; 0: none), for a state cached
    per block (prefix caching in mode "all", or before 0.15.0 on a Mamba-2 model): ``c =
    lcm(chunk, alignment)``, ``attn_block = c × cdiv(cdiv(state, attn_bytes_per_token), c)``
    (0.14.1 models/config.py; 0.15.0 the "all" branch; 0.27.0 platforms/interface.py
    ``_align_hybrid_block_size``)."""
    if attn_bytes_per_token <= 0 or state_bytes <= 0:
        raise ValueError("page sizes must be positive")
    if chunk:
        c = lcm(chunk, alignment)
        block = max(block_size, c * cdiv(cdiv(state_bytes, attn_bytes_per_token), c))
    else:
        block = max(block_size, alignment * cdiv(state_bytes, alignment * attn_bytes_per_token))
    page = block * attn_bytes_per_token
    return AlignedPages(block_size=block, page_bytes=page, state_bytes=state_bytes,
                        padding_pct=100 * (page - state_bytes) / state_bytes)



# --- prefix caching of hybrid models: vLLM's ``mamba_cache_mode`` ------------------------------
#
# What one request holds in each state group, by release (``MambaSpec.max_memory_usage_bytes``,
# v1/kv_cache_interface.py), once ``MambaModelConfig.verify_and_update_config``
# (model_executor/models/config.py) has settled the mode from ``enable_prefix_caching``:
#
# | releases      | prefix caching     | mode when prefix caching is on  | state pages a request  |
# |               | unset (hybrid)     |                                 | holds in each group    |
# |---------------|--------------------|---------------------------------|------------------------|
# | 0.10.2–0.14.x | off                | no mode: Mamba-2 models cache a | off 1; on, Mamba-2:    |
# |               |                    | state per block; others: off    | cdiv(len, block)       |
# | 0.15.0–0.25.x | off                | "all" (Mamba-2), else "align"   | none 1, align 2,       |
# |               |                    |                                 | all cdiv(len, block)   |
# | 0.26.0–0.27.x | on                 | "all" (Mamba-2), else "align"   | as above               |
# | 0.28.0–0.31.x | on                 | "align" ("all" only if asked)   | as above               |
# | 0.32.0        | on                 | "align" ("all" removed)         | align 2 + 1 (Mamba-2)  |
# | 0.33.0        | on                 | "align"                         | align 2 + 1 (Mamba-2;  |
# |               |                    |                                 | GDN on FlashInfer)     |
#
# (Mamba-2: the models that declare ``SupportsMambaPrefixCaching``, of memprof's families
# Nemotron-H and Granite-4.0-H; "+ 1": the prefill checkpoint block, ``ALIGN_CHECKPOINT_BLOCKS``.)
#
# "align" keeps the smallest aligned attention block (``HybridAttentionMambaModelConfig``), so
# the pool's blocks do not change: only the blocks a request counts (maximum concurrency, the
# "GPU KV cache size" line where it is concurrency × max_model_len, the admission check). "all"
# raises the attention block to a multiple of the Mamba-2 chunk size (``align_attention_block``
# with ``chunk``: the config's ``mamba_chunk_size`` or ``chunk_size``) and counts a state page
# per block of context; a config that states no chunk size is refused there with the way out.
# A mode given while prefix caching is off is reset to "none" ("Mamba cache mode is set to
# 'none' when prefix caching is disabled"); "none" given with prefix caching on is replaced by
# the release's default.

MAMBA_CACHE_MODES = ("none", "all", "align")
"""vLLM's ``--mamba-cache-mode`` values (``MambaCacheMode``, config/cache.py 0.15.0–0.31.0)."""

# The --mamba-cache-mode flag and the values its parser accepts.
MAMBA_CACHE_MODE_FLAG: tuple[Rule, ...] = (
    Rule(name="mamba_cache_mode", changes="KV: state pages a request holds (prefix caching)",
         since="0.15.0", until="0.32.0", value=("none", "all", "align"),
         introduced_by="read in the 0.15.0 wheel (absent in 0.14.1; PR not identified)",
         removed_by="0.32.0: MambaCacheMode = Literal['align', 'none'] (read in the wheel)",
         source="0.15.0 / 0.25.0 / 0.31.0 config/cache.py MambaCacheMode = Literal['all', "
         "'align', 'none'], CacheConfig.mamba_cache_mode = 'none'; engine/arg_utils.py "
         "--mamba-cache-mode", applies_to="state"),
    Rule(name="mamba_cache_mode", changes="KV: state pages a request holds (prefix caching)",
         since="0.32.0", until=None, value=("none", "align"),
         introduced_by="0.32.0: the 'all' mode removed (read in the 0.32.0 wheel)",
         source="0.32.0 / 0.33.0 config/cache.py MambaCacheMode = Literal['align', 'none']",
         applies_to="state"),
)

# ``--enable-prefix-caching`` unset: ``ModelConfig.is_prefix_caching_supported`` answers False
# for a generative hybrid model ("Hybrid models do not support prefix caching since the feature
# is still experimental") up to 0.25.x, True from 0.26.0.
HYBRID_PREFIX_CACHING_DEFAULT: tuple[Rule, ...] = (
    Rule(name="hybrid_prefix_caching_default", changes="KV: state pages a request holds "
         "(prefix caching on by default)", since="0.26.0", until=None, value=True,
         introduced_by="read in the 0.26.0 wheel (0.25.0 still False; PR not identified)",
         source="0.25.0 / 0.26.0 / 0.33.0 config/model.py ModelConfig."
         "is_prefix_caching_supported (attn_type 'hybrid'); engine/arg_utils.py "
         "_set_default_chunked_prefill_and_prefix_caching_args", applies_to="state"),
)

# With prefix caching on and no mode asked: "all" for a model that declares
# ``SupportsMambaPrefixCaching`` (of memprof's families, the Mamba-2 hybrids: Nemotron-H,
# Granite-4.0-H), else "align"; from 0.28.0 "align" for every model. Before 0.15.0 the same
# Mamba-2 models cached a state per block (``mamba_block_size`` = the attention block) and the
# others had prefix caching turned off ("... does not support prefix caching: disabling").
MAMBA_ALL_BY_DEFAULT: tuple[Rule, ...] = (
    Rule(name="mamba_cache_all_by_default", changes="KV: state pages a request holds "
         "(prefix caching)", since=None, until="0.28.0", value=True,
         introduced_by="SupportsMambaPrefixCaching (read in the 0.11.1 wheel)",
         removed_by="0.28.0: 'align' whatever the model (read in the 0.28.0 wheel; 0.27.0 "
         "still 'all' for SupportsMambaPrefixCaching; PR not identified)",
         source="0.11.1 / 0.14.1 model_executor/models/config.py MambaModelConfig ("
         "supports_mamba_prefix_caching, else enable_prefix_caching = False); 0.15.0 / 0.27.0 "
         "'all' if model_config.supports_mamba_prefix_caching else 'align'; nemotron_h.py, "
         "granitemoehybrid.py SupportsMambaPrefixCaching (0.15.0–0.31.0)",
         applies_to="mamba2"),
)

# Align mode's extra page per request and group for a prefill checkpoint
# (``MambaSpec.num_prefill_checkpoint_blocks``, default 0): Mamba-2 layers set it from 0.32.0;
# Gated DeltaNet layers from 0.33.0 when FlashInfer runs their prefill (CUDA: Hopper, or
# Blackwell with 128-wide key heads and CUDA runtime ≥ 13 — memprof assumes that runtime).
ALIGN_CHECKPOINT_MAMBA2: tuple[Rule, ...] = (
    Rule(name="mamba2_align_checkpoint_block", changes="KV: state pages a request holds "
         "(align mode)", since="0.32.0", until=None, value=1,
         introduced_by="read in the 0.32.0 wheel (absent in 0.31.0; PR not identified)",
         source="0.32.0 / 0.33.0 model_executor/layers/mamba/mamba_mixer2.py "
         "MambaMixer2.get_kv_cache_spec (num_prefill_checkpoint_blocks=1); "
         "v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes: 2 + "
         "num_speculative_blocks + num_prefill_checkpoint_blocks", applies_to="mamba2"),
)
ALIGN_CHECKPOINT_GDN: tuple[Rule, ...] = (
    Rule(name="gdn_align_checkpoint_block", changes="KV: state pages a request holds "
         "(align mode)", since="0.33.0", until=None, value=1,
         introduced_by="read in the 0.33.0 wheel (absent in 0.32.0; PR not identified)",
         source="0.33.0 model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py "
         "get_kv_cache_spec (num_prefill_checkpoint_blocks=1 when _exports_checkpoints: align "
         "mode and gdn_prefill_backend 'flashinfer', _resolve_gdn_prefill_backend)",
         applies_to="gdn"),
)

# Architectures where 0.33.0's GDN prefill runs FlashInfer (``_resolve_gdn_prefill_backend``):
# Hopper whatever the heads; Blackwell (SM10.x, SM12.x) with head_k_dim 128.
_FLASHINFER_GDN_ANY = ("sm90",)
_FLASHINFER_GDN_K128 = ("sm100", "sm103", "sm110", "sm120", "sm121")

ALIGN_CHECKPOINT_BLOCKS = {"mamba2": ALIGN_CHECKPOINT_MAMBA2, "gdn": ALIGN_CHECKPOINT_GDN}
MAMBA_CACHE_RULES = (MAMBA_CACHE_MODE_FLAG, HYBRID_PREFIX_CACHING_DEFAULT, MAMBA_ALL_BY_DEFAULT,
                     ALIGN_CHECKPOINT_MAMBA2, ALIGN_CHECKPOINT_GDN)
"""The tables above, one per row tuple (``memprof versions`` reads them)."""


def check_mamba_cache_mode(mode: str | None, version: str | None) -> None:
    """``--mamba-cache-mode`` against the release's parser (``MAMBA_CACHE_MODE_FLAG``):
    :class:`BadInput` for a value it refuses or a release without the flag."""
    if mode is None:
        return
    allowed = value_at(MAMBA_CACHE_MODE_FLAG, version)
    shown = repr(str(mode)[:40])
    version = version or newest()  # the default release, named as such in the message
    if not isinstance(allowed, tuple):
        raise BadInput(f"--mamba-cache-mode {shown}: vLLM {version} has no such flag (it "
                       f"appeared in {MAMBA_CACHE_MODE_FLAG[0].since})",
                       hint="drop --mamba-cache-mode, or use --engine-version "
                       f"{MAMBA_CACHE_MODE_FLAG[0].since} or later")
    if mode not in allowed:
        raise BadInput(f"--mamba-cache-mode {shown} is not one of vLLM {version}'s choices "
                       f"({', '.join(allowed)})", hint="one of: " + ", ".join(allowed))


def resolve_mamba_cache_mode(*, version: str | None, mixers: frozenset[str],
                             enable_prefix_caching: bool | None, requested: str | None) -> str:
    """The mode vLLM ``version`` runs a model with these state mixers in (``"none"``, ``"align"``
    or ``"all"``; ``"none"`` for a model without them): prefix caching as asked or the release's
    default for hybrid models, then ``MambaModelConfig.verify_and_update_config``'s choice
    (see the table above)."""
    if not mixers:
        return "none"
    on = (enable_prefix_caching if enable_prefix_caching is not None
          else bool(value_at(HYBRID_PREFIX_CACHING_DEFAULT, version, False)))
    if not on:
        return "none"
    mamba_prefix = "mamba2" in mixers  # SupportsMambaPrefixCaching: the Mamba-2 hybrids
    if not isinstance(value_at(MAMBA_CACHE_MODE_FLAG, version), tuple):
        # before the mode: Mamba-2 models cache a state per block, the others turn it off
        return "all" if mamba_prefix else "none"
    mode = requested if requested not in (None, "none") else (
        "all" if mamba_prefix and value_at(MAMBA_ALL_BY_DEFAULT, version, False) else "align")
    if mode == "all" and not mamba_prefix:
        return "align"  # "falling back to 'align' mode"
    return mode


def state_pages_per_request(mode: str, mixer: str, version: str | None, arch: str,
                            head_k_dim: int) -> int:
    """Pages one request holds in a state group of ``mixer`` layers in ``mode`` ("none" or
    "align"; ``MambaSpec.max_memory_usage_bytes`` without speculative blocks): 1, or 2 + the
    release's prefill checkpoint block (``ALIGN_CHECKPOINT_BLOCKS``); 0 for "all", where the
    pages follow the context (``cdiv(max_model_len, block)``, counted by
    ``memprof.core.kvcache``)."""
    if mode == "all":
        return 0
    if mode != "align":
        return 1
    found = value_at(ALIGN_CHECKPOINT_BLOCKS.get(mixer, ()), version, 0)
    checkpoint = found if isinstance(found, int) else 0
    if checkpoint and mixer == "gdn" and not (
            arch in _FLASHINFER_GDN_ANY or (arch in _FLASHINFER_GDN_K128 and head_k_dim == 128)):
        checkpoint = 0  # the Triton (FLA) prefill: no checkpoint block
    return 2 + checkpoint

"""SGLang's settings and KV-pool sizing for a model whose MLA layers carry DeepSeek's lightning
indexer (SGLang's "NSA"/"DSA" models: ``is_deepseek_nsa``, DeepSeek-V3.2), per release.

SGLang sets these itself when the model is NSA (``ServerArgs._handle_model_specific_adjustments``,
python/sglang/srt/server_args.py, from 0.5.3, the first release with DeepSeek-V3.2; from 0.5.10
``arg_groups/overrides.py``), after the ``mem_fraction_static`` heuristic has run:

* the KV-cache dtype (``SGLANG_NSA_KV_DTYPE``): fp8_e4m3 on compute capability 10 and later
  (Blackwell), stored as the 656-byte slot of ``NSATokenToKVPool`` (512 fp8 latent + 4 fp32
  scales + 64 bf16 RoPE values); the model dtype (bf16) below it;
* the page size (``SGLANG_NSA_PAGE_SIZE``): 64 (``NSATokenToKVPool`` asserts it);
* ``mem_fraction_static`` 0.8, in 0.5.3 only (``SGLANG_NSA_MEM_FRACTION``);
* DP attention (``SGLANG_NSA_DP_ATTENTION``): on with ``--dp`` = ``--tp`` in 0.5.3 – 0.5.5, on
  for the ``--dp`` asked in 0.5.6 – 0.5.7, as asked from 0.5.8.

The pool is sized by ``ModelRunner.profile_max_num_token``: ``rest // cell_size`` tokens,
floored to the page. Its cell is not what the pool stores (``SGLANG_NSA_CELL``): before SGLang PR
#11309 the cell was the latent alone, ``(kv_lora_rank + qk_rope_head_dim) × layers × element
size`` (576 B a layer at fp8) while each token of the pool held 656 + 132 B a layer (the latent
slot and the indexer's K cache, ``NSATokenToKVPool.index_k_with_scale_buffer``: 128 fp8 + one
fp32 scale per 128); PR #11309 added the indexer's 132 B to the cell; SGLang PR #27354
(``calculate_mla_kv_cache_dim`` in the cell) made the cell the slot the pool stores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.engines.base import DeploymentView
from memprof.core.gpus import GPU, arch_cc
from memprof.core.versions import Rule, value_at

_ENGINE = "sglang"
_FAMILY = "deepseek_v32"  # the family whose MLA layers carry the indexer (applies_to)
_SA = "python/sglang/srt/server_args.py ServerArgs._handle_model_specific_adjustments"
_MR = "python/sglang/srt/model_executor/model_runner.py ModelRunner.profile_max_num_token"
_FIRST = "DeepSeek-V3.2 support (first released in 0.5.3; the 0.5.2 wheel has no is_deepseek_nsa)"

# value: "blackwell_fp8" (fp8_e4m3 on compute capability >= 10 whatever was asked, else as
# asked); "auto_by_arch" (auto → fp8_e4m3 on compute capability >= 10, else bfloat16; bfloat16
# and fp8_e4m3 kept; any other dtype refused)
SGLANG_NSA_KV_DTYPE: tuple[Rule, ...] = (
    Rule(name="sglang_nsa_kv_cache_dtype", changes="defaults: --kv-cache-dtype (NSA models)",
         since=None, until="0.5.5", value="blackwell_fp8", engine=_ENGINE, introduced_by=_FIRST,
         removed_by="read in the sglang 0.5.5 wheel (auto → by architecture)",
         source=f"sglang 0.5.3 / 0.5.4 {_SA}: 'if major >= 10: self.kv_cache_dtype = "
         "\"fp8_e4m3\"' (torch.cuda.get_device_capability); Hopper keeps the asked dtype",
         applies_to=_FAMILY),
    Rule(name="sglang_nsa_kv_cache_dtype", changes="defaults: --kv-cache-dtype (NSA models)",
         since="0.5.5", until=None, value="auto_by_arch", engine=_ENGINE,
         introduced_by="read in the sglang 0.5.5 wheel",
         source=f"sglang 0.5.5 – 0.5.9 {_SA}: 'if self.kv_cache_dtype == \"auto\": "
         "self.kv_cache_dtype = \"fp8_e4m3\" if major >= 10 else \"bfloat16\"', then 'DeepSeek "
         "NSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype'; the same in sglang "
         "0.5.23 arg_groups/overrides.py _dsa_kv_cache_dtype_default", applies_to=_FAMILY),
)

# value: the page size SGLang forces on CUDA ("rocm" pages are the second element)
SGLANG_NSA_PAGE_SIZE: tuple[Rule, ...] = (
    Rule(name="sglang_nsa_page_size", changes="defaults: --page-size (NSA models)",
         since=None, until="0.5.8", value=(64, 64), engine=_ENGINE, introduced_by=_FIRST,
         removed_by="read in the sglang 0.5.8 wheel ('if is_hip(): self.page_size = 1')",
         source=f"sglang 0.5.3 – 0.5.7 {_SA}: 'self.page_size = 64' on every non-NPU platform; "
         "mem_cache/memory_pool.py NSATokenToKVPool.__init__: 'assert self.page_size == 64'",
         applies_to=_FAMILY),
    Rule(name="sglang_nsa_page_size", changes="defaults: --page-size (NSA models)",
         since="0.5.8", until=None, value=(64, 1), engine=_ENGINE,
         introduced_by="read in the sglang 0.5.8 wheel",
         source=f"sglang 0.5.8 / 0.5.9 {_SA}: 'if is_hip(): self.page_size = 1 else: "
         "self.page_size = 64'", applies_to=_FAMILY),
)

# value: the mem_fraction_static SGLang sets for an NSA model (None: its heuristic's)
SGLANG_NSA_MEM_FRACTION: tuple[Rule, ...] = (
    Rule(name="sglang_nsa_mem_fraction_static", changes="budget: mem_fraction_static (NSA)",
         since=None, until="0.5.4", value=0.8, engine=_ENGINE, introduced_by=_FIRST,
         removed_by="SGLang PR #11309 (first released in 0.5.3.post1; 0.5.4 the first release "
         "memprof models without it)",
         source=f"sglang 0.5.3 {_SA}: 'self.mem_fraction_static = 0.8' (whatever was asked); "
         "gone from the 0.5.3.post1 wheel", applies_to=_FAMILY),
    Rule(name="sglang_nsa_mem_fraction_static", changes="budget: mem_fraction_static (NSA)",
         since="0.5.4", until=None, value=None, engine=_ENGINE,
         introduced_by="SGLang PR #11309 (first released in 0.5.3.post1)",
         source="sglang 0.5.3.post1 – 0.5.9 server_args.py: no NSA override (the "
         "_handle_gpu_memory_settings heuristic holds)", applies_to=_FAMILY),
)

# value: what ``profile_max_num_token``'s cell counts of an NSA layer: "latent" (kv_lora_rank +
# qk_rope_head_dim at the KV dtype's element size), "latent+indexer" (plus the indexer's
# 128 + 4 bytes), "pool" (the slot and indexer K the pool stores)
SGLANG_NSA_CELL: tuple[Rule, ...] = (
    Rule(name="sglang_nsa_cell_size", changes="KV cache: tokens per byte (NSA cell size)",
         since=None, until="0.5.4", value="latent", engine=_ENGINE, introduced_by=_FIRST,
         removed_by="SGLang PR #11309 'Include indexer kv cache when estimating kv cache size' "
         "(first released in 0.5.3.post1)",
         source=f"sglang 0.5.3 {_MR}: cell_size = (kv_lora_rank + qk_rope_head_dim) × "
         "num_layers × element_size(kv_cache_dtype); mem_cache/memory_pool.py "
         "MLATokenToKVPool kv_cache_dim 656 (NSA, fp8) and NSATokenToKVPool "
         "index_k_with_scale_buffer, neither counted", applies_to=_FAMILY),
    Rule(name="sglang_nsa_cell_size", changes="KV cache: tokens per byte (NSA cell size)",
         since="0.5.4", until="0.5.17", value="latent+indexer",
         engine=_ENGINE, introduced_by="SGLang PR #11309 (first released in 0.5.3.post1)",
         removed_by="SGLang PR #27354 'Correct cell_size calculation for DSA models with FP8 "
         "KV cache' (calculate_mla_kv_cache_dim in the cell; first in the sglang 0.5.17 wheel)",
         source=f"sglang 0.5.3.post1 – 0.5.6 {_MR}, 0.5.7 – 0.5.10 model_runner_kv_cache_mixin"
         ".py get_cell_size_per_token, 0.5.11 – 0.5.16 model_executor/pool_configurator.py "
         "(cell size moved there, unchanged): the latent cell + (index_head_dim + "
         "index_head_dim // 128 × 4) × num_layers × 1 (uint8)", applies_to=_FAMILY),
    Rule(name="sglang_nsa_cell_size", changes="KV cache: tokens per byte (NSA cell size)",
         since="0.5.17", until=None, value="pool", engine=_ENGINE,
         introduced_by="SGLang PR #27354 (first in the sglang 0.5.17 wheel; the "
         "deepseek-v4-hopper@2026-07 image, dated 2026-07-09, stands before it by date as "
         "memprof/core/releases.py orders it)",
         source="sglang 0.5.17 – 0.5.19 and SGL@d315eb7 python/sglang/srt/model_executor/"
         "pool_configurator.py (_compute_cell_size at SGL@d315eb7): calculate_mla_kv_cache_dim "
         "(512 + 512/128·4 + 64·2 = 656 at fp8) + the indexer's 132 B", applies_to=_FAMILY),
)

# value: "dp=tp" (DP attention on, --dp set to --tp), "dp>1" (DP attention on; SGLang's
# _handle_data_parallelism turns it off again at --dp 1), None (left as asked). SGLang sets it
# after its mem_fraction_static heuristic has run on the layout asked.
SGLANG_NSA_DP_ATTENTION: tuple[Rule, ...] = (
    Rule(name="sglang_nsa_dp_attention", changes="layout: DP attention (NSA models)",
         since=None, until="0.5.6", value="dp=tp", engine=_ENGINE, introduced_by=_FIRST,
         removed_by="read in the sglang 0.5.6 wheel (dp_size no longer set)",
         source=f"sglang 0.5.3 – 0.5.5 {_SA}: 'self.enable_dp_attention = True; self.dp_size = "
         "self.tp_size' (not on NPU), after _handle_gpu_memory_settings in __post_init__",
         applies_to=_FAMILY),
    Rule(name="sglang_nsa_dp_attention", changes="layout: DP attention (NSA models)",
         since="0.5.6", until="0.5.8", value="dp>1", engine=_ENGINE,
         introduced_by="read in the sglang 0.5.6 wheel",
         removed_by="read in the sglang 0.5.8 wheel (only with NSA prefill context parallel)",
         source=f"sglang 0.5.6 / 0.5.7 {_SA}: 'self.enable_dp_attention = True' with dp_size as "
         "asked; _handle_data_parallelism: 'if self.dp_size == 1: self.enable_dp_attention = "
         "False'", applies_to=_FAMILY),
    Rule(name="sglang_nsa_dp_attention", changes="layout: DP attention (NSA models)",
         since="0.5.8", until=None, value=None, engine=_ENGINE,
         introduced_by="read in the sglang 0.5.8 wheel",
         source=f"sglang 0.5.8 / 0.5.9 {_SA}: DP attention set only under "
         "--enable-nsa-prefill-context-parallel", applies_to=_FAMILY),
)

RULES: tuple[tuple[Rule, ...], ...] = (SGLANG_NSA_KV_DTYPE, SGLANG_NSA_PAGE_SIZE,
                                       SGLANG_NSA_MEM_FRACTION, SGLANG_NSA_CELL,
                                       SGLANG_NSA_DP_ATTENTION)
_FP8, _BF16 = "fp8_e4m3", "bfloat16"
_FP8_NAMES = frozenset({_FP8, "fp8"})  # memprof reads SGLang's fp8 as fp8_e4m3


def blackwell_or_later(gpu: GPU) -> bool:
    """``torch.cuda.get_device_capability()[0] >= 10``: an NVIDIA ``sm100`` or later."""
    cc = arch_cc(gpu.arch)
    return not gpu.is_rocm and cc is not None and cc >= 100


def nsa_settings(dep: DeploymentView, gpu: GPU,
                 heuristic: Callable[[], float]) -> dict[str, object]:
    """The settings SGLang gives an NSA model at ``dep``'s release (field → value): the KV
    dtype, the page size, (0.5.3) mem_fraction_static, DP attention (0.5.3 – 0.5.7) with the
    ``mem_fraction_static`` its heuristic gave the layout asked (``heuristic()``: it runs
    first); a KV dtype the release refuses is ``BadInput``."""
    version = dep.engine_version
    out: dict[str, object] = {}
    kv_rule = value_at(SGLANG_NSA_KV_DTYPE, version, engine=_ENGINE)
    fp8_arch = blackwell_or_later(gpu)
    if kv_rule == "blackwell_fp8":
        if fp8_arch and dep.kv_cache_dtype != _FP8:
            out["kv_cache_dtype"] = _FP8
    elif dep.kv_cache_dtype == "auto":
        out["kv_cache_dtype"] = _FP8 if fp8_arch else _BF16
    elif dep.kv_cache_dtype not in (_BF16, *_FP8_NAMES):
        raise BadInput(f"--kv-cache-dtype {dep.kv_cache_dtype}: SGLang "
                       f"{version or 'main'} runs DeepSeek NSA (sparse MLA) models with "
                       "bfloat16 or fp8_e4m3 only",
                       hint="use --kv-cache-dtype fp8_e4m3 or bfloat16 (or leave it out)")
    pages: Any = value_at(SGLANG_NSA_PAGE_SIZE, version, (64, 64), engine=_ENGINE)
    out["block_size"] = int(pages[1] if gpu.is_rocm else pages[0])
    mfs = value_at(SGLANG_NSA_MEM_FRACTION, version, engine=_ENGINE)
    if isinstance(mfs, float):
        out["mem_fraction_static"] = mfs
    dp_rule = value_at(SGLANG_NSA_DP_ATTENTION, version, engine=_ENGINE)
    dp = dep.tp if dp_rule == "dp=tp" else dep.dp
    if (dp_rule is not None and dp > 1
            and (not dep.enable_dp_attention or dp != dep.dp) and dep.tp % dp == 0):
        out.update(enable_dp_attention=True, dp=dp)
        if dep.mem_fraction_static is None and "mem_fraction_static" not in out:
            out["mem_fraction_static"] = heuristic()
    return out


def nsa_notes(dep: DeploymentView, asked: DeploymentView) -> list[str]:
    """What SGLang set for the NSA model (``nsa_settings``), as the estimate's notes say it."""
    out = []
    if dep.kv_cache_dtype != asked.kv_cache_dtype:
        out.append(f"SGLang {dep.engine_version} sets --kv-cache-dtype {dep.kv_cache_dtype} for "
                   "a DeepSeek NSA model on this GPU (fp8_e4m3 from compute capability 10, "
                   "the model dtype below)")
    if dep.block_size != asked.block_size:
        out.append(f"SGLang {dep.engine_version} sets --page-size {dep.block_size} for a "
                   "DeepSeek NSA model")
    dp_forced = dep.enable_dp_attention and (not asked.enable_dp_attention or dep.dp != asked.dp)
    if dp_forced:
        out.append(f"SGLang {dep.engine_version} turns on DP attention (--dp {dep.dp}) for a "
                   "DeepSeek NSA model, after its mem_fraction_static heuristic ran on the "
                   "layout asked")
    mfs_rule = value_at(SGLANG_NSA_MEM_FRACTION, dep.engine_version, engine=_ENGINE)
    if dep.mem_fraction_static != asked.mem_fraction_static and isinstance(mfs_rule, float):
        out.append(f"SGLang {dep.engine_version} sets mem_fraction_static "
                   f"{dep.mem_fraction_static} for a DeepSeek NSA model (removed by SGLang PR "
                   "#11309)")
    return out


def nsa_cell_block_bytes(dep: DeploymentView, layers: Sequence[Any]) -> int:
    """The bytes of one page that ``profile_max_num_token`` divides the budget by, across the
    rank's layer specs (``KVLayerSpec`` of memprof/core/attention/base.py; ``SGLANG_NSA_CELL``):
    each MLA layer's latent at the element size (``element_page_bytes``), its indexer K cache
    from PR #11309, the pool's own pages once the cell is the slot. 0: the pool's pages (no
    NSA layer)."""
    if not any(s.name == "indexer" for s in layers):
        return 0
    rule = value_at(SGLANG_NSA_CELL, dep.engine_version, "pool", engine=_ENGINE)
    if rule == "pool":
        return 0
    total = 0
    for s in layers:
        if s.name == "indexer":
            total += s.page_bytes if rule == "latent+indexer" else 0
        else:
            total += s.element_page_bytes or s.page_bytes
    return total

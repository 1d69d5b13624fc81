"""The releases memprof models of each engine, one row per engine: its name, how messages name
it, its releases oldest first, and whether they are source snapshots (ordered by their place in
the row) or release numbers (ordered by ``memprof.core.versions.version_key``).

A leaf: it imports nothing of memprof, so ``memprof.core.versions`` (``Rule``,
``resolve_version``) reads it to order and resolve releases, and the engine modules
(``memprof/core/engines/``), which write their rules as ``versions.Rule`` rows, read their own row
here (``Engine.display``) without a circle. A new release is its name at the end of its engine's
row; a new engine is a row here and its module in ``memprof/core/engines/``.
"""

from __future__ import annotations

from typing import NamedTuple


class EngineReleases(NamedTuple):
    """One engine's releases."""

    name: str  # the engine's name (``--engine``, ``Engine.name``)
    display: str  # the name in messages ("vLLM")
    releases: tuple[str, ...]  # oldest first; the last is the default ``--engine-version``
    snapshots: bool = False  # source snapshots, ordered by their place in ``releases``
    source: str = ""


# Every vLLM release memprof models (PyPI ``vllm``; read from the wheels). The 0.6.x releases run
# the V0 engine only; their post releases are listed because logs name them (their start-up
# memory path is their base release's: worker/, config.py and engine/arg_utils.py compared).
VLLM = EngineReleases(name="vllm", display="vLLM", releases=(
    "0.6.0", "0.6.1", "0.6.1.post1", "0.6.1.post2", "0.6.2", "0.6.3", "0.6.3.post1",
    "0.6.4", "0.6.4.post1", "0.6.5", "0.6.6", "0.6.6.post1",
    "0.7.1", "0.7.2", "0.7.3",
    "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.8.5.post1",
    "0.9.0", "0.9.0.1", "0.9.1", "0.9.2",
    "0.10.0", "0.10.1", "0.10.1.1", "0.10.2",
    "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0", "0.14.1",
    "0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1",
    "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1",
    "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1",
    "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
), source="PyPI vllm; read from the wheels")
# SGLang releases (PyPI ``sglang`` 0.4.3 – 0.5.23, read from the wheels; the rows that differ
# are beside the engine, ``engines/sglang.py``) and source snapshots, oldest first; the newest
# (SGL@d315eb7, upstream main 2026-08-22) is the one memprof models in full.
# "deepseek-v4-hopper@2026-07" is the lmsysorg/sglang:deepseek-v4-hopper image InferenceX ran in
# July 2026 (InferenceX issue #2128, before the tag was re-pinned to sha256:1bf5d508…): SGLang
# with the Hopper MXFP4 Marlin path of SGLang PR #24986 and without PR #29797. It is modelled as
# main@d315eb7 except where a rule row (engine "sglang") says otherwise. Ordered by place.
# Two post releases are modelled on their own because a rule row changes at them (weights/mlp.py
# SGLANG_ROCM_EPMOE_STALE_FP8): 0.4.8.post1 and 0.4.9.post5; any other post release keeps the
# rows of the release it builds on.
# 0.5.10 – 0.5.19 (wheels built 2026-04-05 … 2026-09-04) are read from their wheels the same way.
# They stand before the two snapshots although main@d315eb7 was committed between 0.5.18
# (2026-08-21) and 0.5.19 (2026-09-04): a snapshot's place is where its rules sit, and no rule
# row memprof keeps changes between 0.5.19 and main@d315eb7 (the deepseek-v4-hopper image's own
# row holds at it alone), so main@d315eb7 stays the newest and the default.
# 0.5.20 – 0.5.23 (wheels built 2026-09-18 … 2026-10-30) are read from their wheels against 0.5.19
# and stand after it, before the snapshots, for the same reason: the rows that change among them
# (engines/sglang.py SGLANG_CHUNKED_PREFILL and SGLANG_GRAPH_MAX_BS, the 0.5.20 / 0.5.22 /
# 0.5.23 rows of configs/sglang_prefill_graph_off_archs.json) end at the snapshots, whose
# source predates them. A log naming a release after 0.5.23 (a main build) is estimated at 0.5.23
# (memprof/probes/sglang_log.py modelled_release says so).
# Compared wheel against wheel from 0.5.9 (what memprof's SGLang rows read):
# - server_args.py _handle_gpu_memory_settings (0.5.19 arg_groups/memory_hook.py): the GPU tiers
#   of --chunked-prefill-size and the decode graph batch, and 512 + 1.5·chunk + tp·pp/8 GiB +
#   2·max_bs, unchanged 0.5.10 – 0.5.19; new there: the prefill CUDA-graph reserve (0.5.10 on:
#   engines/sglang.py SGLANG_PREFILL_GRAPH_RESERVE) and the post-capture KV sizing
#   path (0.5.16 on, behind SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, off by default in every wheel);
# - the decode capture list (_generate_cuda_graph_batch_sizes; 0.5.19 cuda_graph_hook.py): the
#   same grid, and from 0.5.10 a --cuda-graph-max-bs off the grid is appended, not dropped;
# - the pool's cell (model_runner_kv_cache_mixin.py, from 0.5.11 model_executor/
#   pool_configurator.py): unchanged but for DeepSeek-V3.2's (engines/sglang_nsa.py, 0.5.17);
# - ReqToTokenPool sizing (context + 4 + draft tokens; max_num_reqs from the pool, 2048 – 4096),
#   "Load weight end … mem usage" (before − after free), the MoE EP/TP groups built only where
#   they differ from TP (distributed/parallel_state.py): unchanged to 0.5.19.
# Compared wheel against wheel from 0.5.19 to 0.5.23 (the same files; from 0.5.20 ServerArgs'
# fields live in arg_groups/fields/): the mem_fraction_static reserve (512 + 1.5·chunk + tp·pp/8
# GiB + the graph reserves, the 10 GiB floor above 60 GiB; 0.5.22 reads the DP-attention width
# as attn_dp_size, which --dp N --enable-dp-attention resolves to N; 0.5.23 caps an MLA model's
# prefill capture at min(8192, chunk) instead of 2048, which leaves its flat 1.5 GiB reserve as it
# was), the budget line (mem_cache/kv_cache_configurator.py _profile_available_bytes: free after
# load − free before load × (1 − mem_fraction_static)), an MHA/MLA cell, the ReqToTokenPool size
# and max_num_reqs, "Load weight end … mem usage", GroupCoordinator's active_ranks and the MoE
# groups: unchanged to 0.5.23; the decode capture grid (generate_decode_cuda_graph_batch_sizes):
# unchanged; post-capture KV sizing: still off unless SGLANG_ENABLE_POST_CAPTURE_KV_SIZING.
# The vision-path rows that end at the snapshots (engines/sglang_vlm.py, the llama4, qwen_vl and
# gemma families' sglang_tower rows) were checked in 0.5.23 as well: adjust_mem_fraction_for_vlm
# (0.95 × the ViT factor, still only when mem_fraction_static is not given), the chunked-prefill
# exceptions (is_multimodal_chunked_prefill_supported), qwen2_5_vl.py's MLP width rounded to 8,
# gemma3_mm.py's SiglipVisionModel and mllama4.py's has_vision: unchanged.
# Not modelled (memprof has no flag that reaches them): 0.5.20's models/deepseek_v2.py
# shared_experts_fusion_disable_reason turns shared-expert fusion off for a modelopt_fp4 checkpoint
# on Hopper under --moe-runner-backend marlin (the default backend, auto, keeps
# SGLANG_SHARED_EXPERTS_FUSION's rows); 0.5.20's arg_groups/model_overrides/qwen3_vl.py raises a
# Qwen3-VL decode graph batch to --max-running-requests on large Hopper cards (memprof refuses
# that model's SGLang vision path here); the XPU +2 GiB reserve.
SGLANG = EngineReleases(name="sglang", display="SGLang", snapshots=True, releases=(
    "0.4.3", "0.4.4", "0.4.5", "0.4.6", "0.4.7", "0.4.8", "0.4.8.post1", "0.4.9", "0.4.9.post5",
    "0.4.10",
    "0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9",
    "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18",
    "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
    "deepseek-v4-hopper@2026-07", "main@d315eb7",
), source="PyPI sglang (read from the wheels) and sgl-project/sglang source snapshots")

ROWS: tuple[EngineReleases, ...] = (VLLM, SGLANG)
RELEASES: dict[str, tuple[str, ...]] = {r.name: r.releases for r in ROWS}
DISPLAY_NAMES: dict[str, str] = {r.name: r.display for r in ROWS}
# engines whose releases are source snapshots (the others are release numbers)
SNAPSHOT_ENGINES = frozenset(r.name for r in ROWS if r.snapshots)
VLLM_RELEASES = VLLM.releases
SGLANG_RELEASES = SGLANG.releases

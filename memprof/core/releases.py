"""The releases memprof models of each engine, one row per engine: its name, how messages name
it, its releases oldest first, and whether they include source snapshots (then ordered by their
place in the row, which for SGLang is their date) or are release numbers only (ordered by
``memprof.core.versions.version_key``).

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
    # source snapshots among the releases: all are ordered by their place in ``releases``
    snapshots: bool = False
    source: str = ""


# Every vLLM release memprof models (PyPI ``vllm``; read from the wheels). The 0.6.x releases run
# the V0 engine only; their post releases are listed because logs name them (their start-up
# memory path is their base release's: worker/, config.py and engine/arg_utils.py compared).
VLLM = EngineReleases(name="vllm", display="vLLM", releases=(
    "0.6.0", "0.6.1", "0.6.1.post1", "0.6.1.post2", "0.6.2", "0.6.3", "0.6.3.post1",
    "0.6.4", "0.6.4.post1", "0.6.5", "0.6.6", "0.6.6.post1",
    "0.7.0", "0.7.1", "0.7.2", "0.7.3",
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
# are beside the engine, ``engines/sglang.py``) and two source snapshots, ordered by date: a
# release by the first upload of its files to PyPI (https://pypi.org/pypi/sglang/json,
# ``upload_time_iso_8601``), a snapshot by the date its source was taken. The newest, 0.5.23, is
# the default ``--engine-version``. Ordering by date places each snapshot between the releases
# built around it, so a rule row's range ("since 0.5.20") says by itself whether a snapshot has
# the change; rows whose source was not read at a snapshot leave it out
# (``versions.around_snapshots``).
# - "main@d315eb7" (SGL@d315eb7): sgl-project/sglang commit
#   d315eb725044e435b146c85488b7c6d9222f7fec on upstream main, committed 2026-08-22T14:34:57Z
#   ("[AMD] DeepSeek-V4: add aiter fused mHC post+pre ... (#32577)"): after 0.5.18 (uploaded
#   2026-08-21) and before 0.5.19 (2026-09-04).
# - "deepseek-v4-hopper@2026-07": the lmsysorg/sglang:deepseek-v4-hopper image InferenceX ran in
#   July 2026 (InferenceX issue #2128, opened 2026-07-09 with that image, before the tag was
#   re-pinned to sha256:1bf5d508…): SGLang with the Hopper MXFP4 Marlin path of SGLang PR #24986
#   (main 2026-05-13, first in 0.5.12) and without the deletion of the stale fp32 scales (first
#   in 0.5.16, weights/mlp.py SGLANG_MARLIN_STALE_SCALE_INV). The image's build date is not
#   published; it was in use on 2026-07-09, the date it is placed at: after 0.5.14 (2026-06-26),
#   before 0.5.15 (2026-07-10).
# Two post releases are modelled on their own because a rule row changes at them (weights/mlp.py
# SGLANG_ROCM_EPMOE_STALE_FP8): 0.4.8.post1 and 0.4.9.post5; any other post release keeps the
# rows of the release it builds on.
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
# The vision-path rows (engines/sglang_vlm.py, the llama4, qwen_vl and gemma families'
# sglang_tower rows) were checked in 0.5.23 as well: adjust_mem_fraction_for_vlm (0.95 × the ViT
# factor, still only when mem_fraction_static is not given), the chunked-prefill exceptions
# (is_multimodal_chunked_prefill_supported), qwen2_5_vl.py's MLP width rounded to 8,
# gemma3_mm.py's SiglipVisionModel and mllama4.py's has_vision: unchanged; the snapshots' vision
# path is not read (those rows leave them out).
# Not modelled (memprof has no flag that reaches them): 0.5.20's models/deepseek_v2.py
# shared_experts_fusion_disable_reason turns shared-expert fusion off for a modelopt_fp4 checkpoint
# on Hopper under --moe-runner-backend marlin (the default backend, auto, keeps
# SGLANG_SHARED_EXPERTS_FUSION's rows); 0.5.20's arg_groups/model_overrides/qwen3_vl.py raises a
# Qwen3-VL decode graph batch to --max-running-requests on large Hopper cards (memprof refuses
# that model's SGLang vision path here); the XPU +2 GiB reserve.
# (name, date UTC, where the date is read): PyPI's first upload of the release's files, or the
# snapshot's own date as above.
_PYPI = "PyPI sglang upload_time_iso_8601"
SGLANG_DATED: tuple[tuple[str, str, str], ...] = (
    ("0.4.3", "2025-02-14T01:43:35Z", _PYPI), ("0.4.4", "2025-03-13T09:50:20Z", _PYPI),
    ("0.4.5", "2025-04-07T07:35:19Z", _PYPI), ("0.4.6", "2025-04-27T21:07:31Z", _PYPI),
    ("0.4.7", "2025-06-10T08:56:43Z", _PYPI), ("0.4.8", "2025-06-24T06:14:45Z", _PYPI),
    ("0.4.8.post1", "2025-06-26T09:21:36Z", _PYPI), ("0.4.9", "2025-07-06T00:40:52Z", _PYPI),
    ("0.4.9.post5", "2025-07-28T09:11:32Z", _PYPI), ("0.4.10", "2025-07-31T12:50:41Z", _PYPI),
    ("0.5.1", "2025-08-23T14:09:52Z", _PYPI), ("0.5.2", "2025-09-11T23:09:46Z", _PYPI),
    ("0.5.3", "2025-10-06T12:07:29Z", _PYPI), ("0.5.4", "2025-10-24T01:02:10Z", _PYPI),
    ("0.5.5", "2025-11-06T16:47:04Z", _PYPI), ("0.5.6", "2025-12-03T01:17:43Z", _PYPI),
    ("0.5.7", "2026-01-01T03:01:11Z", _PYPI), ("0.5.8", "2026-01-23T17:58:59Z", _PYPI),
    ("0.5.9", "2026-02-23T08:14:13Z", _PYPI), ("0.5.10", "2026-04-05T23:57:25Z", _PYPI),
    ("0.5.11", "2026-05-05T08:23:46Z", _PYPI), ("0.5.12", "2026-05-16T18:20:02Z", _PYPI),
    ("0.5.13", "2026-06-11T10:16:42Z", _PYPI), ("0.5.14", "2026-06-26T04:23:47Z", _PYPI),
    ("deepseek-v4-hopper@2026-07", "2026-07-09T00:00:00Z",
     "InferenceX issue #2128, opened 2026-07-09 with the image (its build date is not published)"),
    ("0.5.15", "2026-07-10T10:44:12Z", _PYPI), ("0.5.16", "2026-07-25T00:11:58Z", _PYPI),
    ("0.5.17", "2026-08-08T00:20:32Z", _PYPI), ("0.5.18", "2026-08-21T20:58:46Z", _PYPI),
    ("main@d315eb7", "2026-08-22T14:34:57Z",
     "sgl-project/sglang commit d315eb725044e435b146c85488b7c6d9222f7fec, committer date"),
    ("0.5.19", "2026-09-04T23:10:25Z", _PYPI), ("0.5.20", "2026-09-18T09:54:39Z", _PYPI),
    ("0.5.21", "2026-10-01T07:45:09Z", _PYPI), ("0.5.22", "2026-10-16T00:25:44Z", _PYPI),
    ("0.5.23", "2026-10-30T01:34:33Z", _PYPI),
)
SGLANG = EngineReleases(name="sglang", display="SGLang", snapshots=True, releases=tuple(
    name for name, _, _ in sorted(SGLANG_DATED, key=lambda row: (row[1], row[0]))),
    source="PyPI sglang (read from the wheels) and sgl-project/sglang source snapshots, "
    "ordered by date")
# the SGLang names that are source snapshots, not releases on PyPI
SGLANG_SNAPSHOTS: tuple[str, ...] = tuple(
    name for name, _, where in SGLANG_DATED if where != _PYPI)
# SGLang post releases memprof does not model on their own, with the time their wheel was built:
# the zip entries' timestamps of the wheel on PyPI (``pip download sglang==X --no-deps``; the zip
# format records no time zone, read as UTC; PyPI's upload follows the build). SGLang cuts its post
# releases from main, so one is placed by this time among the releases, at the newest published
# at or before it (``memprof.core.release_names.map_release``); a post release not listed here is
# placed by its number, which the output says.
SGLANG_POST_BUILT: dict[str, str] = {
    "0.4.3.post4": "2025-03-06T20:50:42Z", "0.4.6.post1": "2025-04-28T19:57:26Z",
    "0.4.6.post5": "2025-05-24T07:48:22Z", "0.4.9.post2": "2025-07-12T04:11:36Z",
    "0.4.9.post6": "2025-07-29T09:30:26Z", "0.5.1.post3": "2025-08-27T22:43:04Z",
    "0.5.13.post1": "2026-06-15T05:51:26Z",
}
# Each engine's post releases' build times, where this module holds them.
POST_BUILT: dict[str, dict[str, str]] = {SGLANG.name: SGLANG_POST_BUILT}
# Each engine's releases with their publication (PyPI's first upload, UTC), oldest first, where
# this module holds them (vLLM's are configs/vllm_release_dates.json): explain places a log that
# names no release by its date at the newest release out by then (memprof.probes.log_dates.
# release_dates); a source snapshot is no release, so it is left out.
PUBLISHED: dict[str, tuple[tuple[str, str], ...]] = {
    SGLANG.name: tuple((name, when) for name, when, where in SGLANG_DATED if where == _PYPI)}

ROWS: tuple[EngineReleases, ...] = (VLLM, SGLANG)
RELEASES: dict[str, tuple[str, ...]] = {r.name: r.releases for r in ROWS}
DISPLAY_NAMES: dict[str, str] = {r.name: r.display for r in ROWS}
# engines whose releases are source snapshots (the others are release numbers)
SNAPSHOT_ENGINES = frozenset(r.name for r in ROWS if r.snapshots)
VLLM_RELEASES = VLLM.releases
SGLANG_RELEASES = SGLANG.releases

"""SGLang as an engine: one server of ``--tp`` GPUs (``--dp`` splits it for attention), the budget
``mem_fraction_static × free before load``, its chunked-prefill, CUDA-graph batch and
``mem_fraction_static`` heuristics (and the factor ROCm's aiter backend puts on the latter),
``--page-size`` taken as given; a pool shorter than the context does not stop its start. A
vision-language model's tower and its mem_fraction_static reduction: ``sglang_vlm.py``.

Budget line (SGL@d315eb7 kv_cache_configurator.py)::

    KV = mem_fraction_static × free before loading − what loading took
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar, NamedTuple

from memprof.base.errors import BadInput, LayoutError
from memprof.base.units import MiB
from memprof.core import releases
from memprof.core.engines.base import (
    AttentionFacts,
    Budget,
    C,
    ComponentView,
    DeploymentView,
    Engine,
    RankCoord,
    loaded_at_start,
)
from memprof.core.engines.sglang_attention import (
    capture_buffers,
    capture_state,
    check_backend,
    reserved_on_streams,
)
from memprof.core.engines.sglang_dtype import (
    check_sglang_card,
    sglang_dtype_notes,
    sglang_served_dtype,
)
from memprof.core.engines.sglang_graph_inputs import (
    graph_input_buffers,
    inputs_words,
    large_input_bytes,
)
from memprof.core.engines.sglang_graphs import (
    after_prefill,
    decode_capture_sizes,
    kept_logits,
    lm_head_stages,
    stage_outputs_kept,
)
from memprof.core.engines.sglang_nsa import nsa_cell_block_bytes, nsa_notes, nsa_settings
from memprof.core.engines.sglang_pool import pool_tensors
from memprof.core.engines.sglang_registry import check_registered
from memprof.core.engines.sglang_req_pool import req_to_token_table
from memprof.core.engines.sglang_streams import stream_pool_maker
from memprof.core.engines.sglang_vlm import (
    check_vision,
    sglang_tower,
    vlm_fraction,
    vlm_notes,
    vlm_settings,
)
from memprof.core.engines.unified_memory import sglang_unified_memory_notes
from memprof.core.engines.vllm import batch_defaults
from memprof.core.gpus import GPU
from memprof.core.models.config import first_length_key_max_len
from memprof.core.models.load import configs_dir
from memprof.core.versions import Rule, around_snapshots, newest, rule_in_force, value_at

# SGLang: --chunked-prefill-size -1 (or 0) turns chunked prefill off; the prefill then runs up to
# --max-prefill-tokens, default 16384 (python/sglang/srt/server_args.py, SGL@d315eb7,
# ``max_prefill_tokens: int = 16384`` and ``_handle_gpu_memory_settings``).
SGLANG_MAX_PREFILL_TOKENS = 16384
# the scratch catalog's key of the --enable-dp-attention gathered buffer (scratch/sglang_dp.py)
DP_ATTENTION_SCRATCH = "sglang_dp_attention"


# --- release rules: SGLang's start-up heuristics per release -----------------------------------
# Each row cites the release whose python/sglang/srt/server_args.py (ServerArgs.__post_init__,
# from 0.5.3 ServerArgs._handle_gpu_memory_settings) or model_executor/cuda_graph_runner.py
# (get_batch_sizes_to_capture) it was read in (PyPI wheels). "gpu_mem" is SGLang's
# get_device_memory_capacity in MiB: nvidia-smi's memory.total (configs/gpus.json
# smi_total_mib), not torch's total (SGLANG_HEURISTIC_GPU_MEM, heuristic_gpu_mem_mib).
_READ = "read in the sglang {} wheel (first release with it)"
_OLDEST = "before 0.4.3 (read in the sglang 0.4.3 wheel, the oldest release modelled)"
# the source snapshots stand among the releases by date (memprof/core/releases.py:
# deepseek-v4-hopper@2026-07 between 0.5.14 and 0.5.15, SGL@d315eb7 between 0.5.18 and 0.5.19);
# a row whose source was not read at them leaves them out (versions.around_snapshots)
# the chunked-prefill and graph-batch tiers by GPU memory (sglang_defaults reads them)
CHUNK_BY_TIER = "by GPU tier (20/35/60/90/160 GiB)"
CHUNK_BY_TIER_0520 = "by GPU tier; 4096 from 20 to 35 GiB"
GRAPH_BY_TIER = "by GPU tier; 24 / 80 from 20 to 35 GiB"
GRAPH_BY_TIER_0520 = "by GPU tier; 48 / 160 from 20 to 35 GiB"
GRAPH_BY_TIER_CAPPED = ("by GPU tier; 48 / 160 from 20 to 35 GiB; a default capped at "
                        "--max-running-requests")

SGLANG_MFS_HEURISTIC: tuple[Rule, ...] = (
    Rule(name="sglang_mem_fraction_static", changes="budget: mem_fraction_static heuristic",
         since=None, until="0.4.6", value="by tp", engine="sglang",
         introduced_by=_OLDEST, removed_by=_READ.format("0.4.6"),
         source="sglang 0.4.3 server_args.py ServerArgs.__post_init__: 0.79 at tp >= 16, "
         "0.81 at >= 8, 0.85 at >= 4, 0.87 at >= 2, else 0.88"),
    Rule(name="sglang_mem_fraction_static", changes="budget: mem_fraction_static heuristic",
         since="0.4.6", until="0.4.7", value="by tp, or total - 13 GiB above 80 GiB",
         engine="sglang", introduced_by=_READ.format("0.4.6"),
         removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.6 server_args.py ServerArgs.__post_init__: the tp table while "
         "gpu_mem <= 81920, else (gpu_mem - 1024*13) / gpu_mem (not rounded)"),
    Rule(name="sglang_mem_fraction_static", changes="budget: mem_fraction_static heuristic",
         since="0.4.7", until="0.4.8",
         value="by tp*pp, 0.79 above 180 GB, 48 GiB rule above 96 GiB",
         engine="sglang", introduced_by=_READ.format("0.4.7"),
         removed_by=_READ.format("0.4.8"),
         source="sglang 0.4.7 server_args.py ServerArgs.__post_init__: the table by "
         "tp_size*pp_size while gpu_mem <= 81920, else 0.88; then 0.79 if gpu_mem > 180*1000 "
         "on CUDA, elif gpu_mem > 96*1024: min(mf + 48*1024*(1 - mf)/gpu_mem, "
         "(gpu_mem - 18*1024)/gpu_mem)"),
    Rule(name="sglang_mem_fraction_static", changes="budget: mem_fraction_static heuristic",
         since="0.4.8", until="0.5.3", value="reserve by GPU tier and tp*pp", engine="sglang",
         introduced_by=_READ.format("0.4.8"), removed_by=_READ.format("0.5.3"),
         source="sglang 0.4.8 (to 0.5.2) server_args.py ServerArgs.__post_init__: reserved_mem "
         "= (2.8 + tp*pp/10) GiB below 35 GiB, (9.5 + tp*pp/2) GiB below 90 GiB, (12 + "
         "tp*pp/2) GiB below 160 GiB, else 32 GiB; +4 GiB with DP attention; "
         "round((gpu_mem - reserved_mem)/gpu_mem, 3)"),
    Rule(name="sglang_mem_fraction_static", changes="budget: mem_fraction_static heuristic",
         since="0.5.3", until=None, value="reserve from chunked prefill and graph batch",
         engine="sglang", introduced_by=_READ.format("0.5.3"),
         source="sglang 0.5.3 server_args.py ServerArgs._handle_gpu_memory_settings (the same "
         "at SGL@d315eb7): 512 + 1.5*max(chunk, 2048) + tp*pp/8*1024 + 2*max_bs [+ DP "
         "attention] MiB, at least 10 GiB above 60 GiB; the prefill CUDA-graph reserve added "
         "before the floor from 0.5.10 (opt-in from 0.5.6) is SGLANG_PREFILL_GRAPH_RESERVE"),
)

# SGLang's prefill (piecewise) CUDA-graph reserve in the mem_fraction_static heuristic, per
# release (server_args.py _handle_gpu_memory_settings; 0.5.19 arg_groups/memory_hook.py
# reserve_for_graph_mb). value: how the prefill graphs are switched on. From 0.5.10 the
# conditions that turn them off before the heuristic, per release, are the rows of
# configs/sglang_prefill_graph_off_archs.json. memprof has no --enable-piecewise-cuda-graph
# (0.5.6 – 0.5.9), --disable-piecewise-cuda-graph nor --cuda-graph-backend-prefill flag: each is
# at its default.
PG_NONE = "none"
PG_OPT_IN = "opt-in (--enable-piecewise-cuda-graph, off by default)"
PG_ON = "on by default: 8 MiB per prefill size (MLA 1.5 GiB) before the floor"
_PG_SIZES = ("len(piecewise_cuda_graph_tokens) * 8 MiB (use_mla_backend(): 1.5 * 1024) before "
             "the 10 GiB floor; the sizes 4..32 step 4, 48..256 step 16, 288..512 step 32, "
             "576..1024 step 64, 1280..4096 step 256, 4608.. step 512 up to the max tokens: "
             "chunked_prefill_size (MLA 2048), capped by --max-total-tokens and at 4096 for a "
             "'llama-2' model path (0.5.13 on: also by an explicit --context-length "
             "[assumption: memprof reads its context length as not given for that cap])")
SGLANG_PREFILL_GRAPH_RESERVE: tuple[Rule, ...] = (
    Rule(name="sglang_prefill_graph_reserve",
         changes="budget: mem_fraction_static prefill CUDA-graph reserve",
         since=None, until="0.5.6", value=PG_NONE, engine="sglang",
         introduced_by=_OLDEST, removed_by=_READ.format("0.5.6"),
         source="sglang 0.5.5 server_args.py _handle_gpu_memory_settings: "
         "--enable-piecewise-cuda-graph exists (off by default) but the reserve has no term "
         "for it"),
    Rule(name="sglang_prefill_graph_reserve",
         changes="budget: mem_fraction_static prefill CUDA-graph reserve",
         since="0.5.6", until="0.5.10", value=PG_OPT_IN, engine="sglang",
         introduced_by=_READ.format("0.5.6"), removed_by=_READ.format("0.5.10"),
         source="sglang 0.5.6 server_args.py _handle_gpu_memory_settings: `if "
         "self.enable_piecewise_cuda_graph: reserved_mem += piecewise_cuda_graph_max_tokens // "
         "4` after the 10 GiB floor (0.5.7: // 8; 0.5.8, 0.5.9: len(piecewise_cuda_graph_tokens) "
         "* 8 before the floor); enable_piecewise_cuda_graph defaults to False and memprof has "
         "no such flag [assumption: off]"),
    *around_snapshots(Rule(
         name="sglang_prefill_graph_reserve",
         changes="budget: mem_fraction_static prefill CUDA-graph reserve",
         since="0.5.10", until=None, value=PG_ON, engine="sglang",
         introduced_by=_READ.format("0.5.10"),
         source="sglang 0.5.10 server_args.py: disable_piecewise_cuda_graph defaults to False "
         "and _handle_gpu_memory_settings adds, `if not self.disable_piecewise_cuda_graph`, "
         + _PG_SIZES + "; 0.5.14 (model_executor/cuda_graph_config.py) the prefill phase's "
         "backend, tc_piecewise by default, from 0.5.15 breakable on CUDA (tc_piecewise "
         "elsewhere, which non-CUDA hardware turns off), the same reserve (0.5.19 "
         "arg_groups/memory_hook.py reserve_for_graph_mb); what turns it off per release: "
         "configs/sglang_prefill_graph_off_archs.json (_handle_piecewise_cuda_graph, "
         "_disable_tc_piecewise_cudagraph_if_incompatible, "
         "_disable_breakable_cudagraph_if_incompatible)")),
    # at a source snapshot no row holds: its server_args.py is not read for the reserve
    # (assumed absent there: not applied)
)




# Which row of configs/sglang_prefill_graph_off_archs.json (the conditions that turn the default
# prefill CUDA graphs off before the heuristic, so that it reserves nothing for them) holds, per
# release. value: "row X: ..." names the row (its "since"), which prefill_graph_off_row reads.
# The rows of 0.5.10 - 0.5.19 are each release's own; from 0.5.20 a row here per change read.
_PG_OFF_FILE = "configs/sglang_prefill_graph_off_archs.json"
SGLANG_PREFILL_GRAPH_OFF: tuple[Rule, ...] = (
    *around_snapshots(Rule(
         name="sglang_prefill_graph_off", changes="budget: what turns the prefill graphs off",
         since="0.5.10", until="0.5.20", value="each release's row (0.5.10 - 0.5.19)",
         engine="sglang", introduced_by=_READ.format("0.5.10"),
         removed_by=_READ.format("0.5.20"),
         source=f"{_PG_OFF_FILE} rows 0.5.10 - 0.5.19 (read in each wheel: server_args.py, "
         "0.5.19 arg_groups/cuda_graph_hook.py; configs/model_config.py)"), Rule(
         name="sglang_prefill_graph_off", changes="budget: what turns the prefill graphs off",
         since=None, until=None, value="none", engine="sglang",
         introduced_by="the snapshots' reserve is not applied (SGLANG_PREFILL_GRAPH_RESERVE)",
         source="the snapshot's source is not read for it; SGLANG_PREFILL_GRAPH_RESERVE "
         "applies no prefill-graph reserve at the snapshots")),
    Rule(name="sglang_prefill_graph_off", changes="budget: what turns the prefill graphs off",
         since="0.5.20", until="0.5.22", engine="sglang",
         value="row 0.5.20: KDA-attention configs off; one more multimodal model kept",
         introduced_by=_READ.format("0.5.20"), removed_by=_READ.format("0.5.22"),
         source=f"{_PG_OFF_FILE} row 0.5.20: sglang 0.5.20 (0.5.21) arg_groups/"
         "cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible adds \"KDA hybrid "
         "linear attention\" (configs/model_config.py uses_kda_attention: a config with "
         "linear_attn_config) and drops the DSA prefill context-parallel rule (not modelled); "
         "one more multimodal architecture on the breakable allowlist"),
    Rule(name="sglang_prefill_graph_off", changes="budget: what turns the prefill graphs off",
         since="0.5.22", until="0.5.23", engine="sglang",
         value="row 0.5.22: a multimodal model keeps them on the breakable allowlist alone",
         introduced_by=_READ.format("0.5.22"), removed_by=_READ.format("0.5.23"),
         source=f"{_PG_OFF_FILE} row 0.5.22: sglang 0.5.22 arg_groups/cuda_graph_hook.py "
         "apply_cuda_graph_compatibility no longer moves a multimodal model of the "
         "tc_piecewise allowlist to tc_piecewise (tc_piecewise's rules are gone): a multimodal "
         "model keeps the prefill graphs only on the breakable allowlist "
         "(configs/model_config.py multimodal_breakable_cuda_graph_supported_model_archs, which "
         "now also lists the tc_piecewise allowlist's models and one new architecture)"),
    Rule(name="sglang_prefill_graph_off", changes="budget: what turns the prefill graphs off",
         since="0.5.23", until=None, engine="sglang",
         value="row 0.5.23: one more multimodal model kept",
         introduced_by=_READ.format("0.5.23"),
         source=f"{_PG_OFF_FILE} row 0.5.23: sglang 0.5.23 configs/model_config.py: one more "
         "multimodal architecture on the breakable allowlist; cuda_graph_hook.py keeps "
         "DeepSeek-V4's graphs under supported prefill context parallelism (not modelled: no "
         "--attn-cp-size)"),
)
SGLANG_CHUNKED_PREFILL: tuple[Rule, ...] = (
    Rule(name="sglang_chunked_prefill_size", changes="defaults: --chunked-prefill-size",
         since=None, until="0.4.7", value="2048 below 25,000 MiB, else 8192", engine="sglang",
         introduced_by=_OLDEST, removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.3 (to 0.4.6) server_args.py ServerArgs.__post_init__"),
    Rule(name="sglang_chunked_prefill_size", changes="defaults: --chunked-prefill-size",
         since="0.4.7", until="0.4.8", value="16384 above 180,000 MiB, 2048 below 25,000, "
         "else 8192", engine="sglang", introduced_by=_READ.format("0.4.7"),
         removed_by=_READ.format("0.4.8"),
         source="sglang 0.4.7 server_args.py ServerArgs.__post_init__"),
    Rule(name="sglang_chunked_prefill_size", changes="defaults: --chunked-prefill-size",
         since="0.4.8", until="0.5.3", value="2048 below 35 GiB, 8192 below 160 GiB, else 16384",
         engine="sglang", introduced_by=_READ.format("0.4.8"), removed_by=_READ.format("0.5.3"),
         source="sglang 0.4.8 (to 0.5.2) server_args.py ServerArgs.__post_init__"),
    Rule(name="sglang_chunked_prefill_size", changes="defaults: --chunked-prefill-size",
         since="0.5.3", until="0.5.20", value=CHUNK_BY_TIER, engine="sglang",
         introduced_by=_READ.format("0.5.3"), removed_by=_READ.format("0.5.20"),
         source="sglang 0.5.3 server_args.py _handle_gpu_memory_settings (to 0.5.19: "
         "arg_groups/memory_hook.py handle_gpu_memory_settings; SGL@d315eb7, 2026-08-22, "
         "server_args.py): 2048 below 35 GiB, 4096 below 60, 8192 below 160, else 16384"),
    Rule(name="sglang_chunked_prefill_size", changes="defaults: --chunked-prefill-size",
         since="0.5.20", until=None, value=CHUNK_BY_TIER_0520, engine="sglang",
         introduced_by=_READ.format("0.5.20"),
         source="sglang 0.5.20 (to 0.5.23) arg_groups/memory_hook.py "
         "handle_gpu_memory_settings: the 20 - 35 GiB tier (\"A10, 4090, 5090\") declares "
         "chunked_prefill_size=4096 (0.5.19: 2048); the other tiers as before"),
)

SGLANG_GRAPH_MAX_BS: tuple[Rule, ...] = (
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since=None, until="0.4.6", value="8 (tp < 4) / 80 below 25,000 MiB, else 160",
         engine="sglang", introduced_by=_OLDEST, removed_by=_READ.format("0.4.6"),
         source="sglang 0.4.3 (to 0.4.5) server_args.py __post_init__ (cuda_graph_max_bs) and "
         "cuda_graph_runner.py get_batch_sizes_to_capture ([1, 2, 4] + 8..160 step 8)"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.4.6", until="0.4.7", value="8 / 80 below 25,000 MiB, 256 above 81,920 MiB "
         "without --dp, else 160", engine="sglang", introduced_by=_READ.format("0.4.6"),
         removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.6 server_args.py (no default above 25,000 MiB) and "
         "cuda_graph_runner.py get_batch_sizes_to_capture (+160..256 step 8 when gpu_mem > "
         "81920 and dp_size == 1)"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.4.7", until="0.4.8", value="8 / 80 below 25,000 MiB, 512 above 180,000 MiB, "
         "256 above 96 GiB, else 160", engine="sglang", introduced_by=_READ.format("0.4.7"),
         removed_by=_READ.format("0.4.8"),
         source="sglang 0.4.7 cuda_graph_runner.py get_batch_sizes_to_capture"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.4.8", until="0.5.3", value="8 / 80 below 35 GiB, 512 above 160,000 MiB, 256 "
         "above 90 GiB, else 160", engine="sglang", introduced_by=_READ.format("0.4.8"),
         removed_by=_READ.format("0.5.3"),
         source="sglang 0.4.8 (to 0.5.2) server_args.py and cuda_graph_runner.py "
         "get_batch_sizes_to_capture"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.5.3", until="0.5.5", value="by GPU tier; 16 / 80 from 20 to 35 GiB",
         engine="sglang", introduced_by=_READ.format("0.5.3"), removed_by=_READ.format("0.5.5"),
         source="sglang 0.5.3 server_args.py _handle_gpu_memory_settings"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.5.5", until="0.5.20", value=GRAPH_BY_TIER, engine="sglang",
         introduced_by=_READ.format("0.5.5"), removed_by=_READ.format("0.5.20"),
         source="sglang 0.5.5 server_args.py _handle_gpu_memory_settings (to 0.5.19: "
         "arg_groups/memory_hook.py; SGL@d315eb7, 2026-08-22, server_args.py: 24 / 80 from 20 "
         "to 35 GiB, no cap by --max-running-requests)"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.5.20", until="0.5.22", value=GRAPH_BY_TIER_0520, engine="sglang",
         introduced_by=_READ.format("0.5.20"), removed_by=_READ.format("0.5.22"),
         source="sglang 0.5.20 (0.5.21) arg_groups/memory_hook.py handle_gpu_memory_settings: "
         "the 20 - 35 GiB tier sets decode max_bs 48 at tp < 4, else 160 (0.5.19: 24 / 80; "
         "\"32GB Blackwell (RTX 5090) can hold decode cuda graphs well past bs=24\")"),
    Rule(name="sglang_cuda_graph_max_bs", changes="CUDA graphs: largest captured batch",
         since="0.5.22", until=None, value=GRAPH_BY_TIER_CAPPED, engine="sglang",
         introduced_by=_READ.format("0.5.22"),
         source="sglang 0.5.22 (0.5.23) arg_groups/memory_hook.py handle_gpu_memory_settings: "
         "`if decode_max_bs_is_default and cfg.max_running_requests is not None and "
         "decode_cuda_graph_config.max_bs > cfg.max_running_requests: max_bs = "
         "max_running_requests`, before the capture list and the graph reserve"),
)


# SGLang on ROCm: with the aiter attention backend and a context above 8,192 tokens the server
# multiplies mem_fraction_static (given or from the heuristic) by this factor. value: the factor.
SGLANG_ROCM_AITER_MFS: tuple[Rule, ...] = (
    Rule(name="sglang_rocm_aiter_mem_fraction",
         changes="budget: mem_fraction_static on ROCm (aiter, long context)",
         since=None, until="0.4.7", value=1.0, engine="sglang",
         introduced_by=_OLDEST, removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.6.post5 model_executor/model_runner.py: aiter is the default "
         "attention backend on HIP, mem_fraction_static is not reduced for it"),
    Rule(name="sglang_rocm_aiter_mem_fraction",
         changes="budget: mem_fraction_static on ROCm (aiter, long context)",
         since="0.4.7", until=None, value=0.85, engine="sglang",
         introduced_by=_READ.format("0.4.7"),
         source="sglang 0.4.7 (to 0.5.4) model_executor/model_runner.py "
         "ModelRunner.model_specific_adjustment, from 0.5.5 (0.5.9, SGL@d315eb7) server_args.py "
         "ServerArgs (\"AMD platforms backends\"): `if attention_backend == \"aiter\": if "
         "context_len > 8192: mem_fraction_static *= 0.85`; the default backend on HIP "
         "(_get_default_attn_backend / model_runner): aiter for an MHA model, for an MLA model "
         "when get_num_kv_heads(tp_size) is 16 or 128 (else triton; 0.4.7 – 0.4.9 also ask for "
         "no speculative decoding, which memprof does not model for SGLang)"),
)

# What "Load weight end" reports per release. Every modelled release measures the load the same
# way (ModelRunner.load_model, model_executor/model_runner.py: ``before_avail_memory =
# get_available_gpu_memory(...)`` before ``get_model``, ``after_avail_memory`` after it;
# get_available_gpu_memory is ``torch.cuda.empty_cache()`` then ``torch.cuda.mem_get_info`` free,
# utils.py, from 0.5.x utils/common.py), and sizes the pool after it (``profile_max_num_token``:
# free after load − (1 − mem_fraction_static) × free before load); what changed is the line.
# value: what the line prints.
SGLANG_LOAD_FIGURE: tuple[Rule, ...] = (
    Rule(name="sglang_load_weight_line", changes="logs: what \"Load weight end\" prints",
         since=None, until="0.4.4", value="avail mem before and after (no mem usage)",
         engine="sglang", introduced_by=_OLDEST, removed_by=_READ.format("0.4.4"),
         source="sglang 0.4.3 model_executor/model_runner.py ModelRunner.load_model: \"Load "
         "weight begin. avail mem=\" and \"Load weight end. type=…, dtype=…, avail mem=\" "
         "(get_available_gpu_memory each time); the load is the difference of the two"),
    Rule(name="sglang_load_weight_line", changes="logs: what \"Load weight end\" prints",
         since="0.4.4", until=None, value="mem usage = free before − free after the load",
         engine="sglang", introduced_by=_READ.format("0.4.4"),
         source="sglang 0.4.4 model_executor/model_runner.py ModelRunner.load_model: \"mem "
         "usage={(before_avail_memory - after_avail_memory):.2f} GB\" (the same in 0.4.6 and "
         "0.4.8; 0.4.10, 0.5.3, 0.5.9, 0.5.19 and 0.5.23 keep it as self.weight_load_mem_usage)"),
)


# SGLang's process groups (distributed/parallel_state.py initialize_model_parallel): TP, then,
# from 0.4.10, the MoE expert-parallel group (ep_size ranks) and the MoE tensor-parallel group
# (tp / ep ranks; with EP off the TP group's ranks again), then PP. Each GroupCoordinator of more
# than one rank makes a PyNcclCommunicator whose constructor runs a warm-up all_reduce
# (device_communicators/pynccl.py), before the free memory the budget line reads. DP attention
# adds an attention-TP group without PyNccl (layers/dp_attention.py: use_pynccl=
# SYNC_TOKEN_IDS_ACROSS_TP, off by default) and --dp without it runs whole servers: no DP
# communicator. value: whether the two MoE groups are made (True), not made (False), or made
# only where unlike the TP group (SGLANG_MOE_GROUPS_UNLIKE_TP: from 0.5.2 a MoE group of the TP
# group's size is that group, no communicator of its own; with EP off or over all tp ranks, the
# layouts memprof models, neither MoE group then adds one).
SGLANG_MOE_GROUPS_UNLIKE_TP = "only those unlike TP"
SGLANG_MOE_GROUPS: tuple[Rule, ...] = (
    Rule(name="sglang_moe_process_groups", changes="NCCL MoE EP / MoE TP communicators",
         since=None, until="0.4.10", value=False, engine="sglang", applies_to="nccl",
         introduced_by=_OLDEST, removed_by=_READ.format("0.4.10"),
         source="sglang 0.4.3 / 0.4.8 / 0.4.9 / 0.4.9.post5 distributed/parallel_state.py "
         "initialize_model_parallel: TP and PP groups only"),
    Rule(name="sglang_moe_process_groups", changes="NCCL MoE EP / MoE TP communicators",
         since="0.4.10", until="0.5.2", value=True, engine="sglang", applies_to="nccl",
         introduced_by=_READ.format("0.4.10"), removed_by=_READ.format("0.5.2"),
         source="sglang 0.4.10 (0.5.1) distributed/parallel_state.py "
         "initialize_model_parallel: _MOE_EP (ranks st..en step moe_tp_size) and _MOE_TP "
         "(moe_tp_size = tp // moe_ep_size consecutive ranks) by init_model_parallel_group "
         "(use_pynccl=not is_npu(), use_custom_allreduce=False), whatever their size"),
    Rule(name="sglang_moe_process_groups", changes="NCCL MoE EP / MoE TP communicators",
         since="0.5.2", until=None, value=SGLANG_MOE_GROUPS_UNLIKE_TP, engine="sglang",
         applies_to="nccl", introduced_by=_READ.format("0.5.2"),
         source="sglang 0.5.2 (0.5.3, 0.5.4, 0.5.9, 0.5.23) distributed/parallel_state.py "
         "initialize_model_parallel: `if moe_ep_size == tensor_model_parallel_size: _MOE_EP = "
         "_TP` and `if moe_tp_size == tensor_model_parallel_size: _MOE_TP = _TP`, a new group "
         "(init_model_parallel_group) only otherwise; upstream main keeps both tests"),
)


# The free-memory reading across ranks in ``init_torch_distributed`` (``min_per_gpu_memory``,
# before the load): 0.4.3 - 0.4.6 reduce it over NCCL on torch's default (world) process group,
# whose ProcessGroupNCCL then makes its communicator lazily at that first collective, a rank's
# second after the TP group's PyNccl one; from 0.4.7 a CPU tensor over the world group's gloo
# ``cpu_group``, no device communicator. It runs where tp > 1, over a world of the tp ranks
# (0.4.3 - 0.4.6 model_runner.py: init_distributed_environment(world_size=self.tp_size); --dp
# without DP attention runs whole servers). "Init torch distributed ends. mem usage" holds it.
SGLANG_WORLD_NCCL_GROUP = "world"
SGLANG_FREE_MEMORY_OVER_NCCL: tuple[Rule, ...] = (
    Rule(name="sglang_free_memory_min_over_nccl", changes="NCCL world communicator (torch's)",
         since=None, until="0.4.7", value=True, engine="sglang", applies_to="nccl",
         introduced_by=_OLDEST, removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.3 / 0.4.4 / 0.4.5 / 0.4.6 utils.py get_available_gpu_memory: with "
         "distributed=True the free bytes go to a tensor on cuda:gpu_id and "
         "torch.distributed.all_reduce(tensor, op=ReduceOp.MIN) runs on the default group "
         "(init_process_group(backend='nccl') without device_id, "
         "distributed/parallel_state.py init_distributed_environment); "
         "model_executor/model_runner.py init_torch_distributed calls it with "
         "distributed=self.tp_size > 1 after initialize_model_parallel, before load_model"),
    Rule(name="sglang_free_memory_min_over_nccl", changes="NCCL world communicator (torch's)",
         since="0.4.7", until=None, value=False, engine="sglang", applies_to="nccl",
         introduced_by=_READ.format("0.4.7"),
         source="sglang 0.4.7 (0.4.8, 0.4.9, 0.4.10, 0.5.3, 0.5.4, 0.5.9) utils "
         "get_available_gpu_memory: torch.tensor(free_gpu_memory) on the CPU, all_reduce(..., "
         "group=cpu_group), model_runner.py passing cpu_group=get_world_group().cpu_group "
         "(gloo)"),
)


# Whether a rank with no NCCL communicator (TP1: no PyNccl warm-up) runs the process's first CUDA
# kernel before ``load_model``'s first free-memory reading, and so outside the load's drop
# (``load_drop``) and inside the free memory before it (the pool's baseline). That kernel's
# one-time non-torch memory (the driver's device-side assert/printf reservation its module's
# load makes, 92 MiB on an H100 and the card's own step elsewhere:
# ``memprof.core.terms.first_kernel``) lands wherever the first
# kernel runs. What runs it before the load, per release (torch pins: 2.5.1 in 0.4.4/0.4.5,
# 2.6.0 in 0.4.6, 2.7.1 in 0.4.7 - 0.4.10, 2.8.0 in 0.5.1 - 0.5.5, 2.9.1 in 0.5.6 - 0.5.10,
# 2.11.0 in 0.5.13, 2.13.0 in 0.5.18; every one loads modules lazily, which torch turns on where
# CUDA_MODULE_LOADING is unset, so the pin decides nothing here; SGLang's own
# CUDA_MODULE_LOADING=AUTO from 0.4.4, entrypoints/engine.py _set_envs_and_config, leaves the
# step lazy on Linux as rows 166 (0.4.4) and 404 (0.5.5) show it in the load): value True, False, or
# SGLANG_FIRST_KERNEL_EXPERT_LAYOUT (only for a model whose SGLang class declares an expert
# layout; memprof does not know which families' classes do, so it keeps the kernel in the load
# for every model there [approximation for such a MoE model at TP1]).
SGLANG_FIRST_KERNEL_EXPERT_LAYOUT = "for a model whose class declares an expert layout"
SGLANG_FIRST_KERNEL_BEFORE_LOAD: tuple[Rule, ...] = (
    Rule(name="sglang_first_kernel_before_load",
         changes="load figure: the first kernel's modules before the load (no communicator)",
         since=None, until="0.4.7", value=False, engine="sglang",
         introduced_by=_OLDEST, removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.3 / 0.4.4 / 0.4.5 / 0.4.6 model_executor/model_runner.py: "
         "init_torch_distributed (set_device, init_distributed_environment, "
         "initialize_model_parallel: no PyNcclCommunicator at world size 1; the free-memory "
         "readings are mem_get_info) then load_model, no device tensor between them"),
    Rule(name="sglang_first_kernel_before_load",
         changes="load figure: the first kernel's modules before the load (no communicator)",
         since="0.4.7", until="0.4.10", value=True, engine="sglang",
         introduced_by=_READ.format("0.4.7"), removed_by=_READ.format("0.4.10"),
         source="sglang 0.4.7 / 0.4.8 / 0.4.9 model_executor/model_runner.py "
         "ModelRunner.initialize: set_global_expert_location_metadata("
         "compute_initial_expert_location_metadata(...)) before self.load_model() for every "
         "model (not a draft worker); expert_location.py (managers/ in 0.4.7 - 0.4.8, eplb/ in "
         "0.4.9): init_expert_location defaults to \"trivial\", "
         "ModelConfigForExpertLocation.from_model_config gives init_dummy() (1 layer, 1 expert) "
         "for a class without get_model_config_for_expert_location, and "
         "ExpertLocationMetadata._init_raw runs F.pad, `!= -1` and torch.count_nonzero on the "
         "map moved to server_args.device"),
    Rule(name="sglang_first_kernel_before_load",
         changes="load figure: the first kernel's modules before the load (no communicator)",
         since="0.4.10", until="0.5.8", value=SGLANG_FIRST_KERNEL_EXPERT_LAYOUT, engine="sglang",
         introduced_by=_READ.format("0.4.10"), removed_by=_READ.format("0.5.8"),
         source="sglang 0.4.10 / 0.5.1 - 0.5.7 eplb/expert_location.py: from_model_config "
         "returns None for a class without get_model_config_for_expert_location and _init_common "
         "then returns None (no device tensor); a class with it (0.5.5 models/: deepseek_v2, "
         "qwen2_moe, qwen3_moe, qwen3_next, glm4_moe, gpt_oss, minimax_m2, bailing_moe, ...) "
         "still runs the metadata's kernels before load_model; GroupCoordinator makes no device "
         "tensor at world size 1 (distributed/parallel_state.py, 0.5.5 - 0.5.7); row 404 (0.5.5, "
         "TP1, Llama) logs \"Init torch distributed ends. mem usage=0.00 GB\""),
    Rule(name="sglang_first_kernel_before_load",
         changes="load figure: the first kernel's modules before the load (no communicator)",
         since="0.5.8", until=None, value=True, engine="sglang",
         introduced_by=_READ.format("0.5.8"),
         source="sglang 0.5.8 (0.5.9, 0.5.10, 0.5.13, 0.5.18, 0.5.23) distributed/"
         "parallel_state.py "
         "GroupCoordinator.__init__: `active_ranks = torch.ones(len(ranks), dtype=torch.int32, "
         "device=self.device)` for each group (0.5.18: outside the mooncake branch), the world "
         "group of one rank included (init_distributed_environment -> init_world_group), in "
         "ModelRunner.init_torch_distributed before load_model; upstream main keeps it "
         "(python/sglang/srt/distributed/parallel_state.py as the bytedance-iaas/sglang mirror "
         "stores it, 2026; memprof takes both 2026 snapshots to keep it); is_cuda_alike "
         "covers HIP; rows 1451 (0.5.10) and 1455 (0.5.18) log \"Init torch distributed "
         "ends. … mem usage=0.09 GB\" at TP1"),
)


def first_kernel_before_load(version: str | None) -> bool:
    """Whether SGLang at ``version`` runs the process's first kernel before the load on a rank
    with no NCCL communicator (``SGLANG_FIRST_KERNEL_BEFORE_LOAD``; the expert-layout range
    counts as not: the kernel stays in the load for every model there)."""
    return value_at(SGLANG_FIRST_KERNEL_BEFORE_LOAD, version, False, engine="sglang") is True


def load_drop(loaded: int, first_kernel: int) -> int:
    """The drop in free memory across SGLang's model load (``SGLANG_LOAD_FIGURE``): what its
    budget line subtracts and what "Load weight end. … mem usage" prints (0.4.3: the difference
    of the two "avail mem" lines). It holds every allocation made while loading (``loaded``:
    the weights and the buffers built with the model, in the allocator's segments, since
    ``empty_cache`` runs before each reading) and the one-time non-torch memory of the process's
    first kernel (``first_kernel``) where the load runs it, since building the model runs
    fills (RMSNorm's ``torch.ones`` under the device context). A rank with an NCCL communicator
    ran that kernel before (distributed/parallel_state.py GroupCoordinator makes a
    PyNcclCommunicator, whose warm-up ``torch.zeros`` is a kernel, at world size > 1); one
    without (TP1) ran it before only in the releases of ``SGLANG_FIRST_KERNEL_BEFORE_LOAD``
    (0.4.7 – 0.4.9: the expert-location metadata; from 0.5.8: the world group's
    ``active_ranks``), where ``first_kernel`` is 0 (``SGLang.first_kernel_before_load``). cuBLAS
    is not in it: its first GEMM is ``init_cublas``, after the memory pool (model_runner.py
    ``initialize``, 0.4.3 – 0.5.9).
    """
    return loaded + first_kernel


_MFS_NOW = SGLANG_MFS_HEURISTIC[-1].value
_CHUNK_NOW = SGLANG_CHUNKED_PREFILL[-1].value
_GRAPH_NOW = SGLANG_GRAPH_MAX_BS[-1].value
# the tiered rows (0.5.3 on), whose tiers sglang_defaults reads
_CHUNK_TIERED = (CHUNK_BY_TIER, CHUNK_BY_TIER_0520)
_GRAPH_TIERED = (GRAPH_BY_TIER, GRAPH_BY_TIER_0520, GRAPH_BY_TIER_CAPPED)
# 0.5.3 – 0.5.4: the 20–35 GiB tier captured up to 16 at tp < 4 (24 from 0.5.5)
_GRAPH_053 = next(r.value for r in SGLANG_GRAPH_MAX_BS if r.since == "0.5.3")


class PrefillGraphModel(NamedTuple):
    """What SGLang's prefill CUDA-graph switch and reserve read of the model
    (``SGLANG_PREFILL_GRAPH_RESERVE``)."""

    architecture: str  # the config's architectures[0]
    mla: bool  # use_mla_backend(): AttentionArch.MLA, the configs that state kv_lora_rank
    multimodal: bool  # model_config.is_multimodal: a vision tower
    nsa: bool  # is_deepseek_nsa / is_deepseek_dsa: an MLA model with DeepSeek's indexer
    capped_4096: bool  # "llama-2" in the model path: the max tokens capped at 4096


def prefill_graph_model(spec: Any) -> PrefillGraphModel | None:
    """The facts ``prefill_graph_reserve_mib`` reads of a model spec (None: none given)."""
    if spec is None:
        return None
    layers = spec.layers
    return PrefillGraphModel(
        architecture=spec.architecture or "",
        mla=any(layer.attention.kv_lora_rank for layer in layers),
        multimodal=spec.vision is not None,
        nsa=any(layer.attention.has_indexer for layer in layers),
        capped_4096="llama-2" in spec.name.lower())


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill sizes SGLang captures up to ``max_tokens``
    (_generate_piecewise_cuda_graph_tokens, sglang 0.5.10 server_args.py; the same grid in
    0.5.14's _generate_prefill_cuda_graph_batch_sizes and 0.5.19's
    arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes): 58 at 8192, 74 at
    16384."""
    return len(prefill_graph_token_sizes(max_tokens))


def prefill_graph_token_sizes(max_tokens: int) -> list[int]:
    """The prefill sizes SGLang captures up to ``max_tokens`` (``prefill_graph_sizes``' grid)."""
    grid = (*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32),
            *range(576, 1024 + 1, 64), *range(1280, 4096 + 1, 256),
            *range(4608, max_tokens + 1, 512))
    return [size for size in grid if size <= max_tokens]


@cache
def _prefill_graph_off() -> tuple[dict[str, Any], ...]:
    """The rows of configs/sglang_prefill_graph_off_archs.json, oldest first."""
    path = configs_dir() / "sglang_prefill_graph_off_archs.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["releases"]
    return tuple(sorted(rows, key=lambda r: releases.SGLANG_RELEASES.index(r["since"])))


def prefill_graph_off_row(version: str | None) -> dict[str, Any] | None:
    """The row of configs/sglang_prefill_graph_off_archs.json in force at ``version`` (a
    release of ``SGLANG_PREFILL_GRAPH_RESERVE``'s on-by-default row)."""
    version = version or releases.SGLANG_RELEASES[-1]
    if version not in releases.SGLANG_RELEASES:
        return None
    named = str(value_at(SGLANG_PREFILL_GRAPH_OFF, version, "", engine="sglang"))
    if named.startswith("row "):  # the row SGLANG_PREFILL_GRAPH_OFF names
        version = named.removeprefix("row ").split(":")[0]
    at = releases.SGLANG_RELEASES.index(version)
    held = [r for r in _prefill_graph_off()
            if releases.SGLANG_RELEASES.index(r["since"]) <= at]
    return held[-1] if held else None


def _prefill_graphs_off(row: dict[str, Any], dep: DeploymentView, gpu: GPU,
                        model: PrefillGraphModel) -> bool:
    """Whether a condition of ``row`` that memprof models turns the prefill graphs off."""
    mla_off = {"all": model.mla, "non_dsa": model.mla and not model.nsa,
               "none": False}[row["mla_off"]]
    return (gpu.is_rocm  # non-CUDA hardware (from 0.5.15: tc_piecewise there, turned off)
            or model.architecture in row["archs_off"]
            or (row["nsa_off"] and model.nsa)
            or mla_off
            or (model.multimodal and model.architecture not in row["multimodal_kept"])
            or (row["dp_attention_off"] and dep.enable_dp_attention)
            or (row["pp_off"] and dep.pp > 1)
            or (row["speculative_off"] and dep.num_speculative_tokens > 0)
            or (row["disable_cuda_graph_off"] and dep.enforce_eager))


def prefill_graph_reserve_mib(dep: DeploymentView, gpu: GPU, chunk: int,
                              model: PrefillGraphModel | None) -> float:
    """MiB the mem_fraction_static heuristic reserves for prefill CUDA graphs before its 10 GiB
    floor, by the row of ``SGLANG_PREFILL_GRAPH_RESERVE`` at the release: 0 where the row has
    none (or it is opt-in, memprof having no flag to opt in), where the release's row of
    configs/sglang_prefill_graph_off_archs.json turns the graphs off, or where no model is
    given; else 1.5 GiB with MLA, or 8 MiB per prefill size up to the chunk (capped by
    --max-total-tokens; 4096 for a 'llama-2' path)."""
    rule = value_at(SGLANG_PREFILL_GRAPH_RESERVE, dep.engine_version, PG_NONE,
                    engine=SGLang.name)
    if dep.engine != SGLang.name or model is None or rule != PG_ON:
        return 0.0
    row = prefill_graph_off_row(dep.engine_version)
    if row is None or _prefill_graphs_off(row, dep, gpu, model):
        return 0.0
    if model.mla:
        return 1.5 * 1024
    max_tokens = chunk
    if dep.max_total_tokens is not None:
        max_tokens = min(max_tokens, dep.max_total_tokens)
    if model.capped_4096:
        max_tokens = min(max_tokens, 4096)
    return 8.0 * prefill_graph_sizes(max_tokens)


def _by_tp(n: int) -> float:
    """The mem_fraction_static table of sglang 0.4.3 – 0.4.7 by tp (0.4.7: tp·pp)."""
    return 0.79 if n >= 16 else 0.81 if n >= 8 else 0.85 if n >= 4 else 0.87 if n >= 2 else 0.88


def _mfs_before_053(rule: object, mib: float, gpu: GPU, dep: DeploymentView) -> float:
    """mem_fraction_static by the rows of ``SGLANG_MFS_HEURISTIC`` before 0.5.3 (their
    ``source`` gives the release and formula)."""
    par = dep.tp * dep.pp
    if rule == SGLANG_MFS_HEURISTIC[0].value:
        return _by_tp(dep.tp)
    if rule == SGLANG_MFS_HEURISTIC[1].value:
        return _by_tp(dep.tp) if mib <= 81920 else (mib - 1024 * 13) / mib
    if rule == SGLANG_MFS_HEURISTIC[2].value:
        mf = _by_tp(par) if mib <= 81920 else 0.88
        if mib > 180 * 1000 and not gpu.is_rocm:
            return 0.79
        if mib > 96 * 1024:
            return min(mf + 48 * 1024 * (1 - mf) / mib, (mib - 18 * 1024) / mib)
        return mf
    reserved = ((2.8 + par / 10) * 1024 if mib < 35 * 1024 else
                (9.5 + par / 2) * 1024 if mib < 90 * 1024 else
                (12 + par / 2) * 1024 if mib < 160 * 1024 else 32 * 1024)
    if dep.enable_dp_attention:
        reserved += 4 * 1024
    return round((mib - reserved) / mib, 3)


def _chunk_before_053(rule: object, mib: float) -> int:
    """--chunked-prefill-size's default by the rows of ``SGLANG_CHUNKED_PREFILL`` before 0.5.3."""
    if rule == SGLANG_CHUNKED_PREFILL[0].value:
        return 2048 if mib < 25_000 else 8192
    if rule == SGLANG_CHUNKED_PREFILL[1].value:
        return 16384 if mib > 180_000 else 2048 if mib < 25_000 else 8192
    return 2048 if mib < 35 * 1024 else 8192 if mib < 160 * 1024 else 16384


def _graph_before_053(rule: object, mib: float, dep: DeploymentView) -> int:
    """The largest captured batch by the rows of ``SGLANG_GRAPH_MAX_BS`` before 0.5.3: below
    the small-GPU bound the default cuda_graph_max_bs, above it the end of the release's
    capture list."""
    small = 25_000 if rule != SGLANG_GRAPH_MAX_BS[3].value else 35 * 1024
    if mib < small:
        return 8 if dep.tp < 4 else 80
    if rule == SGLANG_GRAPH_MAX_BS[0].value:
        return 160
    if rule == SGLANG_GRAPH_MAX_BS[1].value:
        return 256 if mib > 81920 and dep.dp == 1 else 160
    if rule == SGLANG_GRAPH_MAX_BS[2].value:
        return 512 if mib > 180 * 1000 else 256 if mib > 96 * 1024 else 160
    return 512 if mib > 160 * 1000 else 256 if mib > 90 * 1024 else 160


# The GPU memory SGLang's heuristics read (``gpu_mem``, MiB): ``get_device_memory_capacity`` →
# on CUDA ``get_nvgpu_memory_capacity``, the smallest of ``nvidia-smi
# --query-gpu=memory.total`` (falling back to torch.cuda.mem_get_info's total only where
# nvidia-smi prints no number, under MIG), on ROCm rocm-smi's VRAM total. nvidia-smi's total is
# torch's plus the memory the driver reserves (480 MiB on H100 SXM, 728 MiB on B200:
# configs/gpus.json smi_total_mib), so the heuristics' fraction and tiers are those of the
# larger figure. value: which total.
SGLANG_HEURISTIC_GPU_MEM: tuple[Rule, ...] = (
    Rule(name="sglang_heuristic_gpu_mem", changes="budget: the total the heuristics read",
         since=None, until=None, value="nvidia-smi memory.total", engine="sglang",
         introduced_by=_OLDEST,
         source="sglang 0.4.3 / 0.4.9 utils.py get_nvgpu_memory_capacity, 0.5.3 / 0.5.4 / 0.5.9 "
         "utils/common.py: subprocess nvidia-smi --query-gpu=memory.total "
         "--format=csv,noheader,nounits, min over the GPUs; server_args.py gpu_mem = "
         "get_device_memory_capacity(self.device) (0.4.9 __post_init__, 0.5.4 "
         "_handle_gpu_memory_settings)"),
)


def heuristic_gpu_mem_mib(gpu: GPU) -> tuple[float, str | None]:
    """The ``gpu_mem`` SGLang's heuristics read (``SGLANG_HEURISTIC_GPU_MEM``): the catalog's
    nvidia-smi (rocm-smi) total in MiB, and None; where the catalog has none (or the card is
    described by ``--gpu-memory``), torch's total and the assumption stated for the output."""
    if gpu.smi_total_mib is not None and gpu.source != "--gpu-memory":
        return float(gpu.smi_total_mib), None
    mib = gpu.total_bytes / MiB
    return mib, (f"SGLang sizes its mem_fraction_static, chunked-prefill and CUDA-graph "
                 f"heuristics on nvidia-smi's memory.total, which memprof does not have for "
                 f"{gpu.name}: it uses torch's total ({mib:,.0f} MiB) [assumption: the "
                 "driver's reservation, 480 MiB on H100, would raise the fraction slightly]")


def _given_running_requests(gpu: GPU, dep: DeploymentView) -> int | None:
    """``--max-running-requests`` where it was given: ``max_num_seqs``, unless it is the stand-in
    ``batch_defaults`` fills in when it is not (read as not given, as ``SGLang.request_table``
    reads it)."""
    if dep.max_num_seqs is None:
        return None
    stand_in = batch_defaults(gpu, None, dep.entrypoint, dep.max_model_len or 0)[1]
    return None if dep.max_num_seqs == stand_in else dep.max_num_seqs


def sglang_defaults(gpu: GPU, dep: DeploymentView,
                    model: PrefillGraphModel | None = None) -> tuple[int, int, float]:
    """SGLang's (chunked_prefill_size, cuda_graph_max_bs, mem_fraction_static) heuristics.

    ``server_args.py::_handle_gpu_memory_settings`` (SGL@d315eb7), sizes in MiB::

        reserved = 512 + 1.5·max(chunked_prefill_size, 2048) + tp·pp/8·1024 + reserve_for_graph
        reserve_for_graph = 2·max_bs [+ 3·max_bs·dp (+1.5·max_bs·dp if max_bs > 300) with DP attn]
        reserved = max(reserved, 10 GiB) if the GPU has more than 60 GiB
        mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3)

    Before 0.5.3 (and for the graph batch before 0.5.5) the rows of ``SGLANG_MFS_HEURISTIC``,
    ``SGLANG_CHUNKED_PREFILL`` and ``SGLANG_GRAPH_MAX_BS`` at the deployment's release hold.
    From 0.5.10 the reserve adds the prefill CUDA graphs' (``prefill_graph_reserve_mib``, read
    of ``model``; without one it adds none) before the floor. From 0.5.20 the 20 – 35 GiB tier
    chunks 4096 and captures up to 48 / 160; from 0.5.22 a default graph batch larger than a
    given ``--max-running-requests`` is capped at it (the snapshots predate both).
    """
    mib = heuristic_gpu_mem_mib(gpu)[0]  # nvidia-smi's total: SGLANG_HEURISTIC_GPU_MEM
    gib = mib / 1024
    # the rows in force at the deployment's release (a vLLM deployment asks for the graph batch
    # only, and reads SGLang's newest rules)
    version = dep.engine_version if dep.engine == SGLang.name else None
    mfs_rule = value_at(SGLANG_MFS_HEURISTIC, version, _MFS_NOW, engine=SGLang.name)
    chunk_rule = value_at(SGLANG_CHUNKED_PREFILL, version, _CHUNK_NOW, engine=SGLang.name)
    graph_rule = value_at(SGLANG_GRAPH_MAX_BS, version, _GRAPH_NOW, engine=SGLang.name)
    tiers = ((20, 2048, 8, 8), (35, 2048, 24, 80), (60, 4096, 32, 160), (90, 8192, 256, 512),
             (160, 8192, 256, 512), (math.inf, 16384, 512, 512))
    tier = next(t for t in tiers if gib < t[0])
    small = tier[0] == 35  # the 20 - 35 GiB tier, which 0.5.20 raised
    if chunk_rule in _CHUNK_TIERED:
        default_chunk = 4096 if small and chunk_rule == CHUNK_BY_TIER_0520 else tier[1]
    else:
        default_chunk = _chunk_before_053(chunk_rule, mib)
    if graph_rule in _GRAPH_TIERED:
        raised = graph_rule != GRAPH_BY_TIER and small
        default_bs = ((48 if raised else tier[2]) if dep.tp < 4 else
                      (160 if raised else tier[3]))
        if graph_rule == GRAPH_BY_TIER_CAPPED:
            default_bs = min(default_bs, _given_running_requests(gpu, dep) or default_bs)
    elif graph_rule == _GRAPH_053:
        default_bs = (16 if small else tier[2]) if dep.tp < 4 else tier[3]
    else:
        default_bs = _graph_before_053(graph_rule, mib, dep)
    chunk = default_chunk if dep.chunked_prefill_size is None else dep.chunked_prefill_size
    max_bs = dep.cuda_graph_max_bs or default_bs
    if dep.mem_fraction_static:
        return chunk, max_bs, dep.mem_fraction_static
    if mfs_rule != _MFS_NOW:
        return chunk, max_bs, _mfs_before_053(mfs_rule, mib, gpu, dep)
    graph: float = 2 * max_bs
    if dep.enable_dp_attention:
        graph += 3 * max_bs * dep.dp + (1.5 * max_bs * dep.dp if max_bs > 300 else 0)
    # chunked prefill off (-1): the reserve follows --max-prefill-tokens instead
    prefill = chunk if chunk > 0 else SGLANG_MAX_PREFILL_TOKENS
    # the prefill CUDA-graph reserve, before the floor (SGLANG_PREFILL_GRAPH_RESERVE)
    prefill_graphs = prefill_graph_reserve_mib(dep, gpu, chunk, model)
    reserved = (512 + 1.5 * max(prefill, 2048) + dep.tp * dep.pp / 8 * 1024 + graph
                + prefill_graphs)
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    mfs = round((mib - reserved) / mib, 3)
    if mfs <= 0 and dep.engine == SGLang.name:
        # (a vLLM deployment reads only the graph batch of these; its budget is its own)
        # SGLang would start with a mem_fraction_static ≤ 0 and fail: refuse the settings instead
        fixed = reserved - graph
        per_bs = graph / max_bs
        top = max(1, int((mib * 0.999 - fixed) / per_bs)) if per_bs else 0
        raise BadInput(
            f"with --cuda-graph-max-bs {max_bs} SGLang's mem_fraction_static heuristic reserves "
            f"{reserved:,.0f} MiB for activations and CUDA graphs, more than the GPU's "
            f"{mib:,.0f} MiB (mem_fraction_static would be {mfs})",
            hint=f"lower --cuda-graph-max-bs (at most {top} here), or set --mem-fraction-static")
    return chunk, max_bs, mfs


def rocm_aiter_scale(dep: DeploymentView, gpu: GPU, attention: AttentionFacts | None) -> float:
    """The factor ``SGLANG_ROCM_AITER_MFS`` puts on mem_fraction_static: 0.85 on ROCm from 0.4.7
    when SGLang picks the aiter attention backend (the attention kind's ``hip_aiter_heads``: an
    MHA/GQA model; an MLA model with 16 or 128 heads per TP rank) and the context is longer
    than 8,192 tokens; 1.0 otherwise (and for attention kinds whose backend choice memprof has
    not read)."""
    if not gpu.is_rocm or dep.engine != SGLang.name or attention is None:
        return 1.0
    factor = float(str(value_at(SGLANG_ROCM_AITER_MFS, dep.engine_version, 1.0,
                                engine=SGLang.name)))
    heads = attention.hip_aiter_heads
    if heads is None:
        return 1.0
    aiter = not heads or max(1, attention.num_heads // dep.tp) in heads
    return factor if aiter and (dep.max_model_len or 0) > 8192 else 1.0


class SGLang(Engine):
    """SGLang (``python -m sglang.launch_server``) at the snapshots of its row in
    ``releases.py``."""

    name: ClassVar[str] = "sglang"
    display: ClassVar[str] = releases.SGLANG.display
    # SGLang get_bool_env_var("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") (model_config.py)
    long_context_env: ClassVar[str] = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    overrides_flag: ClassVar[str] = "--json-model-override-args"
    own_rope_buffers: ClassVar[bool] = True
    # ModelRunner.load_model: free before − free after get_model, each by
    # get_available_gpu_memory (empty_cache, then mem_get_info), sglang 0.4.3 – 0.5.17
    # (``load_drop``): the load's segments and the allocator's stranded blocks count in it
    load_is_free_memory_drop: ClassVar[bool] = True
    # ReqToTokenPool.req_to_token beside the KV pool (sglang_req_pool.py)
    has_request_table: ClassVar[bool] = True
    cli_flags_by_release: ClassVar[bool] = True
    # TpModelWorker.__init__ (managers/tp_worker.py, sglang 0.4.3 to 0.5.9): max_req_len =
    # min(context_len - 1, max_total_num_tokens - 1) (0.5.9: max_token_pool_size - 1): a pool
    # smaller than the context shortens the longest request, it does not stop the start-up
    refuses_request_over_kv: ClassVar[bool] = False
    # no encoder forward or cache before the pool is sized (sglang_vlm.py)
    profiles_encoder: ClassVar[bool] = False
    launcher_prefix: ClassVar[str] = "python -m sglang.launch_server "
    # ``sglang serve``, the console script SGLang's docs now recommend: its first word, when no
    # flag, is the model (python/sglang/cli/serve.py, _normalize_positional_model_path); the
    # rest are launch_server's flags (prepare_server_args)
    cli_launcher: ClassVar[tuple[str, str] | None] = ("sglang", "serve")
    cli_model_flag: ClassVar[str | None] = "--model-path"
    # ServerArgs.add_cli_args (python/sglang/srt/server_args.py, SGL@d315eb7); --engine,
    # --engine-version, --scratch and --gpu-memory-in-use are memprof's own
    flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "engine": ("--engine",),
        "engine_version": ("--engine-version",),
        "tp": ("--tp", "--tp-size"),
        "pp": ("--pp-size",),
        "dp": ("--dp", "--dp-size"),
        "enable_expert_parallel": ("--enable-expert-parallel",),
        "dtype": ("--dtype",),
        "hf_overrides": ("--json-model-override-args",),
        "quantization": ("--quantization",),
        "kv_cache_dtype": ("--kv-cache-dtype",),
        "max_model_len": ("--context-length",),
        "max_num_seqs": ("--max-running-requests",),
        "block_size": ("--page-size",),
        "enforce_eager": ("--disable-cuda-graph",),
        "scratch": ("--scratch",),
        "gpu_memory_in_use": ("--gpu-memory-in-use",),
        "disable_custom_all_reduce": ("--disable-custom-all-reduce",),
        "no_gpu_peer_access": ("--no-gpu-peer-access",),
        "nvidia_driver": ("--nvidia-driver",),
        "nnodes": ("--nnodes",),
        "assume_architecture": ("--assume-architecture",),
        "mem_fraction_static": ("--mem-fraction-static",),
        "enable_dp_attention": ("--enable-dp-attention",),
        "chunked_prefill_size": ("--chunked-prefill-size",),
        "cuda_graph_max_bs": ("--cuda-graph-max-bs",),
        "max_total_tokens": ("--max-total-tokens",),
        "attention_backend": ("--attention-backend",),
    }

    # --- rank layout: one server of --tp GPUs; --dp splits it for attention --------------------

    # the long forms ServerArgs.add_cli_args registers beside --tp-size, --pp-size, --dp-size
    # (server_args.py, sglang 0.4.3 to SGL@d315eb7); --cuda-graph-max-bs-decode: 0.5.23's
    # spelling of the decode graphs' largest batch (arg_groups/fields/exec_.py
    # cuda_graph_max_bs_decode, applied by arg_groups/cuda_graph_hook.py; 0.5.16 and 0.5.19
    # spell the same field --cuda-graph-max-bs: configs/sglang_cli_flags.json)
    flag_aliases: ClassVar[dict[str, str]] = {
        "--tensor-parallel-size": "tp", "--pipeline-parallel-size": "pp",
        "--data-parallel-size": "dp", "--cuda-graph-max-bs-decode": "cuda_graph_max_bs"}

    def world_size(self, dep: DeploymentView) -> int:
        """``--tp`` is the GPU count of one server and ``--dp`` splits it for attention: TP×PP."""
        return dep.tp * dep.pp

    def attn_tp(self, dep: DeploymentView) -> int:
        """``--enable-dp-attention`` runs attention with ``tp / dp`` ranks per DP group
        (``python/sglang/srt/layers/dp_attention.py``)."""
        if dep.enable_dp_attention:
            return max(1, dep.tp // dep.dp)
        return dep.tp

    def copies(self, dep: DeploymentView) -> int:
        return 1

    def nccl_groups(self, dep: DeploymentView) -> list[tuple[str, int]]:
        """TP, the two MoE groups where ``SGLANG_MOE_GROUPS`` makes them (from 0.5.2 only one
        whose size differs from TP's: one of TP's size is the TP group), PP, and torch's world
        communicator where the free-memory reading runs over NCCL
        (``SGLANG_FREE_MEMORY_OVER_NCCL``, 0.4.3 - 0.4.6): those of more than one rank (the MoE
        ones and the world's made after TP's, on the same GPUs)."""
        moe = value_at(SGLANG_MOE_GROUPS, dep.engine_version, False, engine="sglang")
        ep = self.ep_size(dep)
        moe_groups = [("MoE EP", ep), ("MoE TP", dep.tp // ep)] if moe else []
        if moe == SGLANG_MOE_GROUPS_UNLIKE_TP:
            moe_groups = [(n, size) for n, size in moe_groups if size != dep.tp]
        groups = [("TP", dep.tp), *moe_groups, ("PP", dep.pp)]
        if value_at(SGLANG_FREE_MEMORY_OVER_NCCL, dep.engine_version, False, engine="sglang"):
            groups.append((SGLANG_WORLD_NCCL_GROUP, dep.tp))
        return [(n, size) for n, size in groups if size > 1]

    def ep_size(self, dep: DeploymentView) -> int:
        """Experts over the TP ranks of the one server with --enable-expert-parallel."""
        return dep.tp if dep.enable_expert_parallel else 1

    def moe_tp_size(self, dep: DeploymentView) -> int:
        return 1 if dep.enable_expert_parallel else dep.tp

    def rank_coords(self, dep: DeploymentView) -> list[RankCoord]:
        out = []
        for pp_stage in range(dep.pp):
            for tp_rank in range(dep.tp):
                dp_rank = tp_rank // dep.attn_tp if dep.enable_dp_attention else 0
                ep = tp_rank if dep.enable_expert_parallel else None
                out.append(RankCoord(pp_stage * dep.tp + tp_rank, tp_rank, pp_stage, dp_rank, ep))
        return out

    # --- defaults -----------------------------------------------------------------------------

    def batch_defaults(self, gpu: GPU, version: str | None, entrypoint: str,
                       max_model_len: int, v0_chunked_prefill: bool = True,
                       given: tuple[int | None, int | None] = (None, None),
                       model_facts: frozenset[str] = frozenset()) -> tuple[int, int]:
        """vLLM's newest defaults (the sequences cap stands in for --max-running-requests)."""
        return batch_defaults(gpu, None, entrypoint, max_model_len, v0_chunked_prefill)

    def prepared(self, dep: DeploymentView, gpu: GPU) -> dict[str, object]:
        """The heuristics' chunked prefill and graph batch; prefill tokens from the chunk (or
        --max-prefill-tokens with chunking off); ``--page-size`` 1 when left out."""
        chunk, max_bs, _mfs = sglang_defaults(gpu, dep)
        prefill = chunk if chunk > 0 else SGLANG_MAX_PREFILL_TOKENS
        return {"chunked_prefill_size": chunk, "cuda_graph_max_bs": max_bs,
                "max_num_batched_tokens": dep.max_num_batched_tokens or prefill,
                "block_size": dep.block_size or 1}

    def model_settings(self, dep: DeploymentView, gpu: GPU,
                       has_indexer: bool, spec: Any = None) -> dict[str, object]:
        """A DeepSeek NSA model's KV dtype, page size, DP attention (and 0.5.3's
        mem_fraction_static): ``sglang_nsa.nsa_settings``; a multimodal model's chunked
        prefill turned off where the release does (``sglang_vlm.vlm_settings``)."""
        if not has_indexer:
            return vlm_settings(dep, spec, SGLANG_MAX_PREFILL_TOKENS)
        return nsa_settings(dep, gpu, lambda: sglang_defaults(gpu, dep)[2])

    def model_settings_notes(self, dep: DeploymentView, asked: DeploymentView,
                             has_indexer: bool) -> list[str]:
        return nsa_notes(dep, asked) if has_indexer else []

    def sized_block_bytes(self, dep: DeploymentView, layers: tuple[Any, ...]) -> int:
        """``profile_max_num_token``'s cell where it is not the pool's (``sglang_nsa``)."""
        return nsa_cell_block_bytes(dep, layers)

    def pool_tensors(self, dep: DeploymentView,
                     layers: tuple[Any, ...]) -> tuple[tuple[int, int], ...]:
        """Per layer, K and V apart (MHA) or the latent and the indexer's buffer (MLA), each
        one page longer than the pool (``sglang_pool.pool_tensors``)."""
        return pool_tensors(layers)

    def mem_fraction(self, dep: DeploymentView, gpu: GPU,
                     attention: AttentionFacts | None = None, spec: Any = None) -> float:
        """The heuristic's (or the given) mem_fraction_static, times the ROCm aiter factor
        (``rocm_aiter_scale``) and, for a model SGLang treats as multimodal, its reduction
        (``sglang_vlm.vlm_fraction``)."""
        mfs = vlm_fraction(sglang_defaults(gpu, dep, prefill_graph_model(spec))[2],
                           given=bool(dep.mem_fraction_static),
                           version=dep.engine_version, spec=spec)
        return mfs * rocm_aiter_scale(dep, gpu, attention)

    # --- the model dtype: sglang_dtype.py ----------------------------------------------------

    def served_dtype(self, dep: DeploymentView, family: str, checkpoint: str, asked: str,
                     arch: str) -> str | None:
        version = dep.engine_version or newest(self.name)
        return sglang_served_dtype(family, checkpoint, asked, version, arch)

    def check_card(self, dep: DeploymentView, arch: str, gpu_name: str) -> None:
        check_sglang_card(dep.engine_version or newest(self.name), arch, gpu_name)

    def dtype_notes(self, dep: DeploymentView, family: str, checkpoint: str, asked: str,
                    arch: str) -> list[str] | None:
        version = dep.engine_version or newest(self.name)
        return list(sglang_dtype_notes(family, checkpoint, asked, version, arch))

    # --- a vision-language model: sglang_vlm.py ----------------------------------------------

    def models_vision(self, dep: DeploymentView, spec: Any) -> bool:
        return check_vision(dep, spec)

    def vision_tower(self, dep: DeploymentView, spec: Any) -> Any:
        return sglang_tower(dep, spec)

    def vision_notes(self, dep: DeploymentView, spec: Any) -> list[str]:
        return vlm_notes(dep, spec)

    # --- budget line --------------------------------------------------------------------------

    def budget(self, dep: DeploymentView, gpu: GPU, *, requested: int, budgeted: int,
               baseline: int, loaded: int, mfs: float) -> Budget:
        """KV = free after loading − (1 − mfs) × free before loading (SGL@d315eb7
        kv_cache_configurator.py)."""
        pre_free = gpu.total_bytes - baseline
        return Budget(int(mfs * pre_free) - loaded, int(mfs * pre_free))

    def load_figure(self, dep: DeploymentView, loaded: int, first_kernel: int) -> int:
        """The drop in free memory across the load, which the pool is sized after and "Load
        weight end. … mem usage" prints: ``load_drop`` (its components and release rows)."""
        return load_drop(loaded, first_kernel)

    def first_kernel_before_load(self, dep: DeploymentView) -> str | None:
        """What runs the first kernel before the load at a rank with no communicator, where the
        release does (``SGLANG_FIRST_KERNEL_BEFORE_LOAD``)."""
        if not first_kernel_before_load(dep.engine_version):
            return None
        rule = rule_in_force(SGLANG_FIRST_KERNEL_BEFORE_LOAD, dep.engine_version, self.name)
        assert rule is not None
        what = ("the expert-location metadata's kernels in ModelRunner.initialize"
                if rule.since == "0.4.7" else
                "GroupCoordinator's active_ranks torch.ones in init_torch_distributed")
        return f"{what} (SGLang {rule.span}, SGLANG_FIRST_KERNEL_BEFORE_LOAD)"

    def blocks(self, available: int, block_bytes: int, block_size: int, layout: str) -> int:
        """Whole pages: ``int(rest) // cell_size // page_size · page_size`` tokens
        (``ModelRunner.init_memory_pool``, sglang 0.4.3 to SGL@d315eb7) is ``rest // (page_size ·
        cell_size)`` pages, ``block_bytes`` being one page of ``block_size`` tokens."""
        return available // block_bytes if available > 0 else 0

    def capped_blocks(self, dep: DeploymentView, blocks: int, block_size: int,
                      layout: str) -> int:
        """``--max-total-tokens`` caps the pool (``ModelRunner.init_memory_pool``, sglang 0.4.3
        to SGL@d315eb7: ``max_total_num_tokens = min(max_total_num_tokens, max_total_tokens)``,
        a larger cap only warned about). The pool of a uniform layout counts tokens in pages of
        ``block_size``; a hybrid pool's cap is not modelled (left as sized)."""
        cap = dep.max_total_tokens
        if cap is None or layout != "uniform":
            return blocks
        return min(blocks, cap // max(1, block_size))

    def used(self, comps: Sequence[C], base: int, envelope: int) -> tuple[int, list[C]]:
        """Activations, graphs and non-torch memory live in the (1 − mfs) slack: every
        component not loaded at start and not the KV cache counts against it."""
        outside = [c for c in comps if c.where in ("budget", "runtime") and c.bytes > 0
                   and not loaded_at_start(c) and c.category != "kv_cache"]
        inside = sum(c.bytes for c in comps if loaded_at_start(c) or c.category == "kv_cache")
        return base + max(envelope, inside) + sum(c.bytes for c in outside), outside

    def held_before_kv(self, c: ComponentView) -> bool:
        return loaded_at_start(c)

    def request_table(self, dep: DeploymentView, gpu: GPU,
                      pool_tokens: int) -> tuple[int, str] | None:
        """``ReqToTokenPool.req_to_token`` (``sglang_req_pool.req_to_token_table``); a
        ``max_num_seqs`` equal to the stand-in ``batch_defaults`` fills in is read as
        ``--max-running-requests`` not given."""
        stand_in = self.batch_defaults(gpu, None, dep.entrypoint, dep.max_model_len or 0)[1]
        given = None if dep.max_num_seqs in (None, stand_in) else dep.max_num_seqs
        table = req_to_token_table(dep, pool_tokens, given, stand_in)
        return table.bytes, table.formula

    def decode_graph_sizes(self, dep: DeploymentView, gpu: GPU) -> list[int] | None:
        """``CudaGraphRunner``'s decode batch sizes at the release (``sglang_graphs``), cut at
        the resolved ``--cuda-graph-max-bs`` and at ``--max-running-requests`` where given (a
        ``max_num_seqs`` equal to the stand-in ``batch_defaults`` fills in is not given)."""
        mib, _ = heuristic_gpu_mem_mib(gpu)
        max_bs = dep.cuda_graph_max_bs or sglang_defaults(gpu, dep)[1]
        stand_in = self.batch_defaults(gpu, None, dep.entrypoint, dep.max_model_len or 0)[1]
        given = None if dep.max_num_seqs in (None, stand_in) else dep.max_num_seqs
        return decode_capture_sizes(dep, gpu, mib, max_bs, given)

    def graph_kept_logits(self, dep: DeploymentView, sizes: list[int],
                          vocab: int) -> tuple[tuple[int, ...], int, str] | None:
        """The fp32 logits each release's decode capture keeps (``sglang_graphs.kept_logits``)."""
        return kept_logits(dep, sizes, vocab)

    def graph_stage_outputs(self, dep: DeploymentView, sizes: list[int], hidden: int,
                            act_bytes: int) -> tuple[tuple[tuple[int, ...], ...], str] | None:
        """A stage before the last keeps each graph's hidden states and residual
        (``sglang_graphs.stage_outputs_kept``)."""
        return stage_outputs_kept(sizes, hidden, act_bytes)

    def graph_input_buffers(self, dep: DeploymentView, max_bs: int, hidden: int,
                            model_dtype: str) -> tuple[tuple[int, ...], str]:
        """``CudaGraphRunner``'s input buffers (``sglang_graph_inputs``): the large ones."""
        bufs = graph_input_buffers(dep.engine_version, max_bs, hidden, model_dtype, dep.pp)
        return large_input_bytes(bufs), inputs_words(bufs)

    def graph_lm_head_stages(self, dep: DeploymentView, vocab: int, hidden: int, bs: int,
                             act_bytes: int) -> tuple[tuple[tuple[int, ...], ...], str]:
        """The logits processor inside the decode capture (``sglang_graphs.lm_head_stages``)."""
        return lm_head_stages(dep, vocab, hidden, bs, act_bytes)

    def graph_after_earlier_capture(self, dep: DeploymentView, gpu: GPU,
                                    spec: Any) -> tuple[bool, bool, str] | None:
        """From 0.5.14, after the prefill CUDA graphs where they are on
        (``sglang_graphs.after_prefill``, ``prefill_graph_reserve_mib``)."""
        after, shared, stream = after_prefill(dep.engine_version)
        chunk = sglang_defaults(gpu, dep)[0]
        if not after or prefill_graph_reserve_mib(dep, gpu, chunk,
                                                  prefill_graph_model(spec)) <= 0:
            return None
        if not stream:  # a stream of its own (0.5.14 - 0.5.18: GroupCoordinator.graph_capture
            # makes one per runner), whose allocations cannot take the prefill's freed blocks
            return shared, stream, (
                "captured after the prefill CUDA graphs into the same graph pool, on a capture "
                "stream of its own (graph_capture() makes one per runner), so the prefill "
                "captures' freed blocks, on theirs, hold none of the decode live sets"
                + ("; the shared fp32 logits buffer allocated by the prefill runner"
                   if shared else ""))
        return shared, stream, (
            "captured after the prefill CUDA graphs into the same graph pool, whose freed blocks "
            "hold the decode live sets [approximation]"
            + (", and the shared fp32 logits buffer allocated by the prefill runner"
               if shared else "")
            + ", on the capture stream the prefill runner used")

    def stream_pool_before_graphs(self, dep: DeploymentView, gpu: GPU,
                                  spec: Any) -> tuple[str, bool] | None:
        """The KV pool's ``alt_stream`` (0.4.4 – 0.5.8, after the load) or the model runner's
        ``forward_stream`` (0.5.9 on, before the load): ``sglang_streams.stream_pool_maker``."""
        return stream_pool_maker(dep, gpu, spec)

    def prefill_graph_tokens(self, dep: DeploymentView, gpu: GPU,
                             spec: Any) -> list[int] | None:
        """Where the prefill graphs are on (``prefill_graph_reserve_mib``): the grid of
        ``prefill_graph_sizes`` up to piecewise_cuda_graph_max_tokens (0.5.10 server_args.py:
        the chunk, 2048 for MLA, capped by --max-total-tokens; 4096 for a 'llama-2' path)."""
        chunk = sglang_defaults(gpu, dep)[0]
        model = prefill_graph_model(spec)
        if model is None or prefill_graph_reserve_mib(dep, gpu, chunk, model) <= 0:
            return None
        top = 2048 if model.mla else chunk
        if dep.max_total_tokens is not None:
            top = min(top, dep.max_total_tokens)
        if model.capped_4096:
            top = min(top, 4096)
        return prefill_graph_token_sizes(top) or None

    def prefill_graph_logits(self, dep: DeploymentView) -> bool:
        """From 0.5.16 (``sglang_graphs.after_prefill``: GraphSharedOutput)."""
        return after_prefill(dep.engine_version)[1]

    def graph_capture_state(self, dep: DeploymentView, gpu: GPU, spec: Any,
                            sizes: list[int]) -> tuple[int, str] | None:
        """The attention backend's capture state (``sglang_attention.capture_state``)."""
        return capture_state(dep, gpu, spec, sizes)

    def graph_capture_reserved(self, dep: DeploymentView, gpu: GPU, spec: Any, sizes: list[int],
                               after_state: tuple[int, ...],
                               capture_first: tuple[int, ...]) -> int | None:
        """``sglang_attention.capture_buffers`` on their two streams (``reserved_on_streams``):
        init_cuda_graph_state's buffers, then the runner's input buffers and the logits buffer
        (``after_state``), on the runner's stream; FlashInfer's per-size decode wrappers and the
        warm-up's cuBLAS workspace on the capture stream."""
        current, per_size, _ = capture_buffers(dep, gpu, spec, sizes)
        return reserved_on_streams((*current, *after_state), per_size, len(sizes),
                                   capture_first)

    # --- flags and notes ----------------------------------------------------------------------

    def scratch_keys(self, dep: DeploymentView) -> tuple[str, ...]:
        return (DP_ATTENTION_SCRATCH,) if dep.enable_dp_attention else ()

    def check_layout(self, dep: DeploymentView) -> None:
        check_backend(dep.attention_backend)  # SGLang's own names (sglang_attention)
        if dep.enable_dp_attention and dep.tp % dep.dp:
            raise LayoutError(f"SGLang DP attention needs --dp ({dep.dp}) to divide --tp "
                              f"({dep.tp})", hint="e.g. --tp 8 --dp 8 --enable-dp-attention")

    def check_architecture(self, release: str, architecture: str, model: str) -> None:
        """The release's model registry (``memprof.core.engines.sglang_registry``)."""
        check_registered(release, architecture, model)

    def derived_max_model_len(self, cfg: dict[str, Any]) -> tuple[int, str] | None:
        return first_length_key_max_len(cfg)

    def launches(self, module: str) -> bool:
        return module in ("sglang.launch_server", "sglang.srt.server")

    def serve_command(self, model: str, *, tp: int, pp: int, dp: int, ep: bool,
                      max_model_len: int | None, max_num_seqs: int) -> list[str]:
        """``python -m sglang.launch_server``: ``--ep-size`` spans the TP ranks (``dp`` is not
        a replica count here, so it is not written)."""
        parts = [f"python -m sglang.launch_server --model-path {model} --tp {tp}"]
        parts += [f"--pp-size {pp}"] if pp > 1 else []
        parts += ["--ep-size", str(tp)] if ep else []
        return [*parts, f"--context-length {max_model_len}",
                f"--max-running-requests {max_num_seqs}"]

    def notes(self, dep: DeploymentView, mfs: float, gpu: GPU | None = None) -> list[str]:
        out = [f"SGLang: mem_fraction_static {mfs} "
               f"({'given' if dep.mem_fraction_static else 'SGLang heuristic'}), "
               "weights sharded as vLLM shards them"]
        assumed = None if gpu is None else heuristic_gpu_mem_mib(gpu)[1]
        uma = [] if gpu is None else sglang_unified_memory_notes(dep.engine_version, gpu)
        return out + ([assumed] if assumed else []) + uma

    def runner_notes(self, dep: DeploymentView, *, architecture: str, moe: bool,
                     hybrid: bool, quantised: bool = False, vocab: int = 0,
                     logits_itemsize: int = 2, runner_listed: Sequence[Any] = ()) -> list[str]:
        """A MoE model on a rank with no NCCL communicator at a release where only a class with
        an expert layout runs the first kernel before the load
        (``SGLANG_FIRST_KERNEL_EXPERT_LAYOUT``): what memprof assumed."""
        rule = value_at(SGLANG_FIRST_KERNEL_BEFORE_LOAD, dep.engine_version, False,
                        engine=self.name)
        if not moe or rule != SGLANG_FIRST_KERNEL_EXPERT_LAYOUT or self.nccl_groups(dep):
            return []
        return [f"SGLang {dep.engine_version}, no NCCL communicator: a MoE model whose SGLang "
                "class declares an expert layout (get_model_config_for_expert_location) runs "
                "the expert-location metadata's kernels, and so the process's first kernel "
                "(the card's first-kernel step, 92 MiB on an H100), before the load; memprof "
                "keeps that kernel in the load for every model here [assumption: it does not "
                "know which classes declare one] (SGLANG_FIRST_KERNEL_BEFORE_LOAD)"]

    def release_notes(self, dep: DeploymentView, arch: str | None,
                      quant_method: str | None = None) -> list[str]:
        """On ROCm from 0.4.7: the aiter factor on mem_fraction_static (``rocm_aiter_scale``)."""
        factor = value_at(SGLANG_ROCM_AITER_MFS, dep.engine_version, 1.0, engine=SGLang.name)
        if arch is None or not arch.startswith("gfx") or factor == 1.0:
            return []
        return [f"SGLang on ROCm: mem_fraction_static times {factor} with the aiter attention "
                "backend (the default for MHA/GQA models, and for MLA at 16 or 128 KV heads per "
                "TP rank) when the context is longer than 8,192 tokens"]


ENGINE = SGLang()

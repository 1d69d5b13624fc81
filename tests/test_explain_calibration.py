"""``memprof explain LOG`` on every calibration quote of ``tests/data/published.json``, with no
flag but ``--model`` (and ``--gpu`` where the quote shows neither a GPU total nor nvidia-smi lines
naming the card): issue 26's acceptance.

For each row that ``tests/test_published_distribution.py`` runs, the row's ``quote`` is written
to a file and explained. Explain must rebuild at the row's ``memprof_engine_version``, on the
GPU total and to the verdict of the estimate that test makes from the row's fields, and its
estimate of each figure that test compares (weights, the KV figure, the graph figure) must be
that estimate's, to the byte / token (``memprof.core.explain.ESTIMATED`` applied to it). So
explain reads from the log everything the row's fields supply.

A row whose field comes from outside the quote (the thread's prose, the date of the report, a
deduction in ``memprof_run.why``) and is not ``--model`` / ``--gpu`` cannot be rebuilt from its
log: it is ``xfail(strict=True)`` with the field that is missing, so a probe that learns to read
it turns the row green and the mark must go. Test ids are ``<era>/row<id>``: ``-k 'vllm-0.8/'``
runs one era.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.estimate import Estimate
from memprof.core.explain import ESTIMATED, logged_rank
from memprof.core.gpus import find_gpu
from memprof.core.versions import split_generation, version_key
from memprof.probes.log_deployment import (
    card_named_by_moe_lookup,
    card_named_in_log,
    log_gpu,
    shows_card,
)
from memprof.probes.startup_log import parse_log


def _load(name: str) -> ModuleType:
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_calib_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


PUB = _load("test_published_distribution")  # the row loader and the figures compared
ERAS = _load("test_published_eras")  # vLLM's eras

# distribution figure (or KV key) -> explain's figure key
EXPLAIN_KEY = {"weights": "weights_bytes", "graph": "cudagraph_pool_bytes",
               "kv_tokens": "kv_tokens", "num_gpu_blocks": "num_gpu_blocks",
               "kv_cache_gib": "available_kv_bytes"}

ERA_NAMES = (*("vllm-" + e[0].replace("–", "-") for e in ERAS.ERAS),
             "sglang-0.4", "sglang-0.5", "sglang-later")
OUTSIDE = "not in the log: "
# rows whose quote lacks only the release (or shows one explain reads otherwise): with
# --engine-version (which the acceptance does not allow) they reproduce
# (test_the_release_is_all_they_lack). A log that names no release is placed by its
# [file.py:LINE] tags (memprof/probes/release_lines.py): rows 105, 106, 107 and 302-309 are; and
# by its date among the releases its tags fit, or a development build it names by its date
# (memprof/probes/log_dates.py, configs/vllm_release_dates.json): rows 48, 122, 150, 803, 1101;
# and, where its tags lie between two releases and the older one's model registry lacks the
# model's architecture, at the newer (configs/vllm_architectures.json): row 131.
RELEASE_ONLY = (12, 32, 101, 102, 115, 116, 118, 119, 134, 201, 520, 802, 1202,
                2505)
_DATED = ("the release (the newest one on the thread's date: memprof_engine_version_note; the "
          "quote prints no dated line that memprof/probes/log_dates.py could place)")
# the llm-d benchmark's results page (rows 511-520): its author's summary of pod logs (a markdown
# table and bullets, not log lines), under the image vllm/vllm-openai:latest
_LLMD_RELEASE = ("the release (0.12.0 is deduced from the table's gpt-oss weight figures: "
                 "memprof_engine_version_note)")
_LLMD = (OUTSIDE + _LLMD_RELEASE + " and the deployment (TP and max-model-len are a markdown "
         "table's columns; the quoted args are placeholders, '--tensor-parallel-size=<tp-size>')")
# vLLM 0.6.x logs (rows 101, 102, 161): the untagged one-line "Memory profiling results" report
# only 0.6.4 / 0.6.4.post1 print (configs/vllm_log_lines.json "formats") places them at 0.6.4,
# the base release the patch re-release 0.6.4.post1 re-ships (memprof.probes.log_deployment.
# patch_base); the rows run at 0.6.4.post1, the newest on the comment's date (both on the log's
# total_gpu_memory=23.58GiB: test_published_distribution.printed_total). Row 161 also sets
# --max-model-len 35000 in the comment's prose ("35k - OK"), no line of its log. Rows 115, 116:
# a pull request's branch, whose multi-line budget report ("total_gpu_memory     79.22GiB")
# explain reads (the card, the budget, the KV figure), but no release printed it
_V064 = (_DATED + ": the untagged one-line report is 0.6.4's and 0.6.4.post1's format alike "
         "and explain takes the base release 0.6.4")
_PR10511 = "the release (PR #10511's branch, modelled at 0.6.5, which merged it)"
# rows 907-909: a study's runs on a desktop under WSL2 (its prose names the host, the flags and
# the sampler setting; each quote's one engine line is the KV size)
_WSL_STUDY = ("the WSL2 total, 24,564 MiB (the study's prose; memprof_run.gpu_mem_gib); and "
              "--max-model-len 8192 and VLLM_USE_FLASHINFER_SAMPLER=0, which the study's prose "
              "names (a parenthesis and a sentence, no command or env line explain reads; the "
              "page's one serve code block, Lab 2's plan at --max-model-len 4096, is not this "
              "run's)")
# rows 1713, 1715: a study's per-session JSON records of its B200 starts
_STUDY_RECORD = ("the figures and the checkpoint: the quote is the study's per-session record "
                 "(JSON), whose weights_gib and kv_cache_tokens are the record's fields, no log "
                 "line explain reads (its flags are a JSON list, server_argv); the checkpoint "
                 "is a local NVFP4 quantisation memprof does not bundle, run as the bf16 "
                 "qwen3-32b with --quantization modelopt_fp4 (memprof_run), on RESULTS.md's B200")
# rows 1717, 1718: Tensward reports that quote a serve command and the engine image
_TENSWARD_AWQ = ("the KV figure and the checkpoint's AWQ storage: the quote is a Tensward report, "
                 "whose 'KV cache capacity (measured by the engine)' is the tool's account, no "
                 "engine line explain reads (it reads the report's --current vllm serve command "
                 "and the release 0.30.0 its engine image's tag names); the checkpoint /m/qwen "
                 "is Qwen2.5-7B-Instruct-AWQ, run as the bf16 qwen2.5-7b-instruct with "
                 "--quantization awq_marlin (memprof_run)")
# rows 2536-2540, 2543: three reports' Qwen3-235B-A22B-Instruct-2507-FP8 runs at >= 240k tokens
_KAITAKU_240K = ("the checkpoint's max_position_embeddings (262,144: the reports' prose, "
                 "'262144 native ctx', 'defaults to `max_seq_len=262144`'; "
                 "memprof_run.hf_overrides: the stand-in "
                 "qwen3-235b-a22b-fp8 has 40,960, below the run's --max-model-len 240000), "
                 "which explain reads only from transformers' 'Model config' dump; and the "
                 "card (the reports' Hardware tables, 4x H100 80GB, no log line)")
_KAITAKU_TABLE = ("the figures and the flags: the quote is the report's start-up table "
                  "('Model load to VRAM', 'Available KV cache' as table cells) and its flags as a "
                  "config block or a JSON list, no engine line explain reads; the card is the "
                  "report's header")
# row -> the field the quote does not show (so explain cannot read it)
XFAIL: dict[int, str] = {
    1: OUTSIDE + "the quote is the brief's prose, no log line (kv_cache_dtype, max_num_seqs, "
       "the release: memprof_run)",
    2: OUTSIDE + "the quote is the brief's prose, no log line (kv_cache_dtype, max_num_seqs, "
       "the release: memprof_run)",
    12: OUTSIDE + "the release 0.5.4 (deduced from PR #11309's history; the log's date places "
        "0.5.3)",
    17: OUTSIDE + "--tp 8 and the image's release (the notes): the issue body gives them only "
        "in its steps' prose ('Container `lmsysorg/sglang:deepseek-v4-hopper`', 'Server "
        "launches with `--tp 8 --mem-fraction-static 0.88`', the scripts' command cut with "
        "'…'), no command or log line, and the image was re-pinned later, so its date places "
        "the snapshot",
    32: OUTSIDE + _DATED,
    101: OUTSIDE + _V064,
    102: OUTSIDE + _V064,
    113: OUTSIDE + "the KV figure: the quote is a recipe PR's prose ('KV cache: 497,600 tokens "
         "(2x MI300X)', 'Model loads successfully with TP=2 (109 GB VRAM ...)'), no engine "
         "'GPU KV cache size' line explain reads; and the settings the row runs beside it: "
         "MiniMax-M2's context, max_model_len 196608, and VLLM_ROCM_USE_AITER=1 (memprof_run)",
    115: OUTSIDE + _PR10511 + " (its two worker.py:243 tags match no release's lines)",
    116: OUTSIDE + _PR10511 + " (its worker.py:243 tag lies between 0.6.6.post1's and 0.7.1's "
         "lines: rebuilt at 0.6.6.post1)",
    118: OUTSIDE + _DATED + " (its flags, a list of quoted strings, are read)",
    128: OUTSIDE + "max_num_seqs 8 (the notes; the release, 0.9.2+v0, is placed by the tags): "
         "the PR comment's log goes on to mellea's 'final model parameters:' lines, which the "
         "stored thread cuts at 'gpu_memory_ut', and V0's budget lines print no max_num_seqs",
    134: OUTSIDE + "the release (the post's summary prints none; row 133, the same post and "
         "host a day later, logs 0.19.0: memprof_engine_version_note): the stored post (its "
         "wp-json record) opens this run's log block with the banner's first lines, "
         "'(APIServer pid=10793) INFO 04-17 14:03:07 [utils.py:299]', but the stored text read "
         "stops before the banner's version line",
    153: OUTSIDE + "a figure: the quote is the recipe issue's summary and an args line "
         "('non-default args', no figure line explain reads: 'shows no figure'); the 156.9x "
         "is the summary's ('per startup log'), and neither recipes#762 nor vLLM #51454, the "
         "same author's report, prints the concurrency line (#51454 gives its figures in "
         "prose: 'Startup log: KV cache ... tokens / ...x at 1M')",
    161: OUTSIDE + _V064 + "; and max_model_len 35000 (the comment's prose, '35k - OK')",
    163: OUTSIDE + "a figure: the quote is the serve command, the release line and the issue's "
         "prose (the row records a start: 'it works good'); and the checkpoint's AWQ storage, "
         "run as the bf16 qwen2.5-3b-instruct with --quantization awq_marlin (memprof_run); "
         "the issue's code block holds no more of the log than the platform and release lines",
    201: OUTSIDE + "the release 0.7.2 (dynamo's pin: its patched worker.py logs at 269, no "
         "release's line, so explain takes the newest V0 release, 0.7.3)",
    314: OUTSIDE + "the card's total, 22,693 MiB (memprof_run.gpu_mem_gib: Google Colab's L4 "
         "runtime in 2025, which the repository's files show, not the log; the quote prints no "
         "total and explain takes the catalog's L4): the source vllm.log's start-up prints no "
         "total, no OOM line and no nvidia-smi table",
    316: OUTSIDE + "the checkpoint's compressed-tensors quantization_config (memprof_run."
         "hf_overrides: the bundled config is bf16; the quote's "
         "'[fp8_dynamic] quantization=compressed-tensors' is the post's one-field summary of "
         "the engine's config line, and compressed-tensors is read from a checkpoint config "
         "that declares it)",
    317: OUTSIDE + "quantization gptq (memprof_run: the bundled config is bf16; the quote's "
         "'[gptq_int4] quantization=gptq_marlin' is the post's one-field summary of the "
         "engine's config line, not a line vLLM prints)",
    **{i: _LLMD for i in range(511, 520)},
    802: OUTSIDE + "the release 0.7.1 (lm_eval's --model_args are read; the PR branch's tags "
         "are 0.7.2's lines alone, and its date 02-03 (2025-02-03, before 0.7.2's publication) "
         "makes it a build on the way to 0.7.2, which explain takes; its "
         "VLLM_CUDA_MEM_ALIGN_KV_CACHE=0 run has 0.7.1's unpadded MLA entries: "
         "memprof_engine_version_note)",
    # the start-up failure is the verdict compared, whatever TP and max-model-len
    520: OUTSIDE + _LLMD_RELEASE,
    905: OUTSIDE + "the run's flags and figures: the quote is the post's memory table (the "
         "authors' summary, no log line) and its prose ('same flags otherwise', "
         "--enable-expert-parallel)",
    908: OUTSIDE + "quantization gptq (memprof_run: the bundled config is bf16; the quote names "
         "the checkpoint only in the benchmark script's '==== 모델: …-GPTQ-Int4 ====' line), "
         "and, as row 907, " + _WSL_STUDY,
    909: OUTSIDE + "quantization fp8 (memprof_run: the bundled config is bf16; the quote names "
         "the compressed-tensors FP8-dynamic checkpoint only in the benchmark script's "
         "'==== 모델: … ====' line), and, as row 907, " + _WSL_STUDY,
    906: OUTSIDE + "the run's flags and figures: the quote is the post's memory table (the "
         "authors' summary, no log line) and its prose ('same flags otherwise', "
         "--pipeline-parallel-size 4)",
    1202: OUTSIDE + "the release 0.5.13 (the document's run date, 2026-06-14, on a source "
          "checkout: memprof_engine_version_note; the quote has no timestamp): the document's "
          "log excerpt (its section 5) prints no timestamp or version, and its environment "
          "table names the checkout's commit (ebaf86d4), no release",
    1201: OUTSIDE + "the host's lack of GPU peer access (memprof_run.no_gpu_peer_access: an "
          "EC2 g6 host, memprof_run.why); custom all-reduce stops at its 'more than two "
          "PCIe-only GPUs' test, before the P2P test whose line explain would read",
    # SGLang logs after 0.5.9 (rows 1451-1499)
    1452: OUTSIDE + "the deployment and the pool (the quote is the benchmark page's prose and "
          "table: --mem-fraction-static 0.90 and --context-length 8192 in a sentence, '9.54 GB "
          "for 39,078 tokens' the author's summary of the KV line) and the release (0.5.19: the "
          "page's image tag)",
    1457: OUTSIDE + "the figures: the quote's load (15.50 GB) and pool (187,069 tokens) are cells "
          "of the author's summary table, no log line explain reads; and the release "
          "(0.5.13.post1, the page's section 2); the page quotes a 'KV Cache is allocated' line "
          "only for another start (section 7's, capped at 70,950 tokens)",
    # SGLang logs from repositories and blogs (rows 1501-1549)
    1501: OUTSIDE + "the load and graph figures (weights_gb 3.27, graph_mem_usage_gb 0.10: the "
          "server_info memory_usage the same "
          "commit's results_bf16.json records, beside the page's max_total_num_tokens line) "
          "and the release (the quote has no timestamp, so explain takes the newest, 0.5.23; "
          "the row runs at 0.5.10, the checkout's server_info version)",
    1502: OUTSIDE + "the load and graph figures (weights_gb 3.28, graph_mem_usage_gb 0.13: the "
          "server_info memory_usage the same "
          "commit's results_bf16.json records, beside the page's max_total_num_tokens line)",
    # SGLang docs builds (rows 1851-1899)
    1859: OUTSIDE + "the KV figure: the author's memory table (93,591 tokens, K/V 6.43 GB "
          "each), no log line explain reads; PROGRESS.md prints no 'KV Cache is allocated' "
          "line of the BF16 start",
    119: OUTSIDE + _DATED + ": the quote (an OOM line and the command) carries no release or "
         "[file.py:LINE] tag, so explain takes the newest release, 0.5.23; the row runs at "
         "0.4.5",
    1605: OUTSIDE + "the release and the flags: the quote is the README's prose around two log "
          "figures; 0.30.0 is the README's re-verification note, --max-model-len 8192 and "
          "--gpu-memory-utilization 0.90 are scripts/serve.sh's defaults (the notes)",
    1606: OUTSIDE + "the deployment's flags and entrypoint: the quote is the smoke document's "
          "summary table (its heading names max_model_len, the utilization and eager mode "
          "in prose); the LLM class and its arguments are serving/v025_smoke/smoke_one.py's "
          "(the notes)",
    1601: OUTSIDE + "the checkpoint's max_position_embeddings (262,144, run 2's container "
          "log, row 1602's; memprof_run.hf_overrides: the stand-in qwen3-4b has 40,960), which "
          "sizes the RoPE cache: this run's vllm-startup-success.log, a plain vllm serve, prints "
          "no transformers 'Model config' dump explain would read it from",
    904: OUTSIDE + "the checkpoint's max_position_embeddings (262,144: the post's prose, 'this "
         "model supports a 262,144-token context'; its two config.json excerpts, the "
         "quantization_config and Step 3's shape block, print no max_position_embeddings), "
         "which sizes the RoPE cache (memprof_run.hf_overrides); explain reads it only from "
         "transformers' 'Model config' dump",
    907: OUTSIDE + _WSL_STUDY,
    # a project's results pages (Burbanit0/Vote-App): its author's account of the boots, no log
    # line; the flags are its compose file's, the card its notes' (the rows' notes)
    1701: OUTSIDE + "the KV figure: the quote is a results page's table cell ('KV cache 3.67 "
          "GiB (26,704 tokens, 1.63x concurrency at 16,384)'), not the engine's 'Available KV "
          "cache memory' / 'GPU KV cache size' lines explain reads; and the row's settings, "
          "--max-model-len 16384, --gpu-memory-utilization 0.8 and awq_marlin (the project's "
          "compose file, the notes), with the card (memprof_run)",
    1707: OUTSIDE + "the KV figure: the quote is a results page's prose ('one cold start "
          "reserved 5.93 GiB for KV cache'), no engine 'Available KV cache memory' line explain "
          "reads; and the run's --max-model-len 24576 (the prose's '8192 → 24576'), which the "
          "quote gives, with awq_marlin and the RTX 5070 Ti, only in prose (memprof_run)",
    1708: OUTSIDE + "the KV figure and the failure: the quote is a results page's prose ('a plain "
          "`docker compose restart` later reserved 8.02 GiB ... leaving 37 MiB free', "
          "'torch.OutOfMemoryError' in a sentence), no engine line explain reads; and the run's "
          "settings, as row 1707's, with the restart's warm compile cache (memprof_run)",
    1801: OUTSIDE + "the figures: the quote is an issue's environment list and a comment's "
          "markdown table ('unpatched warm (reference) | 5,315 | 10.38'), no engine '# GPU "
          "blocks' / 'Available KV cache memory' line explain reads; and the shape flags the "
          "comment gives in prose ('mbt 5120, mns 72', 'util 0.85': memprof_run, the notes)",
    1709: OUTSIDE + "the checkpoint's NVFP4 storage: the log's quantization=compressed-tensors "
          "names a local checkpoint memprof does not bundle, which the row runs as the bf16 "
          "qwen3-32b with --quantization modelopt_fp4 (memprof_run); and --max-num-seqs 512 "
          "(the study's server arguments, not in the log)",
    # the offline LLM class (the report's scripts, the notes): max_num_batched_tokens 8192,
    # where explain takes vllm serve's 2048; 0.28.0's budget charges the runner's
    # inputs_embeds [N, H] (terms/runner_buffers.py), so the entrypoint moves the KV figure.
    # Row 1704 reproduces from the 'Chunked prefill is enabled with max_num_batched_tokens=8192'
    # line the report's section 5.1 quotes from its log
    1705: OUTSIDE + "the release 0.28.0 (the study report's environment section; the quoted "
          "table rows print no engine or dated line) and the offline LLM(...) entrypoint "
          "(max_num_batched_tokens 8192; explain takes vllm serve's 2048): section 5.2's table "
          "quotes no engine, 'Chunked prefill' or 'Using max model len' line of the 27B log "
          "(section 5.1's are the 0.8B run's, row 1704)",
    1706: OUTSIDE + "the quote is the study report's prose around the server log (its figures "
          "in a summary, no log line explain reads); the flags are the report's non-default "
          "args (the notes)",
    1726: OUTSIDE + "the quote is a case study's report (the engine's KV capacity in prose, no "
          "log line explain reads): the flags are the case's config.json (the notes)",
    1736: OUTSIDE + "--gpu-memory-utilization 0.8 (the project's phase-1 server settings, "
          "the notes): the three quoted lines print no budget, and explain takes 0.30.0's "
          "default 0.92 (vLLM PR #38284); the source test file has 0.8 only in an assertion on "
          "the harness's argument list (test_server_command), no command or log line",
    1713: OUTSIDE + _STUDY_RECORD,
    1715: OUTSIDE + _STUDY_RECORD,
    # Tensward's case-study reports (Tensward/tensward examples/case-studies): the tool's
    # account of each run ("KV cache capacity (measured by the engine)"), no log line
    1717: OUTSIDE + _TENSWARD_AWQ,
    1718: OUTSIDE + _TENSWARD_AWQ + "; and --kv-cache-dtype fp8 (Tensward's '--engine-arg "
          "kv-cache-dtype=fp8' and settings line, not the engine's)",
    1721: OUTSIDE + "the quote is a Tensward report (no log line explain reads): the flags "
          "(its settings and config.json), the card and the checkpoint's stand-in (memprof_run)",
    1722: OUTSIDE + "the quote is a Tensward report (no log line explain reads): the flags "
          "(its settings and config.json), the card and the checkpoint's stand-in (memprof_run)",
    1723: OUTSIDE + "the quote is a Tensward case-study summary (no log line explain reads): "
          "the flags (row 1722's config.json with n-gram speculation), the card and the "
          "checkpoint's stand-in (memprof_run)",
    1724: OUTSIDE + "the quote is a Tensward report (no log line explain reads): the flags "
          "(its settings and config.json), the card and the checkpoint's stand-in (memprof_run)",
    1725: OUTSIDE + "the quote is a Tensward report (no log line explain reads): the flags "
          "(its settings and config.json), the card and the checkpoint's stand-in (memprof_run)",
    2505: OUTSIDE + "the release 0.9.2 (the banner prints 0.9.0.1; the log's tags are "
          "0.9.2's, gpu_worker.py:232's 'Available KV cache memory' among them: a downstream "
          "build, memprof_engine_version_note)",
    2506: OUTSIDE + "the release 0.9.2 (the quote's pod log prints none; the same "
          "InferenceService's log on the repository's bring-your-own-model.md, row 2505, prints "
          "'vLLM API server version 0.9.0.1' with 0.9.2's tags, as this quote's gpu_worker.py:232, "
          "kv_cache_utils.py:716/720 and cli_args.py:325 are: memprof_engine_version_note) and "
          "the FlashInfer sampler (row 2505's log line, inferred for the same service: "
          "memprof_run)",
    # rows 2536-2537: a report's 0.20.0 runs of Qwen3-235B-A22B-Instruct-2507-FP8 at 240k
    2536: OUTSIDE + _KAITAKU_240K,
    2537: OUTSIDE + _KAITAKU_240K,
    2539: OUTSIDE + _KAITAKU_240K,
    2540: OUTSIDE + _KAITAKU_240K,
    2543: OUTSIDE + _KAITAKU_240K,
    # rows 2544-2548: an operator's MiniMax-M2.7 fit tables (the report's summary, no log line)
    2544: OUTSIDE + _KAITAKU_TABLE,
    2545: OUTSIDE + _KAITAKU_TABLE,
    2546: OUTSIDE + _KAITAKU_TABLE,
    2547: OUTSIDE + _KAITAKU_TABLE,
    2548: OUTSIDE + _KAITAKU_TABLE,
}


def era(row: dict[str, Any]) -> str:
    """``vllm-0.6``, ``vllm-0.7``, ``vllm-0.8``, ``vllm-0.9-0.10``, ``vllm-0.11-0.14``,
    ``vllm-0.15-0.20``, ``vllm-0.21+``; ``sglang-0.4``, ``sglang-0.5``, ``sglang-later``.

    An SGLang row's era is the number of the release memprof runs it at (``memprof/core/
    releases.py``): 0.4.x is ``sglang-0.4``, 0.5.x (0.5.1 to 0.5.19) ``sglang-0.5``; a later
    release (0.6 and up) and a source snapshot (``main@d315eb7``, the ``deepseek-v4-hopper``
    image) are ``sglang-later``.

    A row memprof runs at no release (refused: its log states none) has no era, for either
    engine: ``ValueError``. Such an SGLang row is not a build after 0.5.23; before, its missing
    release fell through to the snapshot branch and counted it as ``sglang-later``."""
    run_ = {**row, **(row.get("memprof_run") or {})}
    if run_.get("memprof_engine_version") is None:
        raise ValueError(f"row {row['id']}: memprof runs it at no release, so it has no era")
    version = str(run_["memprof_engine_version"])
    if run_.get("engine", "vllm") == "vllm":
        name = ERAS.era_of(version)
        assert name is not None, (row["id"], version)
        return "vllm-" + name.replace("–", "-")  # ASCII test ids: -k 'vllm-0.9-0.10/'

    try:
        key = version_key(split_generation(version)[0])
    except ValueError:  # a source snapshot, no release number
        return "sglang-later"
    assert key >= (0, 4), (row["id"], version)  # memprof models SGLang from 0.4.3
    return f"sglang-0.{key[1]}" if key[:2] in ((0, 4), (0, 5)) else "sglang-later"


def _runnable() -> list[dict[str, Any]]:
    return [r for r in PUB.ROWS if PUB.outcome(r).refused is None]


ROWS = _runnable()


def _params() -> list[Any]:
    out = []
    for r in sorted(ROWS, key=lambda r: (era(r), r["id"])):
        marks = ([pytest.mark.xfail(strict=True, reason=XFAIL[r["id"]])]
                 if r["id"] in XFAIL else [])
        out.append(pytest.param(r, id=f"{era(r)}/row{r['id']}", marks=marks))
    return out


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def _distribution_estimate(row: dict[str, Any]) -> Estimate:
    """The estimate ``test_published_distribution.outcome`` makes of the row (with the memory
    in use the row's logged free memory before load shows: ``row_estimate``)."""
    return PUB.row_estimate(row)[0]


def explain_argv(row: dict[str, Any], log: Path) -> list[str]:
    """``explain LOG -m MODEL [--gpu GPU] -f json``: ``--gpu`` only where the quote does not
    show the card: its nvidia-smi lines and kernel-config lookups name none (``memprof.probes.
    log_deployment.card_named_in_log``, ``card_named_by_moe_lookup``) and it prints no GPU total
    (explain then asks for it), or a total that is no catalog card's (``memprof.probes.
    log_deployment.shows_card``: explain would assume the nearest card) where the row names the
    card; explain then runs that card at the printed total, as the row does
    (``test_published_distribution.printed_total``)."""
    model, _, gpu, _ = PUB._run_args(row)
    argv = ["explain", str(log), "-m", model, "-f", "json"]
    try:
        log_ = parse_log(row["quote"])
    except BadInput:  # nothing explain reads: it says so itself
        log_ = None
    named = None if log_ is None else (card_named_in_log(log_, [])
                                        or card_named_by_moe_lookup(log_, []))
    if named is not None and gpu is not None and find_gpu(gpu).name == named.name:
        # the quote's nvidia-smi lines (memprof/probes/gpu_names.py) or the engines' kernel-config
        # lookup (memprof/probes/moe_config_device.py) name the card
        return argv
    if log_ is None or log_gpu(log_) is None:
        assert gpu is not None, row["id"]
        argv += ["--gpu", gpu]
    elif not shows_card(log_) and gpu is not None:
        argv += ["--gpu", gpu]
    return argv


@pytest.mark.parametrize("row", _params())
def test_explain_reproduces_the_row(row: dict[str, Any], tmp_path: Path) -> None:
    check(row, tmp_path, [])


@pytest.mark.parametrize("row", [r for r in ROWS if r["id"] in RELEASE_ONLY],
                         ids=lambda r: f"row{r['id']}")
def test_the_release_is_all_they_lack(row: dict[str, Any], tmp_path: Path) -> None:
    """The rows marked for their release alone reproduce once it is given."""
    assert row["id"] in XFAIL
    release = _distribution_estimate(row).deployment.engine_version
    check(row, tmp_path, ["--engine-version", release])


def check(row: dict[str, Any], tmp_path: Path, extra: list[str]) -> None:
    """Explain the row's quote (with ``extra`` flags) and compare it with the row's estimate."""
    log = tmp_path / f"row{row['id']}.log"
    log.write_text(row["quote"], encoding="utf-8")
    code, out, err = invoke([*explain_argv(row, log), *extra])
    assert code in (0, 1), err
    doc = json.loads(out)
    want = _distribution_estimate(row)
    assert doc["deployment"]["engine_version"] == want.deployment.engine_version
    assert doc["deployment"]["gpu_total_bytes"] == want.gpu.total_bytes
    figures = {f["key"]: f for f in doc["figures"]}
    measured = {k: float(f["measured"]) for k, f in figures.items()}
    rank = logged_rank(measured, want)
    compared = PUB.outcome(row).pairs
    for figure, (key, _logged, _memprof) in compared.items():
        ek = EXPLAIN_KEY.get(figure) or EXPLAIN_KEY[key]
        if ek == "kv_tokens" and ek not in figures:  # SGLang before "#tokens" was logged
            ek = "max_total_num_tokens"
        assert ek in figures, f"explain did not read the log's {ek}"
        assert figures[ek]["estimated"] == float(ESTIMATED[ek](want, rank)), (figure, ek)
    assert doc["verdict"] == want.verdict


def test_the_kernel_config_lookups_name_each_quotes_card() -> None:
    """Every runnable quote whose fused-MoE or W8A8 block-FP8 config lookup (vLLM's or SGLang's,
    ``memprof/probes/moe_config_device.py``) names a device names the row's card, so explain
    runs it without ``--gpu``; SGLang's lookups and the GEMM's are among them."""
    named: dict[int, tuple[str, bool]] = {}
    for row in ROWS:
        if "device_name=" not in row["quote"]:
            continue
        log_ = parse_log(row["quote"])
        looked = card_named_by_moe_lookup(log_, [])
        if looked is None:
            continue
        _model, _, gpu, _ = PUB._run_args(row)
        assert gpu is not None and find_gpu(gpu).name == looked.name, row["id"]
        named[row["id"]] = (str(log_.engine), not log_.moe_devices)
    assert any(engine == "sglang" for engine, _ in named.values()), named
    assert any(gemm_only for _, gemm_only in named.values()), named


def test_every_era_has_a_row() -> None:
    """Each era of issue 26 holds at least one runnable row; ``-s`` prints how many reproduce."""
    by: dict[str, list[int]] = {}
    for r in ROWS:
        by.setdefault(era(r), []).append(r["id"])
    lines = []
    for name in ERA_NAMES:
        ids = by.get(name, [])
        ok = [i for i in ids if i not in XFAIL]
        lines.append(f"{name:<16} {len(ok):>2} of {len(ids):>2} reproduce")
    print("\n" + "\n".join(lines))
    assert set(ERA_NAMES) == set(by)
    assert set(XFAIL) <= {r["id"] for r in ROWS}
    assert set(RELEASE_ONLY) <= set(XFAIL)

"""A vLLM (V0 or V1) or SGLang start-up log → the figures it printed, the settings and version it
shows, and the error that stopped it.

Every figure is kept with the text it was read from, so ``memprof explain`` can show it as logged.
Units: vLLM V1 prints GiB; V0's "Loading model weights took X GB" is bytes / 2**30; SGLang's
"GB" is bytes / 2**30 too (``tests/data/published.json``, ``_about``). A line that matches nothing
is skipped; a log in which nothing matches is an error.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memprof.base.errors import BadInput
from memprof.base.files import read_capped
from memprof.base.units import GiB, MiB, fmt_bytes
from memprof.core.engines import DEFAULT, ENGINES
from memprof.core.flags import BY_FIELD
from memprof.core.speculative import speculative_settings
from memprof.probes.checkpoint_config import logged_positions
from memprof.probes.gpu_names import named_cards
from memprof.probes.log_dates import LogDate, read_date
from memprof.probes.moe_config_device import gemm_lookup_devices, moe_lookup_devices
from memprof.probes.release_lines import formats, tags
from memprof.probes.unsloth_loader import unsloth_settings

MAX_LOG_BYTES = 64 << 20
MAX_LINE = 100_000  # characters of one line read (a longer one is cut)

# The largest figure a start-up log can plausibly print, by kind: no GPU or node has a PiB of
# memory, no KV cache holds 2^40 tokens or blocks, and no ratio (utilisation, concurrency) is
# near 10^9. A larger number (or one a float cannot hold, 1e400) is a damaged log, not a figure.
MAX_FIGURE: dict[str, float] = {"gib": float(1 << 50), "mib": float(1 << 50), "int": float(1 << 40),
                                "float": 1e9}
MAX_DIGITS = 40  # characters of one number (the engines print at most ~20)

Kind = Literal["gib", "mib", "int", "float"]

_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
_GIB = _NUM + r"\s*(?:GiB|GB|G)\b"
_MIB = _NUM + r"\s*(?:MiB|MB)\b"  # torch's OOM message prints figures under 1 GiB in MiB


# NVML's "not available" value, (unsigned long long)-1 (nvml.h NVML_VALUE_NOT_AVAILABLE): the
# usedGpuMemory torch's OOM message prints for a process where NVML keeps no per-process figure
# ("Under WDDM, NVML_VALUE_NOT_AVAILABLE is always reported because Windows KMD manages all the
# memory": NVML's nvmlProcessInfo_t; so under WSL 2 too). torch formats it as any size
# (c10/cuda/CUDACachingAllocator.cpp reportProcessMemoryInfo, format_size): "this process has
# 17179869184.00 GiB memory in use", no figure of the process's memory
NVML_VALUE_NOT_AVAILABLE = (1 << 64) - 1
NVML_FIGURES = frozenset({"oom_process_bytes"})  # the keys whose figure NVML supplies


@dataclass(frozen=True, slots=True)
class Pattern:
    key: str
    engine: str  # vllm | sglang | any
    regex: re.Pattern[str]
    kind: Kind
    group: int = 1
    sign: bool = False  # the figure may be negative ("-" before the number)


def _p(key: str, engine: str, regex: str, kind: Kind, group: int = 1,
       sign: bool = False) -> Pattern:
    return Pattern(key, engine, re.compile(regex, re.I), kind, group, sign)


# (figure, engine, pattern, kind): the first match of a key in the log wins, except where a
# later line of the same key is a re-run (SGLang prints "KV Cache is allocated" per rank: equal).
PATTERNS: tuple[Pattern, ...] = (
    # --- vLLM: model load
    _p("weights_bytes", "vllm", r"Loading model weights took\s+" + _GIB, "gib"),
    _p("weights_bytes", "vllm", r"Model loading took\s+" + _GIB, "gib"),
    _p("weights_bytes", "vllm", r"model weights (?:only )?tooks?\s+" + _GIB, "gib"),
    # V0 worker.py determine_num_available_blocks budget line (0.7.x; 0.8.0 – 0.10.2 under V0):
    # "model weights take 14.99GiB; non_torch_memory takes ..."
    _p("weights_bytes", "vllm", r"model weights take\s+" + _GIB, "gib"),
    _p("weights_bytes", "vllm", r"weights memory:\s*" + _GIB, "gib"),
    # --- vLLM V1 profile
    _p("non_torch_bytes", "vllm", r"non[-_ ]torch[_ ]memory(?: takes)?[=: ]\s*" + _GIB, "gib"),
    _p("non_torch_bytes", "vllm", r"Total non-torch memory:\s*" + _GIB, "gib"),
    _p("activation_peak_bytes", "vllm",
       r"(?:PyTorch activation peak memory(?: takes)?|torch peak memory increase:?)\s*" + _GIB,
       "gib"),
    _p("peak_torch_bytes", "vllm", r"peak_torch_memory=\s*" + _GIB, "gib"),
    _p("initial_usage_bytes", "vllm", r"initial_memory_usage=\s*" + _GIB, "gib"),
    _p("total_gpu_bytes", "vllm", r"total_gpu_memory=\s*" + _GIB, "gib"),
    _p("gpu_memory_utilization", "vllm", r"gpu_memory_utilization=\s*([0-9.]+[0-9])", "float"),
    # V0 worker.py determine_num_available_blocks (0.7.x, and 0.8.0 – 0.10.2 under V0): "the
    # current vLLM instance can use total_gpu_memory (79.18GiB) x gpu_memory_utilization (0.90)
    # = 71.26GiB"
    _p("total_gpu_bytes", "vllm", r"total_gpu_memory \(\s*" + _GIB + r"\s*\)", "gib"),
    # the multi-line "Memory profiling results:" report of PR #10511's branch of 2024-12-13
    # (vllm/worker/worker.py, one "name    value" row a line: https://github.com/vllm-project/
    # vllm/pull/10511, published rows 115 and 116), which no release printed: 0.6.5 merged the
    # one-line "the current vLLM instance can use total_gpu_memory (X) x ..." form above
    _p("total_gpu_bytes", "vllm", r"\btotal_gpu_memory\s{2,}" + _GIB, "gib"),
    _p("gpu_memory_utilization", "vllm", r"\bgpu_memory_utilization\s{2,}([0-9.]+[0-9])",
       "float"),
    _p("requested_bytes", "vllm", r"the current vLLM instance can use\s{2,}" + _GIB, "gib"),
    _p("available_kv_bytes", "vllm", r"\bavailable_kv_cache_memory\s{2,}" + _GIB, "gib"),
    _p("gpu_memory_utilization", "vllm", r"gpu_memory_utilization \(\s*([0-9.]+[0-9])\s*\)",
       "float"),
    _p("requested_bytes", "vllm",
       r"gpu_memory_utilization \(\s*[0-9.]+\s*\)\s*=\s*" + _GIB, "gib"),
    # the budget's remainder is negative where the load and the profile overran it (V1
    # gpu_worker.py "Available KV cache memory: -2.14 GiB", V0 worker.py "... reserved for KV
    # Cache is -1.05GiB"): the engine then fails to start, and the figure is the overrun
    _p("available_kv_bytes", "vllm", r"Available KV cache memory:\s*-?" + _GIB, "gib",
       sign=True),
    _p("available_kv_bytes", "vllm",
       r"(?:the rest of the memory reserved for KV Cache is(?: only)?|kv_cache_size=)\s*-?"
       + _GIB, "gib", sign=True),
    _p("available_kv_bytes", "vllm",
       r"larger than the available KV cache memory \(\s*" + _GIB, "gib"),
    _p("cudagraph_estimate_bytes", "vllm",
       r"(?:Estimated CUDA ?graph memory|CUDA graph memory (?:estimate|profiling)[^:]*):?\s*"
       + _GIB, "gib"),
    # the pool line after the capture (gpu_worker.py compile_or_warm_up_model, 0.20.0 on): the
    # estimate the budget charged (V1's, or Model Runner V2's own from 0.29.0)
    _p("cudagraph_estimate_bytes", "vllm",
       r"CUDA graph pool memory:\s*-?[0-9.]+\s*GiB \(actual\),\s*" + _GIB + r"\s*\(estimated\)",
       "gib"),
    _p("cudagraph_pool_bytes", "vllm",
       r"Graph capturing finished in [0-9.]+ secs?, took\s+" + _GIB, "gib"),
    _p("num_gpu_blocks", "vllm", r"# GPU blocks:\s*" + _NUM, "int"),
    # ... as a paste that lost the line's leading "# " shows it (published row 101's quote, of
    # the "# GPU blocks: %d, # CPU blocks: %d" of 0.6.4's executor/gpu_executor.py): the
    # CPU-block count after it says which line it is
    _p("num_gpu_blocks", "vllm", r"(?:^|\]\s*)GPU blocks:\s*" + _NUM + r", # CPU blocks:", "int"),
    # V0 executor_base.py initialize_cache (0.7.x – 0.10.2): "# cuda blocks: N, # CPU blocks: M"
    _p("num_gpu_blocks", "vllm", r"# cuda blocks:\s*" + _NUM, "int"),
    _p("num_cpu_blocks", "vllm", r"# CPU blocks:\s*" + _NUM, "int"),
    _p("num_gpu_blocks", "vllm", r"num_gpu_blocks(?: is)?[=: ]\s*" + _NUM, "int"),
    _p("kv_tokens", "vllm", r"GPU KV cache size:\s*" + _NUM + r"\s*tokens", "int"),
    _p("kv_tokens", "vllm",
       r"maximum number of tokens that can be stored in KV cache \(\s*" + _NUM, "int"),
    _p("concurrency_tokens", "vllm", r"Maximum concurrency for\s*" + _NUM + r"\s*tokens", "int"),
    _p("max_concurrency", "vllm",
       r"Maximum concurrency for\s*[0-9,]+\s*tokens per request:\s*([0-9.]+)x", "float"),
    _p("estimated_max_model_len", "vllm",
       r"estimated maximum model length is\s*" + _NUM, "int"),
    _p("logged_max_model_len", "vllm", r"max seq len \(\s*" + _NUM, "int"),
    # --max-model-len auto (0.14.0 on, v1/core/kv_cache_utils.py _auto_fit_max_model_len): the
    # length fitted after profiling, or the derived one where it fits whole
    # (memprof/core/auto_fit.py)
    _p("auto_fit_max_model_len", "vllm",
       r"Auto-fit max_model_len: reduced from\s*[0-9,]+\s*to\s*" + _NUM, "int"),
    _p("auto_fit_max_model_len", "vllm",
       r"Auto-fit max_model_len: full model context length\s*" + _NUM, "int"),
    # V1 from 0.9.1 (v1/worker/gpu_worker.py Worker.init_device; from 0.14 v1/worker/utils.py
    # request_memory): "Free memory on device cuda:0 (12.18/23.56 GiB) on startup is less than
    # desired GPU memory utilization (0.92, 21.67 GiB)": the init snapshot's free memory
    _p("free_at_start_bytes", "vllm",
       r"Free memory on device(?: \S+)? \(\s*" + _NUM + r"\s*/\s*[0-9.]+\s*GiB\) on startup",
       "gib"),
    # ... and the card's total after the slash (the same snapshot's total_memory, from
    # torch.cuda.mem_get_info): "(12.18/23.56 GiB) on startup is less than desired", and 0.27.1's
    # "Free memory on device (94.05/95.01 GiB) on startup. Desired GPU memory utilization is
    # (0.9, 85.51 GiB)" ("[gpu_worker.py:789]": published row 904)
    _p("total_gpu_bytes", "vllm",
       r"Free memory on device(?: \S+)? \(\s*[0-9.]+\s*/\s*" + _NUM + r"\s*GiB\) on startup",
       "gib"),
    # ... and the utilisation asked with the budget it makes (total x utilisation): "(0.92,
    # 21.67 GiB)" after "desired GPU memory utilization", 0.27.1's "Desired GPU memory
    # utilization is (0.9, 85.51 GiB)"
    _p("gpu_memory_utilization", "vllm",
       r"desired GPU memory utilization (?:is )?\(\s*([0-9.]*[0-9])\s*,\s*[0-9.]+\s*GiB\)",
       "float"),
    _p("requested_bytes", "vllm",
       r"desired GPU memory utilization (?:is )?\(\s*[0-9.]+\s*,\s*" + _NUM + r"\s*GiB\)",
       "gib"),
    _p("oom_tried_bytes", "any", r"Tried to allocate\s*" + _GIB, "gib"),
    _p("oom_total_bytes", "any", r"GPU(?: \d+)? has (?:a total capacity of\s*)?" + _GIB, "gib"),
    _p("oom_free_bytes", "any", r"(?:of which|total,)\s*" + _GIB + r"\s*(?:is )?free", "gib"),
    _p("oom_free_bytes", "any", r"(?:of which|total,)\s*" + _MIB + r"\s*(?:is )?free", "mib"),
    # torch's OOM message (c10/cuda/CUDACachingAllocator.cpp): "Including non-PyTorch memory,
    # this process has 21.72 GiB memory in use": with the total and the free memory it gives
    # what the rest of the card held (memprof.core.explain.in_use_from_log)
    _p("oom_process_bytes", "any", r"this process has\s*" + _GIB + r"\s*memory in use", "gib"),
    _p("oom_process_bytes", "any", r"this process has\s*" + _MIB + r"\s*memory in use", "mib"),
    # --- SGLang
    _p("avail_before_load_bytes", "sglang", r"Load weight begin\.\s*avail mem=\s*" + _GIB, "gib"),
    _p("weights_bytes", "sglang", r"Load weight end\..*?mem usage=\s*" + _GIB, "gib"),
    _p("avail_after_load_bytes", "sglang", r"Load weight end\..*?avail mem=\s*" + _GIB, "gib"),
    # SGLang main of 2026 logs the pool's dtype first: "KV Cache is allocated. dtype:
    # torch.bfloat16, #tokens: N, ..." (mem_cache/memory_pool.py; SGLang's clean-startup-log
    # skill, .claude/skills/clean-startup-log/SKILL.md of sgl-project/sglang, item 13)
    _p("kv_tokens", "sglang",
       r"KV Cache is allocated\.\s*(?:dtype:\s*[\w.]+,\s*)?#tokens:\s*" + _NUM, "int"),
    _p("kv_cache_bytes", "sglang", r"KV Cache is allocated\..*?KV size:\s*" + _GIB, "gib"),
    _p("k_bytes", "sglang", r"KV Cache is allocated\..*?\bK size:\s*" + _GIB, "gib"),
    _p("v_bytes", "sglang", r"KV Cache is allocated\..*?\bV size:\s*" + _GIB, "gib"),
    _p("avail_after_pool_bytes", "sglang", r"Memory pool end\.\s*avail mem=\s*" + _GIB, "gib"),
    # the decode graphs' line; 0.5.19 names the role and phase ("Capture target decode CUDA
    # graph end. elapsed=…, mem usage=X GB": model_executor/model_runner_components/
    # cuda_graph_setup.py capture_decode_graph), its prefill graphs' line is another figure
    _p("cudagraph_pool_bytes", "sglang",
       r"Capture (?:target decode )?cuda graph end\..*?mem usage=\s*" + _GIB, "gib"),
    _p("max_total_num_tokens", "sglang", r"max_total_num_tokens=\s*" + _NUM, "int"),
    _p("mem_fraction_static", "sglang", r"mem[-_]fraction[-_]static[= ]\s*([0-9.]*[0-9])",
       "float"),
)

LABELS = {
    "weights_bytes": "model load",
    "non_torch_bytes": "non-torch memory",
    "activation_peak_bytes": "activation peak",
    "peak_torch_bytes": "peak torch memory (weights + activations)",
    "initial_usage_bytes": "memory in use before the profile",
    "total_gpu_bytes": "GPU total",
    "requested_bytes": "requested (total × utilisation)",
    "num_cpu_blocks": "CPU (swap) blocks",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "available_kv_bytes": "available KV cache memory",
    "cudagraph_estimate_bytes": "CUDA-graph estimate",
    "cudagraph_pool_bytes": "CUDA-graph pool (captured)",
    "num_gpu_blocks": "GPU blocks",
    "kv_tokens": "KV cache tokens",
    "concurrency_tokens": "tokens per request (concurrency line)",
    "max_concurrency": "maximum concurrency",
    "estimated_max_model_len": "estimated maximum model length",
    "logged_max_model_len": "max model length asked",
    "auto_fit_max_model_len": "max_model_len fitted (--max-model-len auto)",
    "oom_tried_bytes": "OOM: tried to allocate",
    "oom_total_bytes": "OOM: GPU total",
    "oom_free_bytes": "OOM: free",
    "oom_process_bytes": "OOM: this process in use",
    "avail_before_load_bytes": "free before load",
    "free_at_start_bytes": "free at start-up (init snapshot)",
    "avail_after_load_bytes": "free after load",
    "kv_cache_bytes": "KV cache size",
    "k_bytes": "K size",
    "v_bytes": "V size",
    "avail_after_pool_bytes": "free after the KV pool",
    "max_total_num_tokens": "max_total_num_tokens",
    "mem_fraction_static": "mem_fraction_static",
}

_ERRORS = (
    re.compile(r"((?:torch\.)?(?:cuda\.)?OutOfMemoryError: .*|CUDA out of memory\..*)"),
    re.compile(r"(ValueError: .*)"),
    re.compile(r"(RuntimeError: .*)"),
    re.compile(r"(AssertionError: .*)"),
)


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of the log: its value (bytes for sizes, a count, a ratio), and what was read."""

    key: str
    value: float
    text: str
    line: int
    # half the unit of the number's last printed digit, in the figure's units (bytes for sizes):
    # the most rounding to the printed places moves it ("15.9 GiB": 0.05 GiB; "23.99 GiB":
    # 0.005 GiB)
    half_unit: float = 0.0

    @property
    def label(self) -> str:
        return LABELS.get(self.key, self.key)


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupLog:
    """What a start-up log shows."""

    engine: str | None
    generation: str | None  # "V0", "V1" (vLLM) or None
    version: str | None
    figures: dict[str, Figure]
    errors: tuple[str, ...]
    model: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    notes: tuple[str, ...] = ()
    # (file, line, message, bracketed) of the lines tagged [file.py:LINE]
    # (memprof.probes.release_lines)
    tags: tuple[tuple[str, int, str, bool], ...] = ()
    # the message formats only some releases print that its lines show (release_lines.FORMATS)
    formats: tuple[str, ...] = ()
    # (name, nvidia-smi MiB or None) of the GPUs nvidia-smi output pasted with it names
    # (memprof.probes.gpu_names)
    cards: tuple[tuple[str, int | None], ...] = ()
    # the device names of vLLM's and SGLang's fused-MoE config lookup lines, as logged
    # ("NVIDIA_H200") (memprof.probes.moe_config_device)
    moe_devices: tuple[str, ...] = ()
    # the device names of the W8A8 block-FP8 (SGLang's also block-INT8) GEMM config lookup lines,
    # as logged (memprof.probes.moe_config_device)
    gemm_devices: tuple[str, ...] = ()
    # the date its stamps print (memprof.probes.log_dates): month-day, and the year where shown
    date: LogDate | None = None
    # whether it shows the run's settings (a serve command, vLLM's "non-default args" /
    # "args: Namespace" / engine config line, SGLang's ServerArgs): where it does not, a setting
    # it leaves out is not known to be the default
    stated: bool = True
    # whether vLLM says it runs under WSL (``WSL_LINE``): torch's total there is the card's whole
    # nvidia-smi total (memprof.probes.log_deployment.whole_card_total)
    wsl: bool = False
    # the checkpoint config's max_position_embeddings where transformers' "Model config … {"
    # dump prints it (memprof.probes.checkpoint_config)
    config_positions: int | None = None
    # whether vLLM ran ``--language-model-only`` (``LANGUAGE_MODEL_ONLY``): every modality's
    # limit is 0, so no multimodal tower is built (memprof.probes.log_deployment)
    language_model_only: bool = False

    def get(self, key: str) -> float | None:
        f = self.figures.get(key)
        return None if f is None else f.value

    @property
    def failed(self) -> bool:
        return bool(self.errors)


# vLLM's platforms/interface.py is_pin_memory_available under WSL ("Using 'pin_memory=False' as
# WSL is detected. This may slow down the performance.", the 0.19.1 log of published row 2471)
WSL_LINE = "as WSL is detected"


class _Absurd(ValueError):
    """A number too large to be a figure of a start-up log (see ``MAX_FIGURE``)."""


def _value(kind: Kind, text: str) -> float:
    """The figure ``text`` shows, in memprof's units; :class:`_Absurd` beyond ``MAX_FIGURE``."""
    digits = text.replace(",", "")
    if len(digits) > MAX_DIGITS:  # longer than any figure: do not even convert it
        raise _Absurd(f"a number of {len(digits):,} characters")
    number = float(digits)
    if kind == "gib":
        number *= GiB
    elif kind == "mib":
        number *= MiB
    if not number <= MAX_FIGURE[kind]:  # also catches inf and nan
        cap = MAX_FIGURE[kind]
        raise _Absurd("more than " + (fmt_bytes(int(cap)) if kind in ("gib", "mib")
                                      else f"{cap:,.0f}"))
    return round(number) if kind in ("gib", "mib") else number


def _nvml_not_available(kind: Kind, text: str) -> bool:
    """Does ``text`` (a size of ``kind``) print :data:`NVML_VALUE_NOT_AVAILABLE` bytes, to its
    last digit?"""
    digits = text.replace(",", "")
    if len(digits) > MAX_DIGITS or kind not in ("gib", "mib"):
        return False
    number = float(digits) * (GiB if kind == "gib" else MiB)
    return abs(number - NVML_VALUE_NOT_AVAILABLE) <= _half_unit(kind, text)


def _half_unit(kind: Kind, text: str) -> float:
    """Half the unit of the last digit ``text`` prints, in memprof's units for ``kind``."""
    places = len(text.partition(".")[2])
    half = 0.5 * 10.0 ** -places
    return half * (GiB if kind == "gib" else MiB if kind == "mib" else 1)


def read_log(path: str) -> StartupLog:
    """Read and parse the start-up log at ``path`` (a regular file of at most 64 MiB)."""
    data = read_capped(path, what="the log", cap=MAX_LOG_BYTES,
                       hint="pass a vLLM or SGLang start-up log file (its start-up part, up to "
                       "the first request, is enough)")
    # utf-8-sig: a leading byte-order mark (a log saved by a Windows editor) is no part of the
    # first line
    return parse_log(data.decode("utf-8-sig", errors="replace"), where=Path(path).name)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _capture_before_budget(figures: dict[str, Figure], key: str) -> bool:
    """Is the graph figure read so far the capture of Model Runner V2's CUDA-graph estimate, so
    that a later "Graph capturing finished ... took" line replaces it? From vLLM 0.29.0 V2
    captures the graphs once while profiling and logs that capture with the same line
    (v1/worker/gpu/model_runner.py ``capture_model``, called by cudagraph_utils.py
    ``profile_cudagraph_memory``) before the budget's "Available KV cache memory", then again
    after the KV cache is allocated: the figure memprof compares is the second."""
    if key != "cudagraph_pool_bytes" or "available_kv_bytes" not in figures:
        return False
    return figures[key].line < figures["available_kv_bytes"].line


def parse_log(text: str, *, where: str = "the log") -> StartupLog:
    """The figures, settings, version and errors of a start-up log's text."""
    lines = [_ANSI.sub("", ln)[:MAX_LINE] for ln in text.splitlines()]
    _one_startup(lines, where)
    joined = "\n".join(lines)
    engine = _engine(joined)
    figures: dict[str, Figure] = {}
    errors: list[str] = []
    unread: list[str] = []  # notes on figures read as "not printed"
    for n, line in enumerate(lines, 1):
        for pat in PATTERNS:
            if (pat.key in figures and not _capture_before_budget(figures, pat.key)) or (
                    pat.engine not in ("any", engine) and engine):
                continue
            m = pat.regex.search(line)
            if m and pat.key in NVML_FIGURES and _nvml_not_available(pat.kind,
                                                                     m.group(pat.group)):
                unread.append(f"line {n}'s {m.group(0).strip()!r} is NVML's 'not available' "
                              "value (2^64 - 1 bytes), which torch prints where NVML keeps no "
                              "per-process figure (Windows' WDDM driver, WSL 2): not read as "
                              "the process's memory")
                continue
            if m:
                try:
                    value = _value(pat.kind, m.group(pat.group))
                    if pat.sign and m.string[:m.start(pat.group)].endswith("-"):
                        value = -value
                except _Absurd as why:
                    raise BadInput(
                        f"{where} line {n}: {m.group(0).strip()[:80]!r} is not a plausible "
                        f"figure ({why})",
                        hint="the log is damaged or edited; pass the log as the engine wrote "
                        "it") from None
                except ValueError:
                    continue
                figures[pat.key] = Figure(pat.key, value, m.group(0).strip(), n,
                                          _half_unit(pat.kind, m.group(pat.group)))
        for rx in _ERRORS:
            m = rx.search(line)
            if m and m.group(1) not in errors:
                errors.append(m.group(1).strip()[:400])
                break
    when = read_date(lines)  # a stamp that is no date is a damaged log: refused here
    unwrapped = _unwrapped(lines)
    settings, model, command, notes, image_release = _settings(unwrapped, engine)
    # SGLang's ServerArgs, scheduler line and release (probes/sglang_log.py; others: unchanged)
    from memprof.probes.sglang_log import read_sglang

    settings, more = read_sglang(unwrapped, engine, settings)
    notes += more
    notes += _nodes_from_log(lines, engine, settings)
    notes += unread
    if not figures and not errors and not settings:
        raise BadInput(f"{where} shows no figure memprof can read (no 'Model loading took', "
                       "'GPU KV cache size', 'KV Cache is allocated', ...)",
                       hint="pass the start-up log of vLLM or SGLang, from the launch to the "
                       "first request or the error")
    version = _version(joined) or image_release
    if version is None:
        version, note = _image_named(joined, engine)
        notes += [note] if note else []
    return StartupLog(engine=engine or _guess_engine(figures), generation=_generation(joined,
                      engine, figures), version=version,
                      figures=figures,
                      errors=tuple(errors), model=model, settings=settings, command=command,
                      notes=tuple(notes), tags=tags(lines), formats=formats(lines),
                      cards=named_cards(lines), moe_devices=moe_lookup_devices(lines),
                      gemm_devices=gemm_lookup_devices(lines),
                      date=when, wsl=any(WSL_LINE in x for x in lines),
                      config_positions=logged_positions(lines),
                      language_model_only=any(LANGUAGE_MODEL_ONLY.search(x) for x in unwrapped),
                      stated=command is not None or any(
                          _SETTINGS_OPENER.search(x) or "with config: " in x for x in unwrapped))


# The lines an engine prints once per start-up, with what they say about it: vLLM's release
# (api_server.py), its arguments (api_utils.py / arg_utils.py "non-default args"), its engine
# config (core.py / llm_engine.py "Initializing ... engine (vX) with config"), SGLang's
# ServerArgs. The same line twice with different contents is two start-ups in one file (a
# container restarted with other flags, logs appended): their figures cannot be told apart.
_STARTUP_LINES = (
    ("vLLM releases", re.compile(r"vLLM API server version\s*(\S+)")),
    ("vLLM argument lists", re.compile(r"non-default args:\s*(\{.*)")),
    # its release and model only: each DP engine core prints the line, with a config that
    # may differ by rank further on
    ("vLLM engine configs", re.compile(r"Initializing (?:a V1|an) LLM engine "
                                       r"(\(v[^)]*\) with config: model=\S+)")),
    ("SGLang ServerArgs", re.compile(r"server_args=ServerArgs\((.*)")),
)


def _one_startup(lines: list[str], where: str) -> None:
    """:class:`BadInput` when ``lines`` hold two start-ups that differ (``_STARTUP_LINES``); the
    same start-up logged twice (a restart with the same command) is one."""
    for what, rx in _STARTUP_LINES:
        first: dict[str, int] = {}
        for n, line in enumerate(lines, 1):
            m = rx.search(line)
            if m is None:
                continue
            first.setdefault(m.group(1).strip(), n)
            if len(first) > 1:
                a, b = first.values()
                raise BadInput(f"{where} holds more than one start-up: lines {a} and {b} show "
                               f"two {what}",
                               hint="cut it to one start-up (from its launch to the first "
                               "request or its error) and explain that part")


def _engine(text: str) -> str:
    if re.search(r"sglang|KV Cache is allocated|Load weight end|mem_fraction_static|"
                 r"Memory pool end", text, re.I) and not re.search(
                     r"vllm serve|vLLM API server|vllm\.|\[gpu_worker\.py", text):
        return "sglang"
    if re.search(r"vllm|V[01] LLM engine|GPU KV cache size|# GPU blocks|Maximum concurrency for|"
                 r"model weights|KV cache memory|non_torch_memory|max seq len", text, re.I):
        return "vllm"
    return ""


def _guess_engine(figures: dict[str, Figure]) -> str | None:
    """The engine whose budget lines the figures are (None: no figure was read)."""
    if not figures:
        return None
    return next((e.name for e in ENGINES.values() if e.logs_budget_lines), None)


def _generation(text: str, engine: str, figures: dict[str, Figure]) -> str | None:
    wrote = ENGINES.get(engine)
    if wrote is None or not wrote.has_v0_generation:
        return None
    if re.search(r"V1 LLM engine|VLLM_USE_V1=1|\[gpu_worker\.py|\[kv_cache_utils\.py|"
                 r"Available KV cache memory|EngineCore", text):
        return "V1"
    if re.search(r"V0 LLM engine|# GPU blocks:|# cuda blocks:|model_runner\.py|gpu_executor\.py|"
                 r"worker\.py:\d+\]|Memory profiling results|VLLM_USE_V1=0|"
                 r"maximum number of tokens that can be stored", text):
        return "V0"
    return None


def _version(text: str) -> str | None:
    for rx in (r"vLLM API server version\s*([0-9][\w.+-]*)",
               r"Initializing a V1 LLM engine \(v([0-9][\w.+-]*)\)",
               r"LLM engine \(v([0-9][\w.+-]*)\)",
               # the environment report an issue pastes beside its log, vLLM's collect_env.py:
               # "vLLM Version: 0.5.4" in older releases, "vLLM Version                 :
               # 0.11.0" under its "vLLM Info" heading since (vllm/collect_env.py env_info_fmt;
               # published row 160 quotes it)
               r"(?m)^vLLM Version\s*:\s*v?([0-9]+\.[0-9]+\.[0-9][\w.+-]*)",
               # a release as PEP 440 writes it: 0.8.5.post1, 0.7.4.dev12, 0.11.2rc1+rhai0
               r"\bvllm[ =]=?=?v?([0-9]+\.[0-9]+\.[0-9]+(?:\.?(?:post|dev|rc)[0-9]+)*"
               r"(?:\+[\w.]+)?)",
               r"sglang[ =]=?=?v?([0-9]+\.[0-9]+\.[0-9][\w.]*)",
               # the API server's start-up banner, a block-letter logo then the release, where
               # newer releases print it ("[utils.py:299] ▄▄ ▄█ █ █ █ ▀▄▀ █  version 0.19.0",
               # "[api_utils.py:339] ... version 0.25.1": the quotes of published rows 133, 145)
               r"[▀▄█][^\n]*?\bversion\s+v?([0-9]+\.[0-9]+\.[0-9][\w.+-]*)"):
        m = re.search(rx, text, re.I)
        if m:
            return m.group(1)
    return None


# an engine's container image named with its tag anywhere in a log (a run report's "engine
# image: `vllm/vllm-openai:v0.30.0`", a pod's "Pulling image \"lmsysorg/sglang:v0.5.19\""): a
# registry path with a tag, not inside a longer path or URL
_IMAGE_REF = re.compile(r"(?<![\w.:/@-])((?:[\w.-]+/)+[\w.-]+:[\w.+-]+)")


def _image_named(text: str, engine: str) -> tuple[str | None, str | None]:
    """The release that the tags of ``engine``'s images in ``text`` name (``vllm/vllm-openai:
    v0.30.0`` → 0.30.0: ``memprof.probes.serve_command.image_release``), where no version line
    or serve command names one, with the note saying so; None where no tag names a release
    (``latest``), and where tags name two releases (then with a note: the log does not say which
    ran)."""
    from memprof.probes.serve_command import image_engine, image_release

    found: dict[str, str] = {}
    for m in _IMAGE_REF.finditer(text):
        release = image_release(m.group(1))
        if release is not None and engine and image_engine(m.group(1)) == engine:
            found.setdefault(release, m.group(1))
    if len(found) > 1:
        return None, (f"the log names images of {len(found)} releases "
                      f"({', '.join(sorted(found.values()))[:160]}) and no version line: "
                      "none is taken as the one that ran")
    for release, ref in found.items():
        return release, (f"the log prints no version line; the image it names, {ref[:80]!r}, "
                         f"is release {release} by its tag")
    return None, None


# vLLM's LoRA settings (an ``args: Namespace(…)`` line prints them all, LoRA on or off): the
# sizes are kept only where the log turns LoRA on (``enable_lora=True``)
LORA_FIELDS = ("enable_lora", "max_loras", "max_lora_rank", "lora_extra_vocab_size",
               "lora_dtype", "fully_sharded_loras", "enable_lora_bias",
               "specialize_active_lora")
# the Deployment fields a start-up log shows (vLLM's "non-default args" / engine config line,
# SGLang's ServerArgs)
LOGGED_FIELDS = ("tp", "pp", "dp", "enable_expert_parallel", "quantization", "kv_cache_dtype",
                 "max_model_len", "max_num_seqs", "max_num_batched_tokens",
                 "gpu_memory_utilization", "block_size", "enforce_eager", "dtype",
                 "mem_fraction_static", "enable_dp_attention", "chunked_prefill_size",
                 "cuda_graph_max_bs", "nnodes", "enable_prefix_caching", "mamba_cache_mode",
                 "runner", "convert", "task",
                 *LORA_FIELDS)


def _config_keys() -> dict[str, str]:
    """Log key → Deployment field. The engines log a setting under their argparse dest, the
    snake_case of each engine's longest flag for it in the settings table
    (``memprof.core.flags.flag_name``): ``tensor_parallel_size``, SGLang's ``tp_size``, ...;
    vLLM's model config also logs ``max_seq_len``."""
    from memprof.core.flags import flag_name

    keys = {flag_name(f, e).lstrip("-").replace("-", "_"): f
            for f in LOGGED_FIELDS for e in ("vllm", "sglang")}
    keys["max_seq_len"] = "max_model_len"
    return keys


_CONFIG_KEYS = _config_keys()


# the lines that open a start-up log's settings in brackets: vLLM's "non-default args: {…}"
# (vllm/entrypoints/utils.py log_non_default_args) and "args: Namespace(…)", SGLang's
# "server_args=ServerArgs(…)" and, from 0.5.19, "server_args={…}"
_SETTINGS_OPENER = re.compile(r"non-default args:|\bargs: Namespace\(|"
                              r"server_args=(?:ServerArgs\(|\{)")
_MAX_WRAPPED = 64  # continuation lines joined onto one settings line at most
_OPENING, _CLOSING = "({[", ")}]"


def _open_brackets(text: str) -> tuple[int, bool]:
    """The brackets ``text`` leaves open (closers less openers outside quoted strings, as a
    dict's or a Namespace's repr quotes them), and whether it opened any."""
    depth, opened, quote = 0, False, ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPENING:
            depth, opened = depth + 1, True
        elif ch in _CLOSING:
            depth -= 1
    return depth, opened


def _unwrapped(lines: list[str]) -> list[str]:
    """``lines`` with a settings line that a document wrapped joined back into the one line
    the engine printed. The engine prints each of these settings on one line; a page that
    quotes it may break it (published row 1728: ``… [api_utils.py:272] non-default args:`` /
    ``  {'model_tag': …, 'model': …,`` / ``   'max_model_len': 8192, 'quantization': 'awq', …}``).
    After a line that opens the settings (``_SETTINGS_OPENER``) and leaves its brackets open,
    each indented line continues it until they close (where the line ends before the first
    bracket, an indented line that begins with one opens them): a log record begins with its
    level, timestamp or process prefix, never with blanks."""
    out: list[str] = []
    start, joined = -1, 0  # where the open settings begin in out[-1] (-1: none is open)
    for line in lines:
        text = line.strip()
        if start >= 0 and joined < _MAX_WRAPPED and line[:1].isspace() and text:
            depth, opened = _open_brackets(out[-1][start:])
            if depth > 0 or (not opened and text[0] in _OPENING):
                out[-1] = out[-1].rstrip() + " " + text
                joined += 1
                continue
        out.append(line)
        start, joined = -1, 0
        m = _SETTINGS_OPENER.search(line)
        if m is not None:
            depth, opened = _open_brackets(line[m.start():])
            if depth > 0 or not opened:
                start = m.start()
    return out


def _shell_lines(lines: list[str]) -> list[str]:
    """``lines`` with a shell command's continuations joined: a line ending in ``\\`` and the
    lines after it that begin with a flag (``vllm serve M \\`` / ``  --tp 8 \\`` / ...) are one
    line, as the shell reads them; a continuation that is no flag ends the command, except in
    a ``docker run`` command, whose image and model are words of their own between its options
    and the serve flags (``  vllm/vllm-openai:latest \\`` / ``  Qwen/Qwen3-32B \\``).

    A command a document writes one flag a line with the backslashes left out (published row
    1456's ``python -m sglang.launch_server`` / ``  --model-path Qwen/Qwen3-30B-A3B`` /
    ``  --mem-fraction-static 0.90`` / ...) is one command too: after a launch line, each
    indented line that begins with ``--`` continues it (a log line begins with its level or
    timestamp, never with an indented flag).

    A line that is only an elision (``  ... \\``, published row 134's ``vllm serve`` between
    ``--enable-chunked-prefill`` and ``--gpu-memory-utilization 0.9``) stands for the flags the
    document left out: it continues the command, and the lines after it continue it as the
    elided ones did, its backslash kept or not (``memprof.probes.serve_command`` drops the
    ``...`` word)."""
    out: list[str] = []
    joining = block = False
    for line in lines:
        elided = _ELISION_LINE.fullmatch(line) is not None
        flag_line = line.lstrip().startswith("-") or elided
        if (joining and (flag_line or (_DOCKER_RUN.search(out[-1]) and line.strip()))) or (
                block and line[:1].isspace() and (line.lstrip().startswith("--") or elided)):
            out[-1] = out[-1].rstrip().removesuffix("\\") + " " + line.strip()
            joining = elided or out[-1].rstrip().endswith("\\")
            continue
        out.append(line)
        block = _launch_line(line) and not line.rstrip().endswith("\\")
        joining = out[-1].rstrip().endswith("\\")
    return out


# vLLM's --language-model-only as its start-up lines print it: the "non-default args: {…}"
# key (vllm/entrypoints/utils.py log_non_default_args), the "args: Namespace(…)" attribute, or
# the flag on a quoted serve command (EngineArgs.language_model_only, vllm/engine/arg_utils.py;
# vllm/config/multimodal.py MultiModalConfig.language_model_only at 0.27.1: "equivalent to
# setting --limit-mm-per-prompt to 0 for every modality")
LANGUAGE_MODEL_ONLY = re.compile(r"'language_model_only':\s*True\b|\blanguage_model_only=True\b|"
                                 r"(?:vllm serve|-m vllm\S*)\s.*--language-model-only(?![\w-])"
                                 r"(?!\s*[= ]\s*(?:false|False|0)\b)")


# a line that is only an elision inside a quoted command ("  ... \\", "  …")
_ELISION_LINE = re.compile(r"\s+(?:\.\.\.|…)\s*\\?\s*")


def _settings(lines: list[str], engine: str
              ) -> tuple[dict[str, Any], str | None, str | None, list[str], str | None]:
    """Settings from a serve command in the log (a ``docker run`` command's too, and the
    release its image's tag names, the last item), vLLM's "non-default args: {…}" or engine
    config line, or SGLang's ``server_args=ServerArgs(…)`` / ``server_args={…}``."""
    settings: dict[str, Any] = {}
    model: str | None = None
    command: str | None = None
    image_release: str | None = None
    notes: list[str] = []
    shell = _shell_lines(lines)
    bound = _int_bindings(shell)
    for line in _quoted_args(shell, engine):
        lm_eval = _lm_eval_args(line)
        if command is None and not _launch_line(line) and lm_eval is None:
            quoted = _quoted_commands(line)
            args = args_from_model(quoted[-1] if quoted else line)
            if args is not None:
                launcher = (ENGINES.get(engine or "") or ENGINES[DEFAULT]).launcher_prefix
                line = launcher + args
                if len(quoted) > 1:
                    notes.append(f"a line of the log quotes {len(quoted)} serve commands; the "
                                 "last, the run its log lines follow, is read")
        if command is None and _launch_line(line):
            command, model, got, note, image_release = _command(line)
            settings.update({k: v for k, v in got.items() if k not in settings})
            if note:
                notes.append(note)
        m = re.search(r"non-default args:\s*(\{.*\})", line)
        if m:
            try:
                d = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                # a quote that elides part of the dict ("..., 'max_model_len': 65536, ...
                # 'tensor_parallel_size': 2}") still shows the pairs it keeps
                d = {k: _literal(v) for k, v in _DICT_PAIR.findall(m.group(1))}
            if isinstance(d, dict):
                model = model or (str(d["model"]) if "model" in d else None)
                _take(d, settings)
                if isinstance(d.get("speculative_config"), dict):
                    notes += _speculative(d["speculative_config"], settings)
        if "hf_overrides" not in settings and (over := logged_hf_overrides(line)) is not None:
            settings["hf_overrides"] = over
            notes.append(f"the log's hf_overrides {over} is applied as --hf-overrides")
        m = re.search(r"(?:server_args=ServerArgs\(|with config: |\bargs: Namespace\()(.*)", line)
        if m:
            pairs = dict(re.findall(r"(\w+)=('[^']*'|\"[^\"]*\"|[\w.+-]+)", m.group(1)))
            d = {k: _literal(v) for k, v in pairs.items()}
            model = model or _str(d.get("model_path") or d.get("model"))
            _take(d, settings)
        m = re.search(r"server_args=\{(.*)", line)  # SGLang 0.5.19 and later
        if m:
            from memprof.probes.sglang_log import split_dict_fields

            d = {k: _literal(v) for k, v in split_dict_fields(m.group(1)).items()}
            model = model or _str(d.get("model_path"))
            _take(d, settings)
        if _LLM_CLASS.search(line) and "entrypoint" not in settings:
            settings["entrypoint"] = "llm"
        if lm_eval is not None:
            d = {k: _literal(v) for k, _, v in
                 (kv.partition("=") for kv in lm_eval.group(1).split(",")) if k}
            model = model or _str(d.get("pretrained"))
            _take(d, settings)
            settings.setdefault("entrypoint", "llm")
        m = _KEYWORD_LINE.fullmatch(line.strip())
        if m and m.group(1) in _CONFIG_KEYS:
            value = _literal(m.group(2))
            if isinstance(value, str) and value in bound and m.group(1) not in settings:
                notes.append(f"{m.group(1)} {bound[value]}: the quoted code's '{line.strip()}' "
                             f"with '{value} = {bound[value]}' above it")
                value = bound[value]
            _take({m.group(1): value}, settings)
        for rx, fld in _IN_EFFECT:
            m = rx.search(line)
            if m and fld not in settings:
                settings[fld] = int(m.group(1).replace(",", ""))
        if _CUSTOM_AR_OFF.search(line):
            # the engine turned it off at start-up whatever the config line said before
            settings["disable_custom_all_reduce"] = True
            if _NO_P2P.search(line):
                settings["no_gpu_peer_access"] = True
        m = _DRIVER_VERSION.search(line)
        if m and "nvidia_driver" not in settings:
            settings["nvidia_driver"] = m.group(1)
        if _FLASHINFER_SAMPLER.search(line) and "vllm_use_flashinfer_sampler" not in settings:
            settings["vllm_use_flashinfer_sampler"] = 1
        if _COMPILE_CACHE_HIT.search(line) and "compile_cache" not in settings:
            settings["compile_cache"] = "warm"
            notes.append("a warm compile cache (--compile-cache warm): the log's 'Directly "
                         "load' line loads what an earlier start compiled")
    notes += unsloth_settings(lines, settings)
    logged = settings.get("quantization")
    if isinstance(logged, str) and logged in _LOGGED_METHODS:
        settings["quantization"] = _LOGGED_METHODS[logged]
        notes.append(f"the log's quantization={logged} is read as --quantization "
                     f"{settings['quantization']} (the same GPTQ checkpoint on Marlin kernels)")
    if "quantization" not in settings:
        # no command or engine config line named the method: the linear method's kernel line
        # names it (read last, so that an explicit setting anywhere in the log wins)
        kernel = next((m for ln in lines if (m := _KERNEL_FOR_METHOD.search(ln))), None)
        if kernel is not None:
            settings["quantization"] = _LINEAR_METHODS[kernel.group(1)]
            notes.append(f"--quantization {settings['quantization']} read from the log's "
                         f"'{kernel.group(0)}'; the checkpoint's bits and group size are not "
                         "in the log: a config.json that declares them (--model) sizes them, "
                         "else 4-bit, group 128 is assumed")
    if "enable_lora" not in settings:
        punica = next((m for ln in lines if (m := _PUNICA.search(ln))), None)
        if punica is not None:
            settings["enable_lora"] = True
            notes.append(f"LoRA is on (the log's '{punica.group(0)}': vLLM builds the Punica "
                         "wrapper only under --enable-lora)")
            if (sizes := lora_sizes_note(settings)) is not None:
                notes.append(sizes)
    if not settings.get("enable_lora"):
        for fld in LORA_FIELDS:
            settings.pop(fld, None)
    return settings, model, command, notes, image_release


# a serve command's arguments outside a launcher (a compose service's ``command: --model M
# --tp 4``, a sentence's ``--model M --max-model-len 8192``): from ``--model`` / ``--model-path``
# on, with another flag after it; read after the engine's launcher
_ARGS_FROM_MODEL = re.compile(r"(--model(?:-path)?[ =]\S+(?:\s.*)?\s--[\w-]+.*)")
_A_FLAG = re.compile(r"\s--[\w-]+")


def args_from_model(text: str) -> str | None:
    """``_ARGS_FROM_MODEL``'s arguments in ``text`` (one line), from its first ``--model`` that
    another flag follows to the line's end; None where there is none. The search runs up to the
    line's last flag: a ``--model`` after it cannot match, and trying each of many such starts
    to the line's end made a long line (``--model "`` 5,000 times) quadratic."""
    end = max((f.end() for f in _A_FLAG.finditer(text)), default=0)
    if not end:
        return None
    m = _ARGS_FROM_MODEL.search(text, 0, end)
    # (the pattern's closing ``.*`` runs to the end: the arguments are the rest of the line)
    return None if m is None else text[m.start(1):]
# a double-quoted span of a line (no nesting: quotes pair in order)
_DOUBLE_QUOTED = re.compile(r'"([^"\n]*)"')


def _quoted_commands(line: str) -> list[str]:
    """The double-quoted spans of a prose line that hold serve arguments (``_ARGS_FROM_MODEL``),
    in order. A sentence that quotes a command ends it at its closing quote (published row
    1951: ``… deployment command:  "command: --model /models/Qwen3/Qwen3-30B-A3B …
    --tensor_parallel_size 4"  Can be deployed …, and run the command "command: --model …"  It
    will report …``: a docker-compose service's ``command:`` value, which the vLLM image's
    ``vllm serve`` entrypoint takes as its arguments), so the prose after it is not read as
    flags."""
    if '"' not in line or "--model" not in line:
        return []
    return [span for span in _DOUBLE_QUOTED.findall(line)
            if args_from_model(span) is not None]


def lora_sizes_note(settings: dict[str, Any]) -> str | None:
    """What a log that shows LoRA on only by its Punica line leaves to vLLM's defaults, of the
    LoRA sizes ``settings`` (the log's, and the user's flags) do not give; None where they give
    both."""
    unread = [f"{fld} {default}" for fld, default in (("max_loras", 1), ("max_lora_rank", 16))
              if fld not in settings]
    if not unread:
        return None
    return (f"{LORA_SIZES_ASSUMED}: vLLM's defaults assumed ({', '.join(unread)}), give "
            "--max-loras / --max-lora-rank to say otherwise")


# the start of ``lora_sizes_note``'s note, by which a caller that knows the user's flags finds it
LORA_SIZES_ASSUMED = "LoRA's sizes are not in the log"


# a line that holds a serve command: a launcher, or a container run of an engine's image or
# command (``docker run … vllm/vllm-openai:TAG …``, read by memprof.probes.serve_command.
# docker_run; another container's run is no serve command)
_DOCKER_RUN = re.compile(r"\b(?:docker|podman|nerdctl)\s+(?:container\s+)?run\b")
_LAUNCHER = re.compile(r"vllm serve|vllm\.entrypoints|sglang\.launch_server")


def _launch_line(line: str) -> bool:
    """The line holds a serve command (``_DOCKER_RUN`` found once, then a plain search after
    it: no regex backtracks over a long line)."""
    if _LAUNCHER.search(line):
        return True
    m = _DOCKER_RUN.search(line)
    return m is not None and any(name in line[m.end():] for name in ENGINES)


# lm-evaluation-harness's vLLM backend, ``lm_eval --model vllm --model_args pretrained=M,
# tensor_parallel_size=8,max_model_len=16384,...``: its VLLM wrapper (lm_eval/models/
# vllm_causallms.py) builds vLLM's LLM class from those keyword arguments (``pretrained`` is the
# model), so they are EngineArgs' fields, read as the argparse dests they share, and the
# entrypoint is the LLM class (published row 802)
_LM_EVAL = re.compile(r"\blm_eval\b")
_LM_EVAL_VLLM = re.compile(r"\s--model[ =]vllm\b")
_LM_EVAL_ARGS = re.compile(r"\s--model_args[ =]['\"]?([^\s'\"]+)")


def _lm_eval_args(line: str) -> re.Match[str] | None:
    """``--model_args`` of an ``lm_eval --model vllm`` line (searched after the first
    ``lm_eval``), or None."""
    m = _LM_EVAL.search(line)
    if m is None:
        return None
    rest = line[m.end():]
    return _LM_EVAL_ARGS.search(rest) if _LM_EVAL_VLLM.search(rest) else None
# a serve command's arguments quoted one (or a flag and its value) a line, as a Kubernetes
# manifest's or a Python list's items (published row 118: ``"--max-model-len=1000", # ...``;
# ``- "--tp"``; ``['--max-model-len', '8192']``):
# the run of such lines is read as the engine's serve command
_QUOTED = re.compile(r"""(["'])([^"'\n]*)\1""")
# what a quoted-argument line holds besides its quoted strings (a YAML item's "- ", a list's
# brackets and commas), before a comment: a character class, so no line backtracks
_BETWEEN_QUOTED = re.compile(r"[\s,\[\]]*")


def _quoted_items(line: str) -> list[str] | None:
    """The quoted strings of a line that holds nothing else (``_BETWEEN_QUOTED``), or None."""
    items = [q for _, q in _QUOTED.findall(line)]
    if not items:
        return None
    rest = _QUOTED.sub(" ", line).split("#", 1)[0].lstrip()
    if rest.startswith("- "):  # a YAML list item
        rest = rest[2:]
    return items if _BETWEEN_QUOTED.fullmatch(rest) else None


def _quoted_args(lines: list[str], engine: str) -> list[str]:
    """``lines`` with each run of quoted-argument lines (``_quoted_items``) also given as
    one serve command line after the run: the engine's launcher, then the arguments, where the
    first is a flag; the arguments alone where they hold a launcher (``"vllm", "serve", …``)."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        joined = " ".join(shlex.quote(a) for a in run)
        if run and run[0].startswith("--"):
            launcher = (ENGINES.get(engine or "") or ENGINES[DEFAULT]).launcher_prefix
            out.append(launcher + joined)
        elif run and _launch_line(joined):  # ["vllm", "serve", "M", "--tp", "2"]
            out.append(joined)
        run.clear()

    for line in lines:
        items = _quoted_items(line) if ('"' in line or "'" in line) else None
        if items is not None and len(run) < 200:
            run.extend(items)
        else:
            flush()
        out.append(line)
    flush()
    return out


# a top-level assignment of an integer in quoted Python code (a notebook cell's ``lora_rank = 32
# # Larger rank = smarter``): a keyword line that passes the name (``max_lora_rank = lora_rank,``)
# passes its value
_INT_BINDING = re.compile(r"([A-Za-z_]\w*)\s*=\s*([0-9]{1,12})\s*(?:#.*)?")


def _int_bindings(lines: list[str]) -> dict[str, int]:
    """The names unindented lines of ``lines`` bind to an integer literal, each to its last
    value."""
    return {m.group(1): int(m.group(2)) for line in lines
            if line[:1].strip() and (m := _INT_BINDING.fullmatch(line.rstrip()))}


# vLLM's Python entry point, ``llm = LLM(model=...)``: the LLM class, whose batch defaults
# differ from vllm serve's (vllm/engine/arg_utils.py keys them by UsageContext.LLM_CLASS vs
# OPENAI_API_SERVER; memprof.core.deployment.ENTRYPOINTS)
_LLM_CLASS = re.compile(r"(?:^|[=\s(])(?:vllm\.)?LLM\(")
# one setting on a line of its own, as a quote shows an engine's arguments outside a command:
# ``tensor_parallel_size=2,`` in ``LLM(...)`` (vLLM's Python entry point takes EngineArgs'
# fields, the argparse dests), ``"max_model_len": 4096,`` in a JSON recipe
_KEYWORD_LINE = re.compile(r"[\"']?([a-z_]+)[\"']?\s*[=:]\s*([\w.+-]+|'[^']*'|\"[^\"]*\"),?")
# vLLM's lines that print a setting's value in effect (set or defaulted), read where no
# command or args line gave it: "Chunked prefill is enabled with max_num_batched_tokens=8192."
# (SchedulerConfig: vllm/config.py, "[config.py:1901]" at 0.8.4; vllm/config/scheduler.py later)
# and "Using max model len 131072" (ModelConfig.get_and_verify_max_len: vllm/config.py, then
# vllm/config/model.py, "[model.py:1561]" at 0.15.1)
_IN_EFFECT = ((re.compile(r"Chunked prefill is enabled with "
                          r"max_num_batched_tokens=([0-9]{1,12})\b"), "max_num_batched_tokens"),
              (re.compile(r"Using max model len ([0-9]{1,12})\b"), "max_model_len"))


# vLLM's warning that its custom all-reduce switched itself off at start-up (no P2P, a PCIe
# host above two GPUs, an unsupported world size: CustomAllreduce.__init__ in
# vllm/distributed/device_communicators/custom_all_reduce.py, "[custom_all_reduce.py:146]" at
# 0.8.4): the TP all-reduce is then NCCL's, as under --disable-custom-all-reduce
_CUSTOM_AR_OFF = re.compile(r"Custom allreduce is disabled because")
# ... "because your platform lacks GPU P2P capability or P2P test failed": no peer access between
# the GPUs, so NCCL runs over host shared memory too (``--no-gpu-peer-access``)
_NO_P2P = re.compile(r"lacks GPU P2P capability")
# ... "because this process group spans across nodes": the TP group's ranks are on more than one
# node (CustomAllreduce.__init__, vLLM custom_all_reduce.py l.85 at 0.10.1; SGLang logs the same
# line): ``--nnodes`` (memprof/core/nodes.py)
_SPANS_NODES = re.compile(r"Custom allreduce is disabled because this process group spans "
                          r"across nodes")
# vLLM's Ray executor, once for each node of its placement group that holds fewer bundles (GPUs)
# than the TP size (vllm/executor/ray_utils.py _verify_bundles, l.200 at 0.10.1): "tensor_parallel
# _size=4 is bigger than a reserved number of GPUs (1 GPUs) in a node 2e18…"
_RAY_NODE = re.compile(r"tensor_parallel_size=\d+ is bigger than a reserved number of \w+s "
                       r"\((\d{1,6}) \w+s\) in a node (\w+)")


def _nodes_from_log(lines: list[str], engine: str, settings: dict[str, Any]) -> list[str]:
    """Set ``nnodes`` where no command gave it. Ray's per-node warning (``_RAY_NODE``) names each
    node that holds fewer GPUs than the TP size and its GPU count: when those counts add up to
    the world size, every node printed one and their number is the node count. Otherwise the
    "spans across nodes" line says that the TP group spans nodes but not how many: one rank a
    node (the world size) is assumed, and the returned note says so."""
    spans = any(_SPANS_NODES.search(ln) for ln in lines)
    if "nnodes" in settings or not spans:
        return []
    from memprof.core.deployment import Deployment

    layout = {k: settings[k] for k in ("tp", "pp", "dp", "enable_dp_attention")
              if isinstance(settings.get(k), type(getattr(Deployment(), k)))}
    world = Deployment(engine=engine if engine in ENGINES else DEFAULT, **layout).world_size
    if world < 2:
        return []
    nodes: dict[str, int] = {}
    for ln in lines:
        m = _RAY_NODE.search(ln)
        if m:
            nodes[m.group(2)] = int(m.group(1))
    if nodes and sum(nodes.values()) == world and world % len(nodes) == 0:
        settings["nnodes"] = len(nodes)
        return []
    settings["nnodes"] = world
    return [f"the log's 'Custom allreduce is disabled because this process group spans across "
            f"nodes' puts the TP group on several nodes without saying how many: one rank a "
            f"node assumed (--nnodes {world}); pass --nnodes to say otherwise"]


# V1's sampler announcing FlashInfer's top-k/top-p kernel (vllm/v1/sample/ops/topk_topp_sampler.py
# TopKTopPSampler.__init__, "Using FlashInfer for top-p & top-k sampling.", read at 0.8.2 and
# 0.9.0-0.11.0): the profile run's sampler warm-up is FlashInfer's
# (``--vllm-use-flashinfer-sampler``)
_FLASHINFER_SAMPLER = re.compile(r"Using FlashInfer for top-p & top-k sampling")
# the NVIDIA driver, where a pasted log holds nvidia-smi's header ("| NVIDIA-SMI 535.247.01
# Driver Version: 535.247.01   CUDA Version: 12.2 |") or vLLM's collect_env report ("Nvidia
# driver version: 535.129.03"): --nvidia-driver (memprof/core/nvidia_driver.py)
_DRIVER_VERSION = re.compile(r"(?i)\bdriver version\s*:\s*(\d{3}(?:\.\d{1,3}){0,2})\b")
# vLLM's compile-cache hit (0.22.0-0.27.1 compilation/decorators.py "Directly load AOT
# compilation from path", compilation/backends.py "Directly load the compiled graph(s) for
# compile range"): a warm start (memprof/core/terms/runner_v2_profile.py)
_COMPILE_CACHE_HIT = re.compile(r"Directly load (?:AOT compilation from path|the compiled "
                                r"graph\(s\) for compile range)")
# vLLM's line naming the kernel of a quantised linear method, printed once per kernel as the
# first layer creates its weights: "Using MarlinLinearKernel for GPTQMarlinLinearMethod"
# (GPTQMarlinLinearMethod.create_weights, vllm/model_executor/layers/quantization/gptq_marlin.py,
# "[gptq_marlin.py:200]" at 0.6.5). Only GPTQMarlinConfig builds that method, so the line names
# the run's --quantization as the engine config line would (quantization=gptq_marlin), for a
# quote that keeps the load lines but not the config line. Linear method class -> the
# --quantization value that selects it.
# AutoGPTQLinearMethod: AutoGPTQConfig's ("[auto_gptq.py:355]" at 0.24.0, published row 1206),
# below.
_LINEAR_METHODS = {"GPTQMarlinLinearMethod": "gptq_marlin", "AutoGPTQLinearMethod": "gptq_marlin"}
# vLLM's line naming the Punica wrapper of its LoRA layers, "Using PunicaWrapperGPU."
# (get_punica_wrapper, vllm/lora/punica_wrapper/punica_selector.py: "[punica_selector.py:16]" at
# 0.7.1, ":18" at 0.7.3, published rows 1301-1303): the LoRA model manager builds it, which the
# worker creates only when the engine's lora_config is set (--enable-lora). It says LoRA is on
# where no command or Namespace line does (an LLM(...) call behind a wrapper); not the sizes.
_PUNICA = re.compile(r"Using PunicaWrapper\w*\.")
# a method name the engine config line prints that memprof's --quantization spells otherwise:
# vLLM's ``auto_gptq`` (AutoGPTQConfig.get_name, vllm/model_executor/layers/quantization/
# auto_gptq.py; the engine line's "quantization=auto_gptq" at 0.24.0) is the GPTQ-on-Marlin
# method that override_quantization_method picks for a ``quant_method: gptq`` checkpoint under
# --quantization gptq / gptq_marlin / auto_gptq / marlin or none: its AutoGPTQLinearMethod runs
# the MPLinear Marlin kernel with zero_points=False, whose process_weights_after_loading empties
# the zero points as gptq_marlin's does (kernels/linear/mixed_precision/marlin.py)
_LOGGED_METHODS = {"auto_gptq": "gptq_marlin"}
_KERNEL_FOR_METHOD = re.compile(r"Using \w+ for (" + "|".join(_LINEAR_METHODS) + r")\b")


# one ``'key': value`` pair of vLLM's "non-default args: {…}" (a dict's repr: vllm/entrypoints/
# utils.py log_non_default_args, "[utils.py:253]" at 0.12.0), a scalar value
_DICT_PAIR = re.compile(r"'(\w+)':\s*('[^']*'|\"[^\"]*\"|[\w.+-]+)(?=\s*[,}]|\s*$)")


# vLLM's --hf-overrides as its start-up lines print it: the "non-default args: {…}" pair
# ``'hf_overrides': {…}`` or the ``args: Namespace(…)`` attribute ``hf_overrides={…}``, a dict's
# repr (EngineArgs.hf_overrides, vllm/engine/arg_utils.py; vllm/config/model.py
# ModelConfig.hf_overrides, 0.11.0 - 0.27.1: the HF config updated with it before the
# architecture is resolved)
_HF_OVERRIDES = re.compile(r"'hf_overrides':\s*(?=\{)|\bhf_overrides=(?=\{)")


def logged_hf_overrides(line: str) -> str | None:
    """The non-empty dict a vLLM log line gives ``hf_overrides`` (:data:`_HF_OVERRIDES`), as
    the JSON ``--hf-overrides`` takes; None where the line gives none or it cannot be read
    whole (a quote that elides part of it)."""
    m = _HF_OVERRIDES.search(line)
    if m is None:
        return None
    text, depth, quote, end = line[m.end():], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPENING:
            depth += 1
        elif ch in _CLOSING:
            depth -= 1
            if depth == 0:
                end = i + 1
                break
    if not end:
        return None
    value = _literal(text[:end])
    if not isinstance(value, dict) or not value:
        return None
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # a repr of something JSON has no form of
        return None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if text.startswith("torch."):
            return text.removeprefix("torch.")
        return text


def _speculative(conf: dict[Any, Any], settings: dict[str, Any]) -> list[str]:
    """The settings of vLLM's logged ``'speculative_config': {…}`` (the non-default args;
    ``memprof.core.speculative.speculative_settings``) where no serve command set them, or the
    note that says what is not modelled."""
    if "num_speculative_tokens" in settings:
        return []
    try:
        got, why = speculative_settings(conf)
    except BadInput as exc:
        return [f"the log's speculative_config not read: {exc.message}"]
    settings.update(got)
    return [f"the log's speculative_config is not modelled ({why})"] if why else []


def _take(d: dict[Any, Any], settings: dict[str, Any]) -> None:
    for k, v in d.items():
        fld = _CONFIG_KEYS.get(str(k))
        if fld is None or fld in settings or v is None:
            continue
        if fld == "dtype" and isinstance(v, str):
            v = v.removeprefix("torch.")
        kind = BY_FIELD[fld].kind  # how the settings table reads the field
        if kind in ("int", "tokens"):
            if isinstance(v, int) and not isinstance(v, bool):
                settings[fld] = v
        elif kind == "float":
            if isinstance(v, int | float) and not isinstance(v, bool):
                if not 0 <= v <= MAX_FIGURE["float"]:  # also nan; a 300-digit int
                    raise BadInput(f"the log's {k} = {str(v)[:40]} is not a plausible value",
                                   hint="the log is damaged or edited; pass the log as the "
                                   "engine wrote it")
                settings[fld] = float(v)
        elif kind == "bool":
            if isinstance(v, bool):
                settings[fld] = v
        elif isinstance(v, str):
            settings[fld] = v


def _command(line: str) -> tuple[str, str | None, dict[str, Any], str | None, str | None]:
    """A serve command quoted in a log line: what memprof can read of it (unknown flags are a
    note here, not an error: a log is evidence, not input), and the release the image's tag of
    a ``docker run`` command names."""
    from memprof.probes.serve_command import parse_tokens

    start = re.search(r"(?:\S+=\S+\s+)*(?:vllm serve|python[0-9.]* -m (?:vllm|sglang))|"
                      r"(?:sudo\s+)?" + _DOCKER_RUN.pattern, line)
    text = line[start.start():] if start else line
    text = re.split(r"\)\s*$|`", text)[0].rstrip().removesuffix("\\")
    try:
        tokens = [t for t in shlex.split(text) if t not in ("...", "…")]
    except ValueError:
        return text, None, {}, "the serve command in the log could not be split", None
    dropped: list[str] = []
    for _ in range(len(tokens) + 1):
        try:
            cmd = parse_tokens(tokens)
            # an image's release is the log's version (rebuild maps it, with its notes)
            got = {k: v for k, v in cmd.settings.items() if k != "engine_version"}
            return text, cmd.model, got, (
                f"flags of the logged command not read: {' '.join(dropped)}" if dropped
                else None), cmd.image_release
        except BadInput as exc:
            # the flag the error names: unknown, or with a value memprof cannot read
            bad = re.search(r"flag '([^']+)'|argument '([^']+)'|: (--?[A-Za-z][\w-]*): bad "
                            r"value|bad value .* for (--?[A-Za-z][\w-]*)", exc.message)
            # else the first of the command's flags the message names ("--speculative-config
            # is not JSON ('{method:ngram}')": the shell took the JSON's quotes)
            named = [bad.group(g) for g in range(1, 5) if bad.group(g)] if bad else [
                f for f in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", exc.message)
                if any(t.split("=")[0] == f for t in tokens)][:1]
            if not named:
                return text, None, {}, f"the serve command in the log: {exc.message}", None
            flag = named[0]
            i = next((k for k, t in enumerate(tokens) if t.split("=")[0] == flag or t == flag),
                     None)
            if i is None:
                return text, None, {}, f"the serve command in the log: {exc.message}", None
            dropped.append(flag)
            inline = "=" in tokens[i]
            del tokens[i]
            if i < len(tokens) and not tokens[i].startswith("-") and not inline:
                del tokens[i]  # its value
    return text, None, {}, None, None

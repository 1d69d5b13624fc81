"""Fuzzing the start-up log reader: lines built around its real patterns, with extreme numbers
(hundreds of digits, 1e400, nan, commas, long decimals). Nothing may crash (exit 70): a figure
is read, skipped as unreadable, or refused as a bad input (``error:`` + ``hint:``, exit 2).

Seeds are fixed (``derandomize``); the budget is ``MEMPROF_FUZZ_EXAMPLES`` (default 600 for the
parser, an eighth of it for the whole ``explain`` command, which estimates each case).
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import MAX_FIGURE, PATTERNS, parse_log

EXAMPLES = int(os.environ.get("MEMPROF_FUZZ_EXAMPLES", "600"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
FUZZ_CLI = settings(FUZZ, max_examples=max(EXAMPLES // 8, 10))

# one line per pattern of memprof.probes.startup_log (and the settings lines), "{}" = a number
TEMPLATES = (
    "Loading model weights took {} GiB", "Model loading took {} GiB and 3.1 seconds",
    "model weights take {}GiB; non_torch_memory takes {}GiB; PyTorch activation peak memory "
    "takes {}GiB; the rest of the memory reserved for KV Cache is {}GiB.",
    "weights memory: {} GiB", "Total non-torch memory: {} GiB",
    "torch peak memory increase: {} GiB",
    "peak_torch_memory={}GiB initial_memory_usage={}GiB total_gpu_memory={}GiB",
    "gpu_memory_utilization={}", "Available KV cache memory: {} GiB", "kv_cache_size={}GiB",
    "larger than the available KV cache memory ({} GiB)", "Estimated CUDA graph memory: {} GiB",
    "Graph capturing finished in 5 secs, took {} GiB", "# GPU blocks: {}, # CPU blocks: {}",
    "num_gpu_blocks is: {}", "GPU KV cache size: {} tokens",
    "maximum number of tokens that can be stored in KV cache ({})",
    "Maximum concurrency for {} tokens per request: {}x", "estimated maximum model length is {}",
    "max seq len ({})", "CUDA out of memory. Tried to allocate {} GiB. GPU 0 has a total "
    "capacity of {} GiB of which {} GiB is free.",
    "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem={} GB, mem "
    "usage={} GB.", "KV Cache is allocated. #tokens: {}, K size: {} GB, V size: {} GB",
    "KV Cache is allocated. #tokens: {}, KV size: {} GB", "Memory pool end. avail mem={} GB",
    "Capture cuda graph end. Time elapsed: 3 s. mem usage={} GB", "max_total_num_tokens={}",
    "mem_fraction_static={}",
    "non-default args: {{'model': 'qwen3-0.6b', 'tensor_parallel_size': {}, 'max_model_len': {},"
    " 'gpu_memory_utilization': {}, 'block_size': {}}}",
    "server_args=ServerArgs(model_path='qwen3-0.6b', tp_size={}, context_length={}, "
    "mem_fraction_static={}, chunked_prefill_size={})",
    "vllm serve qwen3-0.6b -tp {} --max-model-len {} --gpu-memory-utilization {}",
)
HEADERS = ("INFO [gpu_worker.py:1] vLLM API server version 0.11.0", "INFO V1 LLM engine (v0.9.2)",
           "INFO worker.py:12] # GPU blocks: 100", "[2025] sglang server started", "")

_digits = st.integers(min_value=1, max_value=600).map(lambda n: "9" * n)
NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10**500).map(str),
    st.integers(min_value=0, max_value=10**30).map(lambda n: f"{n:,}"),
    _digits, _digits.map(lambda d: d + "." + d), _digits.map(lambda d: "0." + d),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e400", "-1", "0", "0.0", "nan", "inf", "1e-400", "1.2.3", "00000000001",
                     "18446744073709551617", str(2**63), "None"]),
)


@st.composite
def logs(draw: st.DrawFn) -> str:
    lines = [draw(st.sampled_from(HEADERS))]
    for template in draw(st.lists(st.sampled_from(TEMPLATES), min_size=1, max_size=8)):
        numbers = [draw(NUMBERS) for _ in range(template.count("{}"))]
        lines.append("INFO " + template.format(*numbers))
    return "\n".join(lines) + "\n"


@FUZZ
@given(logs())
def test_parse_and_rebuild_never_crash(text: str) -> None:
    try:
        log = parse_log(text)
    except BadInput as exc:
        assert exc.message and exc.hint
        return
    signed = {p.key for p in PATTERNS if p.sign}  # a budget's remainder may be below zero
    for f in log.figures.values():  # every figure read is a finite number within its cap
        cap = max(MAX_FIGURE.values())
        assert (-cap if f.key in signed else 0) <= f.value <= cap
    try:
        rebuild(log, model="qwen3-0.6b", gpu="H100", gpu_memory=None)
        rebuild(log, model=None, gpu=None, gpu_memory=None)
    except BadInput as exc:
        assert exc.message and exc.hint


def _explain(path: Path, *flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["explain", str(path), "-f", "json", *flags])
    return code, out.getvalue(), err.getvalue()


def _contract(code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), err
    assert "Traceback" not in out + err and "internal error" not in err, err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: "), err
        assert lines[1].startswith("hint: "), err


@FUZZ_CLI
@given(logs(), st.booleans())
def test_explain_never_crashes(tmp_path_factory: pytest.TempPathFactory, text: str,
                               with_flags: bool) -> None:
    path = tmp_path_factory.mktemp("log") / "fuzz.log"
    path.write_text(text, encoding="utf-8")
    flags = ("--model", "qwen3-0.6b", "--gpu", "H100") if with_flags else ()
    _contract(*_explain(path, *flags))


# --- the reproducers of the review ------------------------------------------------------------

NINES = "9" * 400


@pytest.mark.parametrize(("line", "shown"), [
    (f"# GPU blocks: {NINES}", "# GPU blocks: 999"),
    (f"Maximum concurrency for 4096 tokens per request: {NINES}x", "Maximum concurrency"),
    (f"GPU KV cache size: {NINES} tokens", "GPU KV cache size"),
    ("Model loading took 1" + "0" * 400 + " GiB", "Model loading took 1000"),
    ("Available KV cache memory: 2000000 GiB", "Available KV cache memory: 2000000 GiB"),
])
def test_absurd_figures_are_bad_input(tmp_path: Path, line: str, shown: str) -> None:
    path = tmp_path / "big.log"
    path.write_text(f"INFO vllm serve qwen3-0.6b\nINFO [gpu_worker.py:1] {line}\n")
    code, out, err = _explain(path, "--gpu", "H100")
    _contract(code, out, err)
    assert code == 2
    assert err.startswith(f"error: big.log line 2: '{shown}") and "not a plausible figure" in err


def test_a_number_a_float_cannot_hold_is_not_read(tmp_path: Path) -> None:
    # "1e400" is not how the engines print a size: the line is not a figure, the others are read
    log = parse_log("INFO Available KV cache memory: 1e400 GiB\nINFO GPU KV cache size: 1,024 "
                    "tokens\n")
    assert "available_kv_bytes" not in log.figures
    assert log.get("kv_tokens") == 1024


def test_plausible_figures_are_kept() -> None:
    log = parse_log("INFO Model loading took 700.5 GiB\nINFO GPU KV cache size: 1,000,000,000 "
                    "tokens\nINFO Maximum concurrency for 4,096 tokens per request: 12345.6x\n")
    assert log.get("weights_bytes") == round(700.5 * (1 << 30))
    assert log.get("kv_tokens") == 1e9
    assert log.get("max_concurrency") == 12345.6


def test_why_a_figure_is_refused_is_said() -> None:
    with pytest.raises(BadInput, match=r"line 1: .* \(a number of 251 characters\)"):
        parse_log("INFO peak_torch_memory=0." + "9" * 249 + "GiB\n")
    with pytest.raises(BadInput, match=r"\(more than 1,099,511,627,776\)"):
        parse_log("INFO GPU KV cache size: 1,099,511,627,777 tokens\n")
    with pytest.raises(BadInput, match="the log's gpu_memory_utilization = 2059162460"):
        parse_log("INFO vllm non-default args: {'model': 'qwen3-0.6b', "
                  "'gpu_memory_utilization': " + "20591624603" * 30 + "}\n")

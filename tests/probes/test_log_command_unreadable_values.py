"""A serve command quoted in a log with a flag whose value memprof cannot read
(``memprof/probes/startup_log.py`` ``_command``): the flag is left out with a note and the rest of
the command (the model above all) is still read; a log is evidence, not input. Before, a message
that named the flag in a form the reader did not list ("--speculative-config is not JSON", the
shell having taken the JSON's quotes) dropped the whole command, and explain then said the log
names no model."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.cli import run
from memprof.probes.startup_log import parse_log

FIGURES = ("INFO 07-20 10:00:00 [gpu_model_runner.py:1770] Model loading took 15.27 GiB and 3.2 "
           "seconds\n"
           "INFO 07-20 10:00:05 [gpu_worker.py:232] Available KV cache memory: 20.00 GiB\n"
           "INFO 07-20 10:00:05 [kv_cache_utils.py:716] GPU KV cache size: 145,000 tokens\n")


@pytest.mark.parametrize("flag", [
    '--speculative-config {"method":"ngram"}',  # the shell leaves {method:ngram}: not JSON
    "--max-model-len abc", "--tensor-parallel-size two", "--frobnicate 3",
])
def test_the_unreadable_flag_is_left_out_and_the_rest_read(flag: str) -> None:
    log = parse_log(f"vllm serve Qwen/Qwen3-8B --max-num-seqs 64 {flag}\n" + FIGURES)
    assert log.model == "Qwen/Qwen3-8B"
    assert log.settings.get("max_num_seqs") == 64
    name = flag.split()[0]
    assert any("not read" in n and name in n for n in log.notes), log.notes


_FLAGS = st.sampled_from(["--speculative-config", "--max-model-len", "-tp", "--kv-cache-dtype",
                          "--hf-overrides", "-O", "--gpu-memory-utilization", "--block-size",
                          "--frobnicate", "--quantization", "--max-num-seqs", "--dtype"])
_VALUES = st.sampled_from(["{method:ngram}", "{", "}", "10k", "1e400", "-1", "nan", "auto",
                           "fp9", "x" * 200, "9" * 60, "'", '"', "=", "0.9", "[1,2", "--"])


@settings(max_examples=int(os.environ.get("MEMPROF_FUZZ_EXAMPLES", "600")) // 8, deadline=None,
          derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_FLAGS, _VALUES), min_size=1, max_size=5))
def test_fuzz_logged_command_values(pairs: list[tuple[str, str]]) -> None:
    """Any flag values in the logged command: explain fits, refuses with error + hint (exit 2),
    never crashes (exit 70)."""
    cmd = "vllm serve Qwen/Qwen3-8B " + " ".join(f"{f} {v}" for f, v in pairs)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pasted.log"
        path.write_text(cmd + "\n" + FIGURES, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(["explain", str(path), "--gpu", "L40S"])
    assert code in (0, 1, 2), err.getvalue()
    if code == 2:
        first, _, rest = err.getvalue().partition("\n")
        assert first.startswith("error: ") and rest.startswith("hint: "), err.getvalue()

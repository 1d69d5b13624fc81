"""Serve settings a log quotes outside a serve command (memprof/probes/startup_log.py): a list of
quoted arguments (published row 118's quote, a Kubernetes or Python argument list) and
lm-evaluation-harness's ``--model vllm --model_args k=v,...`` (row 802's quote: the keyword
arguments of vLLM's LLM class). Bad forms are skipped or refused, never a crash."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.probes.startup_log import parse_log

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 1 has a "
       "total capacity of 93.02 GiB of which 1.18 GiB is free.")
ROW_118 = '''"--gpu-memory-utilization=0.99", 
  "--max-model-len=1000", # context length # reduce kv cache size.
  "--tensor-parallel-size=2",
  "--kv-cache-dtype=fp8" #dynamic quantization of the KV cache
...
'''  # noqa: W291 - the quote's trailing space
ROW_802 = ("VLLM_MLA_DISABLE=0 VLLM_CUDA_MEM_ALIGN_KV_CACHE=0 lm_eval --model vllm --model_args "
           "pretrained=/data/nm/models/DeepSeek-R1,tensor_parallel_size=8,dtype=auto,"
           "gpu_memory_utilization=0.9,trust_remote_code=True,max_model_len=16384,"
           "enforce_eager=False --task gsm8k --num_fewshot=5 --limit 100\n"
           "INFO 02-03 14:26:12 executor_base.py:110] # CUDA blocks: 30218, # CPU blocks: 3819")


def test_row_118_quoted_argument_list() -> None:
    log = parse_log(ROW_118 + OOM)
    assert log.settings == {"gpu_memory_utilization": 0.99, "max_model_len": 1000, "tp": 2,
                            "kv_cache_dtype": "fp8"}


def test_yaml_args_with_flag_and_value_items() -> None:
    text = ('args:\n  - "--tensor-parallel-size"\n  - "4"\n  - "--max-num-seqs"\n  - "32"\n'
            + OOM)
    assert parse_log(text).settings == {"tp": 4, "max_num_seqs": 32}
    text = "['--max-model-len', '8192', '--enforce-eager']\n" + OOM
    assert parse_log(text).settings == {"max_model_len": 8192, "enforce_eager": True}


def test_quoted_strings_that_are_no_flags_are_not_read() -> None:
    log = parse_log('"hello", "world"\n"4"\n' + OOM)
    assert log.settings == {}


def test_row_802_lm_eval_model_args() -> None:
    log = parse_log(ROW_802)
    assert log.model == "/data/nm/models/DeepSeek-R1"
    assert log.settings == {"tp": 8, "dtype": "auto", "gpu_memory_utilization": 0.9,
                            "max_model_len": 16384, "enforce_eager": False,
                            "entrypoint": "llm"}
    assert log.notes == ()


def test_lm_eval_of_another_backend_is_not_read() -> None:
    log = parse_log(ROW_802.replace("--model vllm", "--model hf"))
    assert "tp" not in log.settings


# published row 1951: a sentence that quotes two docker-compose commands, the image's first and
# the one whose start the log lines after it come from
ROW_1951 = ('Docker runs vllm openai: v0.8.5 deployment command:  "command: --model '
            '/models/Qwen3/Qwen3-30B-A3B --enable-reasoning --reasoning-parser deepseek_r1 '
            '--tensor_parallel_size 4"  Can be deployed and started normally, switch the image '
            'version to v0.11.0, and run the command "command: --model /models/Qwen3/Qwen3-30B-'
            'A3B --reasoning-parser deepseek_r1 --tensor_parallel_size 4"  It will report that '
            'the graphics card memory is insufficient, and the error log is:\n'
            "(Worker_TP0 pid=260) INFO 10-29 19:57:20 [gpu_model_runner.py:3480] Graph capturing "
            "finished in 28 secs, took 1.88 GiB\n")


def test_a_command_quoted_in_a_sentence_ends_at_its_closing_quote() -> None:
    """The quoted compose ``command:`` is read as the image's vllm serve arguments; the prose
    after its closing quote is not (it made the command unsplittable); of two quoted commands
    the last is read, and the note says so."""
    log = parse_log(ROW_1951)
    assert log.model == "/models/Qwen3/Qwen3-30B-A3B"
    assert log.settings == {"tp": 4}
    assert any("quotes 2 serve commands; the last" in n for n in log.notes)
    one = ROW_1951.replace("--tensor_parallel_size 4\"  It", "--max-model-len 8192\"  It")
    assert parse_log(one).settings == {"max_model_len": 8192}
    alone = ('he ran "--model M --tensor-parallel-size 2" and then --max-model-len 99 '
             'failed\n' + OOM)
    assert parse_log(alone).settings == {"tp": 2}


PIECES = ['"--tensor-parallel-size"', '"2"', '"--max-model-len=1e400"', "'--kv-cache-dtype'",
          '"x"', '"--no-such-flag"', '"--max-model-len=10k"', '"-tp"', '""', '"None"', "- ",
          ", ", "#", '"--gpu-memory-utilization=' + "9" * 400 + '"']
LM_EVAL = ["tensor_parallel_size=8", "tensor_parallel_size=x", "max_model_len=" + "9" * 300,
           "gpu_memory_utilization=nan", "pretrained=", "=", ",", "dtype=", "enforce_eager=2",
           "gpu_memory_utilization=1e999", "max_model_len=-1"]


@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4), max_size=6),
       st.lists(st.sampled_from(LM_EVAL), max_size=5))
def test_fuzz_quoted_lists_and_model_args(rows: list[list[str]], pairs: list[str]) -> None:
    text = "\n".join("".join(r) for r in rows)
    text += "\nlm_eval --model vllm --model_args " + ",".join(pairs) + " --task x\n" + OOM
    with contextlib.suppress(BadInput):
        log = parse_log(text)
        for key, value in log.settings.items():
            assert value is not None, key


def test_long_lines_of_the_new_forms_read_in_linear_time() -> None:
    """Lines built to make a backtracking pattern quadratic (a quote, then 50,000 spaces; 10,000
    'lm_eval' or 'docker run' words) read in well under a second each."""
    import time

    for text in ('"a"' + " " * 50_000 + "x", '"' * 99_999, "lm_eval " * 10_000,
                 '"--model m --tp 2 ' * 3_000, '--model "' * 5_000,
                 ' --tp 2 ' + '--model "' * 5_000,
                 "docker run " * 8_000, "lm_eval --model " * 6_000):
        start = time.perf_counter()
        with contextlib.suppress(BadInput):
            parse_log(text + "\n" + OOM)
        assert time.perf_counter() - start < 2.0, text[:20]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(["--model", "--model-path", " ", "=", "m", '"', "--tp", "2",
                                 "-x", "\t", "--max-model-len", "--"]), max_size=30))
def test_args_from_model_is_the_plain_search(parts: list[str]) -> None:
    """The search cut at the line's last flag finds what the pattern finds on the whole line."""
    import re

    from memprof.probes.startup_log import _ARGS_FROM_MODEL, args_from_model

    text = "".join(parts)
    m = re.search(_ARGS_FROM_MODEL, text)
    assert args_from_model(text) == (m.group(1) if m else None)

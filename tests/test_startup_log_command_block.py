"""A serve command a document writes one flag a line without continuation backslashes
(``memprof/probes/startup_log.py`` ``_shell_lines``), as published row 1456's report does, is
read as the one command it is."""

from __future__ import annotations

from memprof.probes.startup_log import parse_log

LOAD = ("[2026-07-07 09:27:00] Load weight end. elapsed=136.72 s, type=Qwen3MoeForCausalLM, "
        "avail mem=37.35 GB, mem usage=56.89 GB.")
KV = ("[2026-07-07 09:27:00] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4096, "
      "K size: 0.19 GB, V size: 0.19 GB")
BLOCK = ("python -m sglang.launch_server\n"
         "  --model-path Qwen/Qwen3-30B-A3B\n"
         "  --host 0.0.0.0\n"
         "  --mem-fraction-static 0.90\n"
         "  --max-total-tokens 4096\n"
         "  --disable-cuda-graph\n")


def test_a_command_block_one_flag_a_line_is_one_command() -> None:
    log = parse_log(BLOCK + LOAD + "\n" + KV + "\n")
    assert log.model == "Qwen/Qwen3-30B-A3B"
    assert log.settings["mem_fraction_static"] == 0.9
    assert log.settings["max_total_tokens"] == 4096
    assert log.settings["enforce_eager"] is True


def test_the_block_ends_at_the_first_line_that_is_no_indented_flag() -> None:
    text = BLOCK + LOAD + "\n  --tp-size 4\n" + KV + "\n"
    log = parse_log(text)
    assert "tp" not in log.settings  # after a log line: not the command's


def test_unindented_flags_after_a_command_are_not_joined() -> None:
    text = "python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B\n--tp-size 4\n" + LOAD
    log = parse_log(text)
    assert log.model == "Qwen/Qwen3-30B-A3B"
    assert "tp" not in log.settings


def test_backslash_continuations_still_read() -> None:
    text = ("python -m sglang.launch_server \\\n  --model-path Qwen/Qwen3-30B-A3B \\\n"
            "  --tp-size 2\n" + LOAD + "\n")
    log = parse_log(text)
    assert log.settings["tp"] == 2

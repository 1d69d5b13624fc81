"""SGLang log lines ``memprof explain`` reads beyond ServerArgs (``memprof/probes/sglang_log.py``):
an attention backend's page-size override (SGLang ``python/sglang/srt/server_args.py``
``_handle_attention_backend_compatibility``), each on the verbatim line the engine prints."""

from __future__ import annotations

import pytest

from memprof.probes.sglang_log import read_sglang

# published row 1451: SGLang main of 2026-04-27 on a B200, no --page-size
TRTLLM_MHA = ("[2026-04-27 02:35:53] TensorRT-LLM MHA only supports page_size of 16, 32 or 64, "
              "changing page_size from None to 64.")


@pytest.mark.parametrize(("line", "page"), [
    (TRTLLM_MHA, 64),
    ("[2025-09-01 10:00:00] TensorRT-LLM MLA only supports page_size of 32 or 64, changing "
     "page_size from 1 to 64.", 64),
    ("[2025-09-01 10:00:00] FlashMLA only supports a page_size of 64, change page_size to 64.",
     64),
    ("[2026-01-05 10:00:00] Intel XPU attention backend only supports page_size of 32, 64 or "
     "128, changing page_size from 1 to 128.", 128),
])
def test_a_backends_page_size_override_is_the_page_size(line: str, page: int) -> None:
    settings, _ = read_sglang([line], "sglang", {"engine_version": "0.5.10"})
    assert settings["block_size"] == page


def test_the_override_replaces_the_commands_page_size() -> None:
    settings, _ = read_sglang([TRTLLM_MHA], "sglang",
                              {"engine_version": "0.5.10", "block_size": 1})
    assert settings["block_size"] == 64


def test_server_args_page_size_wins_over_the_override() -> None:
    """ServerArgs is printed after the override ran: its page_size is the one used."""
    lines = [TRTLLM_MHA, "[2026-04-27 02:35:54] server_args=ServerArgs(model_path='Qwen/Qwen3-8B'"
             ", page_size=32, tp_size=1)"]
    settings, _ = read_sglang(lines, "sglang", {"engine_version": "0.5.10"})
    assert settings["block_size"] == 32


def test_no_override_line_leaves_the_page_size_unset() -> None:
    lines = ["[2026-04-27 02:35:53] Attention backend not specified. Use trtllm_mha backend by "
             "default."]
    settings, _ = read_sglang(lines, "sglang", {"engine_version": "0.5.10"})
    assert "block_size" not in settings


def test_a_vllm_log_is_not_read() -> None:
    settings, notes = read_sglang([TRTLLM_MHA], "vllm", {})
    assert settings == {} and notes == []


# published row 1454: two MI355X, SGLang 0.5.17, a quote whose stamps keep the time alone
TP_RANKS = [
    "[01:40:16 TP0] Load weight end. elapsed=0.30 s, type=Qwen3ForCausalLM, avail mem=285.65 GB, "
    "mem usage=0.61 GB.",
    "[01:40:16 TP1] Load weight end. elapsed=0.30 s, ...      mem usage=0.61 GB.",
]


@pytest.mark.parametrize("stamp", ["01:40:16", "2026-04-10 01:40:16", "2026-04-10 01:40:16.123"])
def test_rank_prefixes_give_the_tp_size_whatever_the_stamp(stamp: str) -> None:
    lines = [ln.replace("01:40:16", stamp) for ln in TP_RANKS]
    settings, notes = read_sglang(lines, "sglang", {"engine_version": "0.5.17"})
    assert settings["tp"] == 2
    assert any("TP ranks up to TP1" in n for n in notes)


def test_a_dp_rank_in_the_prefix_leaves_tp_unset() -> None:
    lines = ["[01:40:16 DP1 TP0] Load weight end. elapsed=0.30 s, mem usage=0.61 GB."]
    settings, _ = read_sglang(lines, "sglang", {"engine_version": "0.5.17"})
    assert "tp" not in settings


def test_a_bracketed_clock_that_is_no_stamp_is_not_a_rank() -> None:
    lines = ["[99:99:99 TP3] not a time"]
    settings, _ = read_sglang(lines, "sglang", {"engine_version": "0.5.17"})
    assert "tp" not in settings

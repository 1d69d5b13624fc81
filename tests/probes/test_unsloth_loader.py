"""Unsloth's vLLM loader lines (unsloth_zoo load_vllm) and a notebook cell's keyword passed by
name: the engine settings of an Unsloth GRPO start (published rows 1301-1303)."""

from __future__ import annotations

from memprof.probes.startup_log import parse_log
from memprof.probes.unsloth_loader import unsloth_settings

# published row 1301's lines, as its notebook prints them (Unsloth 2025.2.4, vLLM 0.7.1, a T4)
CELL = ("max_seq_length = 512 # Can increase for longer reasoning traces\n"
        "lora_rank = 32 # Larger rank = smarter, but slower\n"
        "    model_name = \"meta-llama/meta-Llama-3.1-8B-Instruct\",\n"
        "    max_seq_length = max_seq_length,\n"
        "    load_in_4bit = True, # False for LoRA 16bit\n"
        "    fast_inference = True, # Enable vLLM fast inference\n"
        "    max_lora_rank = lora_rank,\n"
        "    gpu_memory_utilization = 0.6, # Reduce if out of memory\n")
LOADER = ("Unsloth: vLLM loading unsloth/meta-llama-3.1-8b-instruct-bnb-4bit with actual GPU "
          "utilization = 59.59%\n"
          "Unsloth: Your GPU has CUDA compute capability 7.5 with VRAM = 14.74 GB.\n"
          "Unsloth: Using conservativeness = 1.0. Chunked prefill tokens = 512. Num Sequences = "
          "160.\n"
          "Unsloth: vLLM's KV Cache can use up to 2.61 GB. Also swap space = 2 GB.\n")
ENGINE = ("INFO 02-06 14:27:55 model_runner.py:1116] Loading model weights took 5.3541 GB\n"
          "INFO 02-06 14:27:55 punica_selector.py:16] Using PunicaWrapperGPU.\n"
          "INFO 02-06 14:28:01 worker.py:266] the current vLLM instance can use total_gpu_memory "
          "(14.74GiB) x gpu_memory_utilization (0.60) = 8.78GiB\n")


def test_the_loader_lines_give_the_engine_arguments() -> None:
    log = parse_log(CELL + LOADER + ENGINE)
    assert log.settings["gpu_memory_utilization"] == 0.5959  # not the cell's 0.6 nor the 0.60
    assert log.settings["max_num_batched_tokens"] == 512
    assert log.settings["max_num_seqs"] == 160
    assert log.settings["entrypoint"] == "llm"  # load_vllm builds LLM(**engine_args)
    assert any("unsloth_zoo load_vllm" in n for n in log.notes)


def test_a_keyword_passed_by_name_takes_the_bound_integer() -> None:
    log = parse_log(CELL + LOADER + ENGINE)
    assert log.settings["enable_lora"] is True  # 'Using PunicaWrapperGPU.'
    assert log.settings["max_lora_rank"] == 32
    assert any(n.startswith("LoRA is on") for n in log.notes)
    assert "max_loras 1" in next(n for n in log.notes if n.startswith("LoRA's sizes"))
    assert "max_lora_rank 16" not in " ".join(log.notes)


def test_an_unbound_name_is_not_read() -> None:
    log = parse_log(CELL.replace("lora_rank = 32 # Larger rank = smarter, but slower\n", "")
                    + ENGINE)
    assert "max_lora_rank" not in log.settings
    assert "max_lora_rank 16" in next(n for n in log.notes if n.startswith("LoRA's sizes"))


def test_a_retry_lowers_the_sequences_and_the_utilization() -> None:
    settings: dict[str, object] = {}
    notes = unsloth_settings(
        (LOADER + "Unsloth: Retrying vLLM to process 120 sequences and 512 tokens in tandem.\n"
         ).splitlines(), settings)
    assert settings["max_num_seqs"] == 120
    assert settings["gpu_memory_utilization"] == round(0.5959 * 0.85, 6)
    assert len(notes) == 2


def test_no_loader_line_changes_nothing() -> None:
    settings: dict[str, object] = {"max_num_seqs": 8}
    assert unsloth_settings(ENGINE.splitlines(), settings) == []
    assert settings == {"max_num_seqs": 8}

"""vLLM lines that name a setting where no command, Namespace or engine config line does
(``memprof.probes.startup_log``): the kernel line of a quantised linear method ("Using
MarlinLinearKernel for GPTQMarlinLinearMethod", gptq_marlin.py, "[gptq_marlin.py:200]" at 0.6.5;
"... for AutoGPTQLinearMethod", auto_gptq.py at 0.24.0) names ``--quantization``; the engine
line's ``quantization=auto_gptq`` is GPTQ on Marlin; "Using PunicaWrapperGPU." says LoRA is on."""

from __future__ import annotations

from memprof.probes.startup_log import parse_log

# published row 1305's lines, verbatim (a V0 0.6.5 log of the LLM class)
_KERNEL = ("INFO 12-22 10:55:31 gptq_marlin.py:200] Using MarlinLinearKernel for "
           "GPTQMarlinLinearMethod\n")
_LOAD = "INFO 12-22 10:55:34 model_runner.py:1097] Loading model weights took 8.5107 GB\n"
_ENGINE = ("INFO 12-22 10:55:30 llm_engine.py:249] Initializing an LLM engine (v0.6.5) with "
           "config: model='m', dtype=torch.float16, max_seq_len=2048, "
           "quantization={q}, enforce_eager=False\n")


def test_the_kernel_line_names_gptq_marlin() -> None:
    log = parse_log(_KERNEL + _LOAD)
    assert log.settings["quantization"] == "gptq_marlin"
    assert any("GPTQMarlinLinearMethod" in n and "4-bit, group 128" in n for n in log.notes)


def test_without_the_kernel_line_no_quantization_is_read() -> None:
    log = parse_log(_LOAD)
    assert "quantization" not in log.settings


def test_the_engine_config_line_wins_over_the_kernel_line() -> None:
    # the config line is the setting; the kernel line only stands in for it where it is cut
    log = parse_log(_ENGINE.format(q="awq_marlin") + _KERNEL + _LOAD)
    assert log.settings["quantization"] == "awq_marlin"
    assert not any("GPTQMarlinLinearMethod" in n for n in log.notes)


def test_another_method_kernel_line_is_not_read() -> None:
    # a linear method memprof has no row for names no --quantization here
    log = parse_log("INFO 12-22 10:55:31 x.py:1] Using MarlinLinearKernel for "
                    "SomeOtherLinearMethod\n" + _LOAD)
    assert "quantization" not in log.settings


# published row 1206's lines (vLLM 0.24.0), cut to the fields read
_AUTO_GPTQ_ENGINE = ("(EngineCore pid=39450) INFO 07-07 09:29:31 [core.py:114] Initializing a V1 "
                     "LLM engine (v0.24.0) with config: model='TechxGenus/Meta-Llama-3-8B-"
                     "Instruct-GPTQ', dtype=torch.float16, max_seq_len=4096, "
                     "quantization=auto_gptq, quantization_config=None, enforce_eager=False\n")
_AUTO_GPTQ_KERNEL = ("(EngineCore pid=39450) INFO 07-07 09:29:33 [auto_gptq.py:355] Using "
                     "MarlinLinearKernel for AutoGPTQLinearMethod\n")
_V1_LOAD = ("(EngineCore pid=39450) INFO 07-07 09:29:37 [model_runner.py:302] Model loading "
            "took 5.33 GiB and 5.098919 seconds\n")


def test_auto_gptq_on_the_engine_line_is_gptq_on_marlin() -> None:
    log = parse_log(_AUTO_GPTQ_ENGINE + _V1_LOAD)
    assert log.settings["quantization"] == "gptq_marlin"
    assert any("quantization=auto_gptq" in n for n in log.notes)


def test_the_auto_gptq_kernel_line_alone_names_gptq_marlin() -> None:
    log = parse_log(_AUTO_GPTQ_KERNEL + _V1_LOAD)
    assert log.settings["quantization"] == "gptq_marlin"


def test_another_engine_line_method_passes_through() -> None:
    log = parse_log(_AUTO_GPTQ_ENGINE.replace("auto_gptq", "awq_marlin") + _V1_LOAD)
    assert log.settings["quantization"] == "awq_marlin"
    assert not any("is read as --quantization" in n for n in log.notes)


# vLLM's Punica line (get_punica_wrapper, lora/punica_wrapper/punica_selector.py), verbatim from
# published row 1301 (0.7.1)
_PUNICA = "INFO 02-06 14:27:55 punica_selector.py:16] Using PunicaWrapperGPU.\n"


def test_the_punica_line_turns_lora_on_with_a_stated_assumption() -> None:
    log = parse_log(_PUNICA + _LOAD)
    assert log.settings["enable_lora"] is True
    assert "max_lora_rank" not in log.settings  # the default, and the note says so
    assert any("max_lora_rank 16" in n for n in log.notes)


def test_a_namespace_that_gives_lora_wins_over_the_punica_line() -> None:
    ns = ("INFO 02-06 14:27:00 api_server.py:840] args: Namespace(model='m', "
          "enable_lora=True, max_loras=2, max_lora_rank=64)\n")
    log = parse_log(ns + _PUNICA + _LOAD)
    assert log.settings["max_lora_rank"] == 64
    assert log.settings["max_loras"] == 2
    assert not any("PunicaWrapper" in n for n in log.notes)


def test_no_punica_line_no_lora() -> None:
    assert "enable_lora" not in parse_log(_LOAD).settings

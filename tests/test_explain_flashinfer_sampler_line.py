"""A log that samples with FlashInfer ("Using FlashInfer for top-p & top-k sampling.", vLLM's
``v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``; or
``VLLM_USE_FLASHINFER_SAMPLER=1`` on its command) at a release or engine where memprof does not
model that sampler (``memprof.core.terms.activation.check_flashinfer_sampler``: vLLM 0.8.0-0.11.0
V1 only): explain still explains the log, with the sampler memprof models there and a note
(``memprof.probes.log_deployment._logged_flashinfer_sampler``); where memprof models it, the log's
sampler is kept; the user's own ``--vllm-use-flashinfer-sampler 1`` is still refused there."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from memprof.cli import run
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import parse_log

SAMPLER = ("(EngineCore pid=131) INFO 09-20 22:23:27 [topk_topp_sampler.py:62] Using FlashInfer "
           "for top-p & top-k sampling.\n")
FIGURES = ("(EngineCore pid=131) INFO 09-20 22:23:27 [gpu_model_runner.py:1] Model loading took "
           "7.64 GiB memory and 71.5 seconds\n"
           "(EngineCore pid=131) INFO 09-20 22:25:05 [gpu_worker.py:1] Available KV cache memory: "
           "50.00 GiB\n")


def _log(release: str) -> str:
    return (f"(APIServer pid=1) INFO 09-20 22:21:57 [api_server.py:1] vLLM API server version "
            f"{release}\n" + SAMPLER + FIGURES)


def test_a_release_memprof_does_not_model_it_at_drops_it_with_a_note() -> None:
    rb = rebuild(parse_log(_log("0.29.0")), model="qwen3-4b", gpu="H100", gpu_memory=None)
    assert rb.deployment.engine_version == "0.29.0"
    assert rb.deployment.vllm_use_flashinfer_sampler is None
    note = next(n for n in rb.notes if "samples with FlashInfer" in n)
    assert "0.8.0 to 0.11.0" in note and "0.29.0" in note


def test_from_0_33_0_the_note_says_the_default_already_takes_it() -> None:
    """0.33.0's Model Runner V2 warm-up pass samples with FlashInfer where the card supports it
    (memprof's default there: ``vllm_runner.v2_flashinfer_samples``), so the note says so
    instead of saying memprof leaves FlashInfer out."""
    rb = rebuild(parse_log(_log("0.33.0")), model="qwen3-4b", gpu="H100", gpu_memory=None)
    assert rb.deployment.vllm_use_flashinfer_sampler is None
    note = next(n for n in rb.notes if "samples with FlashInfer" in n)
    assert "memprof's default takes FlashInfer's sampler" in note and "leaves" not in note
    at_032 = rebuild(parse_log(_log("0.32.0")), model="qwen3-4b", gpu="H100", gpu_memory=None)
    assert any("leaves out here" in n for n in at_032.notes)


def test_a_release_memprof_models_it_at_keeps_it() -> None:
    rb = rebuild(parse_log(_log("0.10.1")), model="qwen3-4b", gpu="H100", gpu_memory=None)
    assert rb.deployment.vllm_use_flashinfer_sampler == 1
    assert not any("samples with FlashInfer" in n for n in rb.notes)


def test_v0_with_the_env_drops_it() -> None:
    text = ("VLLM_USE_V1=0 VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve Qwen/Qwen3-4B\n"
            "INFO 03-14 20:43:52 [executor_base.py:111] # cuda blocks: 5266, # CPU blocks: 954\n")
    rb = rebuild(parse_log(text), model="qwen3-4b", gpu="H100", gpu_memory=None,
                 overrides={"engine_version": "0.8.0"})
    assert rb.deployment.vllm_use_flashinfer_sampler is None
    assert any("samples with FlashInfer" in n and "V0" in n for n in rb.notes)


def test_the_users_flag_is_still_refused(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(_log("0.29.0"), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["explain", str(log), "-m", "qwen3-4b", "--gpu", "H100",
                    "--vllm-use-flashinfer-sampler", "1"])
    assert code == 2
    first, _, rest = err.getvalue().partition("\n")
    assert first.startswith("error: --vllm-use-flashinfer-sampler 1") and rest.startswith("hint: ")
    # without it, the log explains
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert run(["explain", str(log), "-m", "qwen3-4b", "--gpu", "H100"]) in (0, 1)

"""A vLLM log that runs ``--language-model-only`` (its "non-default args" key, its
``args: Namespace`` attribute or the flag on a quoted serve command): vLLM's
``vllm/config/multimodal.py`` (0.17.0, 0.27.1) ``MultiModalConfig.language_model_only`` sets every
modality's limit to 0, so explain reads it as ``--limit-mm-per-prompt`` with each of the
model's modalities at 0 and builds no vision tower
(``memprof.probes.log_deployment._logged_language_model_only``)."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import BadInput
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import parse_log

FIGURES = ("(EngineCore pid=2) INFO 08-12 04:45:57 [gpu_model_runner.py:5405] Model loading took "
           "27.67 GiB memory and 23.7 seconds\n"
           "(EngineCore pid=2) INFO 08-12 04:47:25 [gpu_worker.py:563] Available KV cache "
           "memory: 41.03 GiB\n")
BANNER = "(APIServer pid=1) INFO 08-12 04:45:16 [api_server.py:1] vLLM API server version 0.27.1\n"
MODEL = "Qwen/Qwen3.6-27B-FP8"  # a multimodal checkpoint (image and video)


@pytest.mark.parametrize("line", [
    "(APIServer pid=1) INFO 08-12 04:45:16 [api_utils.py:273] non-default args: {'model': "
    "'/m/Qwen3.6-27B-FP8', 'language_model_only': True, 'max_model_len': 4096}",
    "INFO 08-12 04:45:16 [api_server.py:1] args: Namespace(model='/m/Qwen3.6-27B-FP8', "
    "language_model_only=True, max_model_len=4096)",
    "$ vllm serve /m/Qwen3.6-27B-FP8 --max-model-len 4096 --language-model-only",
])
def test_each_line_form_sets_every_modality_to_zero(line: str) -> None:
    log = parse_log(BANNER + line + "\n" + FIGURES)
    assert log.language_model_only
    rb = rebuild(log, model=MODEL, gpu="H100", gpu_memory=None)
    assert json.loads(rb.deployment.limit_mm_per_prompt or "") == {"image": 0, "video": 0}
    assert any("--language-model-only" in n for n in rb.notes)


@pytest.mark.parametrize("line", [
    "(APIServer pid=1) INFO [api_utils.py:273] non-default args: {'language_model_only': False}",
    "INFO [api_server.py:1] args: Namespace(language_model_only=False, max_model_len=4096)",
    "$ vllm serve /m/Qwen3.6-27B-FP8 --language-model-only-not-a-flag 1",
])
def test_a_log_that_does_not_run_it_keeps_the_default_limits(line: str) -> None:
    log = parse_log(BANNER + line + "\n" + FIGURES)
    assert not log.language_model_only
    rb = rebuild(log, model=MODEL, gpu="H100", gpu_memory=None)
    assert rb.deployment.limit_mm_per_prompt is None


def test_a_text_only_model_is_left_as_it_is() -> None:
    line = "INFO [api_utils.py:273] non-default args: {'language_model_only': True}"
    rb = rebuild(parse_log(BANNER + line + "\n" + FIGURES), model="qwen3-4b", gpu="H100",
                 gpu_memory=None)
    assert rb.deployment.limit_mm_per_prompt is None


def test_the_users_own_limit_wins() -> None:
    line = "INFO [api_utils.py:273] non-default args: {'language_model_only': True}"
    rb = rebuild(parse_log(BANNER + line + "\n" + FIGURES), model=MODEL, gpu="H100",
                 gpu_memory=None, overrides={"limit_mm_per_prompt": '{"image": 1}'})
    assert rb.deployment.limit_mm_per_prompt == '{"image": 1}'


@pytest.mark.parametrize(("release", "refused"), [("0.16.0", True), ("0.17.0", False)])
def test_a_release_before_the_flag_is_refused(release: str, refused: bool) -> None:
    # vLLM's --language-model-only came in 0.17.0 (0.16.0 engine/arg_utils.py has none): a
    # release before it, as --engine-version gives it, cannot have run the logged flag
    line = "INFO [api_utils.py:273] non-default args: {'language_model_only': True}"
    log = parse_log(BANNER + line + "\n" + FIGURES)
    if not refused:
        rb = rebuild(log, model=MODEL, gpu="H100", gpu_memory=None,
                     overrides={"engine_version": release})
        assert json.loads(rb.deployment.limit_mm_per_prompt or "") == {"image": 0, "video": 0}
        return
    with pytest.raises(BadInput, match=f"not in vLLM {release}") as exc:
        rebuild(log, model=MODEL, gpu="H100", gpu_memory=None,
                overrides={"engine_version": release})
    assert "0.17.0" in (exc.value.hint or "")

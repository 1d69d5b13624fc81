"""A vLLM log whose run gave ``--hf-overrides`` (the "non-default args" pair
``'hf_overrides': {…}`` or the ``args: Namespace(…)`` attribute ``hf_overrides={…}``, a dict's
repr): vLLM updates the HF config with it before it resolves the architecture
(``vllm/config/model.py`` ``ModelConfig.hf_overrides``), so explain applies it as memprof's
``--hf-overrides`` (``memprof.core.models.config.with_overrides``) and says so
(``memprof.probes.startup_log.logged_hf_overrides``). The example is Qwen3-Reranker's model card:
Qwen3-8B's checkpoint served as ``Qwen3ForSequenceClassification`` with a score head cut from
its lm_head."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from memprof.cli import run
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import logged_hf_overrides, parse_log

RERANKER = {"architectures": ["Qwen3ForSequenceClassification"],
            "classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": True}
REPR = ("{'architectures': ['Qwen3ForSequenceClassification'], 'classifier_from_token': "
        "['no', 'yes'], 'is_original_qwen3_reranker': True}")
BANNER = "(APIServer pid=1) INFO 08-12 04:45:16 [api_server.py:1] vLLM API server version 0.33.0\n"
FIGURES = ("(EngineCore pid=2) INFO 08-12 04:45:57 [gpu_model_runner.py:1] Model loading took "
           "15.27 GiB memory and 23.7 seconds\n"
           "(EngineCore pid=2) INFO 08-12 04:47:25 [gpu_worker.py:1] Available KV cache "
           "memory: 50.00 GiB\n")
LINES = [
    "(APIServer pid=1) INFO 08-12 04:45:16 [api_utils.py:273] non-default args: {'model': "
    f"'Qwen/Qwen3-Reranker-8B', 'hf_overrides': {REPR}, 'max_model_len': 8192}}",
    "INFO 08-12 04:45:16 [api_server.py:1] args: Namespace(model='Qwen/Qwen3-Reranker-8B', "
    f"hf_overrides={REPR}, max_model_len=8192, enforce_eager=False)",
]


@pytest.mark.parametrize("line", LINES)
def test_each_line_form_gives_the_overrides_as_json(line: str) -> None:
    got = logged_hf_overrides(line)
    assert got is not None and json.loads(got) == RERANKER


@pytest.mark.parametrize("line", [
    "INFO args: Namespace(model='m', hf_overrides={}, max_model_len=8192)",  # vLLM's default
    "INFO non-default args: {'model': 'm', 'max_model_len': 8192}",
    "INFO non-default args: {'hf_overrides': {'architectures': ['Qwen3ForSeq ...",  # elided
    "INFO args: Namespace(model='m', my_hf_overrides={'a': 1})",
])
def test_a_line_without_whole_overrides_gives_none(line: str) -> None:
    assert logged_hf_overrides(line) is None


@pytest.mark.parametrize("line", LINES)
def test_explain_builds_the_overridden_model(line: str) -> None:
    log = parse_log(BANNER + line + "\n" + FIGURES)
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert json.loads(rb.deployment.hf_overrides or "") == RERANKER
    assert any("hf_overrides" in n and "--hf-overrides" in n for n in log.notes)


def test_the_users_own_overrides_win() -> None:
    log = parse_log(BANNER + LINES[0] + "\n" + FIGURES)
    mine = '{"max_position_embeddings": 8192}'
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None,
                 overrides={"hf_overrides": mine})
    assert rb.deployment.hf_overrides == mine


def _explain(path: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert run(["explain", str(path), "-m", "qwen3-8b", "--gpu", "H100"]) in (0, 1)
    return " ".join(out.getvalue().split())


def test_explain_sizes_the_reranker_not_the_plain_model(tmp_path: Path) -> None:
    """With the overrides the log's run is rebuilt as Qwen3ForSequenceClassification (the
    pooling runner's score head cut from the lm_head), and the output says the overrides were
    applied; the same log without them rebuilds the plain causal LM."""
    with_it, without = tmp_path / "rerank.log", tmp_path / "plain.log"
    with_it.write_text(BANNER + LINES[0] + "\n" + FIGURES, encoding="utf-8")
    without.write_text(BANNER + LINES[0].replace(f"'hf_overrides': {REPR}, ", "") + "\n"
                       + FIGURES, encoding="utf-8")
    rr, plain = _explain(with_it), _explain(without)
    assert "(Qwen3ForSequenceClassification," in rr and "applied as --hf-" in rr
    assert "(Qwen3ForCausalLM," in plain and "hf_overrides" not in plain


DUMP = ["(EngineCore pid=2) [transformers] Model config Qwen3Config {",
        '(EngineCore pid=2)   "max_position_embeddings": 262144,', "(EngineCore pid=2) }"]


def test_the_logged_overrides_and_the_dumps_positions_are_merged() -> None:
    """The log's non-default args give ``hf_overrides`` and its transformers dump gives the
    checkpoint's ``max_position_embeddings`` (262,144 against the bundled Qwen3-8B's 40,960):
    vLLM sees both (the dump is printed before ``get_config`` updates the config with
    ``hf_overrides``), so the rebuild carries both; a key the logged dict gives wins."""
    log = parse_log(BANNER + LINES[0] + "\n" + "\n".join(DUMP) + "\n" + FIGURES)
    assert log.config_positions == 262144
    rb = rebuild(log, model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert json.loads(rb.deployment.hf_overrides or "") == {**RERANKER,
                                                            "max_position_embeddings": 262144}
    assert any("max_position_embeddings 262,144" in n for n in rb.notes)
    own = LINES[0].replace("'is_original_qwen3_reranker': True}",
                           "'is_original_qwen3_reranker': True, "
                           "'max_position_embeddings': 32768}")
    rb = rebuild(parse_log(BANNER + own + "\n" + "\n".join(DUMP) + "\n" + FIGURES),
                 model="qwen3-8b", gpu="H100", gpu_memory=None)
    assert json.loads(rb.deployment.hf_overrides or "")["max_position_embeddings"] == 32768

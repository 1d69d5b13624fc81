"""vLLM's ``--hf-overrides`` merges a dict given for a sub-config (``text_config``,
``vision_config``, ...) into the checkpoint's sub-config key by key, from 0.11.1 on
(vllm/config/model.py ``_apply_dict_overrides`` / ``_update_nested``, 0.11.1 / 0.27.1 / 0.33.0;
0.11.0 ``config.update``s every key whole). A dict for any other key (``rope_scaling``) is set
whole at the top level; inside a sub-config nested dicts merge too. SGLang's
``--json-model-override-args`` (``config.update``) replaces every key whole."""

from __future__ import annotations

import contextlib
import io
import json

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import _model_spec
from memprof.core.models.config import merged_sub_configs, with_overrides
from memprof.core.models.load import load_config, load_model


def _cfg(model: str) -> dict:
    return load_config(model)[1]


def test_a_text_config_dict_merges_into_gemma3s_text_config() -> None:
    cfg = _cfg("gemma-3-4b-it")
    out = with_overrides(cfg, json.dumps({"text_config": {"max_position_embeddings": 65536}}))
    assert out["text_config"] == {**cfg["text_config"], "max_position_embeddings": 65536}
    assert out["vision_config"] == cfg["vision_config"]


def test_nested_rope_scaling_inside_a_sub_config_merges_key_by_key() -> None:
    cfg = _cfg("gemma-3-4b-it")
    assert cfg["text_config"]["rope_scaling"] == {"factor": 8.0, "rope_type": "linear"}
    out = with_overrides(cfg, '{"text_config": {"rope_scaling": {"factor": 4.0}}}')
    assert out["text_config"]["rope_scaling"] == {"factor": 4.0, "rope_type": "linear"}
    assert out["text_config"]["hidden_size"] == cfg["text_config"]["hidden_size"]


def test_top_level_rope_scaling_is_set_whole() -> None:
    """``rope_scaling`` is a dict attribute, not a sub-config: vLLM sets it whole."""
    cfg = _cfg("qwen2.5-vl-7b-instruct")
    over = '{"rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]}}'
    assert with_overrides(cfg, over)["rope_scaling"] == {"type": "mrope",
                                                         "mrope_section": [8, 12, 12]}
    assert with_overrides(cfg, '{"rope_scaling": {"mrope_section": [8, 12, 12]}}')[
        "rope_scaling"] == {"mrope_section": [8, 12, 12]}
    assert merged_sub_configs(cfg, over) == ()


def test_qwen25_vl_vision_config_merges() -> None:
    cfg = _cfg("qwen2.5-vl-7b-instruct")
    out = with_overrides(cfg, '{"vision_config": {"depth": 16}}')
    assert out["vision_config"] == {**cfg["vision_config"], "depth": 16}
    assert merged_sub_configs(cfg, '{"vision_config": {"depth": 16}}') == ("vision_config",)


def test_before_0_11_1_and_under_sglang_a_sub_config_is_replaced_whole() -> None:
    cfg = _cfg("gemma-3-4b-it")
    over = '{"text_config": {"num_hidden_layers": 4}}'
    assert with_overrides(cfg, over, release="0.11.0")["text_config"] == {"num_hidden_layers": 4}
    assert with_overrides(cfg, over, release="0.11.1")["text_config"]["hidden_size"] == \
        cfg["text_config"]["hidden_size"]
    assert with_overrides(cfg, over, "--json-model-override-args")["text_config"] == {
        "num_hidden_layers": 4}
    assert merged_sub_configs(cfg, over, release="0.11.0") == ()


def test_the_estimate_builds_gemma3_with_the_merged_text_config() -> None:
    plain = load_model("gemma-3-4b-it")
    dep = Deployment().with_(hf_overrides='{"text_config": {"num_hidden_layers": 4}}')
    spec = _model_spec("gemma-3-4b-it", dep)
    assert spec.num_layers == 4 and plain.num_layers != 4
    assert spec.hidden_size == plain.hidden_size


def _estimate(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        run(["estimate", "-m", "gemma-3-4b-it", "--gpu", "H100", *args])
    return " ".join(out.getvalue().split())


def test_the_estimate_says_the_sub_config_was_merged_only_where_it_was() -> None:
    over = '{"text_config": {"max_position_embeddings": 65536}}'
    assert "text_config merged into the checkpoint's own key by key" in _estimate(
        "--hf-overrides", over)
    top = _estimate("--hf-overrides", '{"rope_scaling": null}')
    assert "sized with rope_scaling overridden" in top and "merged into" not in top

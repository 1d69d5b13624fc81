import json
from pathlib import Path

import pytest

from memprof.base.errors import ConfigError
from memprof.core.models import bundled_models, load_model, spec_from_config

REQUIRED = {"deepseek-r1", "deepseek-v3", "deepseek-v4-pro", "deepseek-v4-flash", "qwen3-32b",
            "qwen3-235b-a22b", "qwen3-0.6b", "llama-3.1-8b", "llama-3.1-70b", "gpt-oss-120b",
            "kimi-k2"}


def test_every_required_model_is_bundled_with_provenance() -> None:
    bundled = bundled_models()
    assert set(bundled) >= REQUIRED
    for name, path in bundled.items():
        cfg = json.loads(path.read_text())
        assert cfg.get("_source"), f"{name} has no _source provenance"
        text = cfg.get("text_config") or cfg  # a multimodal wrapper nests its language model
        assert load_model(name).num_layers == text["num_hidden_layers"]


def test_head_dim_is_read_not_derived() -> None:
    qwen = load_model("qwen3-32b").layers[0].attention
    assert qwen.head_dim == 128  # 5120 / 64 would be 80
    assert qwen.qk_norm
    gpt = load_model("gpt-oss-120b").layers[0].attention
    assert gpt.head_dim == 64  # 2880 / 64 would be 45


def test_gpt_oss_alternates_sliding_window_layers() -> None:
    spec = load_model("gpt-oss-120b")
    windows = [layer.attention.sliding_window for layer in spec.layers]
    assert windows[:4] == [128, None, 128, None]
    assert sum(w is not None for w in windows) == 18
    assert spec.layers[0].attention.sinks and spec.layers[0].mlp.expert_bias
    assert spec.quant is not None and spec.quant.method == "mxfp4"
    assert "model.embed_tokens" in spec.quant.exclude


def test_deepseek_mla_moe_layout() -> None:
    spec = load_model("deepseek-r1")
    assert [layer.mlp.kind for layer in spec.layers[:4]] == ["dense", "dense", "dense", "moe"]
    a = spec.layers[0].attention
    assert (a.kind, a.kv_lora_rank, a.qk_rope_head_dim, a.q_lora_rank) == ("mla", 512, 64, 1536)
    assert spec.layers[5].mlp.shared_intermediate_size == 2048
    assert spec.mtp_layers == ()
    assert len(load_model("deepseek-r1", speculative_mtp=True).mtp_layers) == 1
    kimi = load_model("kimi-k2")
    assert kimi.num_experts == 384 and kimi.layers[1].mlp.kind == "moe"


@pytest.mark.parametrize(("name", "c4", "c128", "swa"),
                         [("deepseek-v4-flash", 21, 20, 2), ("deepseek-v4-pro", 30, 31, 0)])
def test_deepseek_v4_compress_ratios(name: str, c4: int, c128: int, swa: int) -> None:
    ratios = [layer.attention.compress_ratio for layer in load_model(name).layers]
    assert (ratios.count(4), ratios.count(128), ratios.count(0)) == (c4, c128, swa)


def test_unknown_architecture_names_what_is_known() -> None:
    with pytest.raises(ConfigError, match="does not know the architecture") as e:
        spec_from_config({"architectures": ["MambaForCausalLM"], "model_type": "mamba"})
    # the message names every family memprof knows; the hint names the opt-in reading
    assert "llama (LlamaForCausalLM" in str(e.value) and "phi3 (Phi3ForCausalLM)" in str(e.value)
    assert "--assume-architecture dense-decoder" in e.value.hint


def test_missing_field_is_named() -> None:
    cfg = json.loads((bundled_models()["llama-3.1-8b"]).read_text())
    del cfg["intermediate_size"]
    with pytest.raises(ConfigError, match="intermediate_size"):
        spec_from_config(cfg)


def test_model_from_folder_and_file(tmp_path: Path) -> None:
    src = bundled_models()["qwen3-0.6b"].read_text()
    (tmp_path / "config.json").write_text(src)
    assert load_model(str(tmp_path)).num_layers == 28
    assert load_model(str(tmp_path / "config.json")).tie_word_embeddings


def test_malformed_and_missing_configs(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{ not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_model(str(bad))
    with pytest.raises(ConfigError, match="no such file"):
        load_model(str(tmp_path / "nope" / "config.json"))
    with pytest.raises(ConfigError, match=r"no config\.json"):
        load_model(str(tmp_path / ".."))
    with pytest.raises(ConfigError, match="unknown model"):
        load_model("llama-9")


def test_a_model_loaded_again_is_the_same_spec_object(tmp_path: Path) -> None:
    """Loads of one config hand back one spec (the estimator's caches find it by identity);
    a config that differs only where the spec does not look (its raw dict) is not merged."""
    assert load_model("qwen3-8b") is load_model("Qwen3-8B")
    cfg = json.loads(bundled_models()["qwen3-8b"].read_text(encoding="utf-8"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    first = load_model(str(tmp_path))
    cfg["an_unread_key"] = 1
    path.write_text(json.dumps(cfg))
    second = load_model(str(tmp_path))
    assert second == first and second is not first and second.raw["an_unread_key"] == 1

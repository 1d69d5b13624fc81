"""bitsandbytes checkpoints that keep modules unquantised (``llm_int8_skip_modules``), as each
vLLM release reads them (``memprof/core/weights/bnb_skip.py``: 0.6.3.post1 no skip list;
0.6.4.post1-0.7.2 whole components, vllm-project/vllm#9887; 0.7.3 on a leading prefix too,
vllm-project/vllm#12974), on the bundled Unsloth "dynamic" 4-bit Llama-3.1-8B-Instruct, whose
skip list keeps ``model.layers.1.mlp`` in 16 bits (published row 1302: the log's kwargs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.errors import ConfigError
from memprof.base.units import GiB, cdiv
from memprof.cli import run
from memprof.core.deployment import Deployment, ranks
from memprof.core.models import bundled_models, load_model
from memprof.core.models.load import hf_ids
from memprof.core.models.quant_config import quant_from_flag
from memprof.core.weights import rank_weights
from memprof.core.weights.bnb_skip import BNB_SKIP_MATCH, bnb_skipped, skip_matches
from tests.test_published_distribution import outcome

MODEL = "llama-3.1-8b-unsloth-bnb-4bit"
ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}
SKIP = ("lm_head", "multi_modal_projector", "merger", "modality_projection",
        "model.layers.1.mlp")


def _weights(model: str, version: str, quantization: str | None = None) -> int:
    spec = load_model(model)
    dep = Deployment(engine_version=version, quantization=quantization)
    quant = quant_from_flag(quantization, spec) if quantization else spec.quant
    return sum(t.bytes for t in rank_weights(spec, dep, quant, ranks(dep)[0], "sm75"))


def _nf4(out: int, inn: int) -> int:
    """One linear (or one sub-weight of a fused one) in nf4 with double quantisation, block 64:
    packed uint8 weight, uint8 absmax per block, fp32 nested absmax per 256 blocks, the maps."""
    n = out * inn
    blocks = cdiv(n, 64)
    return n // 2 + blocks + 4 * cdiv(blocks, 256) + 1024 + 4 + 64


def test_the_bundled_config_states_the_logged_skip_list() -> None:
    cfg = json.loads(bundled_models()[MODEL].read_text())
    q = cfg["quantization_config"]
    assert q["llm_int8_skip_modules"] == list(SKIP)
    assert (q["quant_method"], q["bnb_4bit_quant_type"], q["bnb_4bit_use_double_quant"]) == (
        "bitsandbytes", "nf4", True)
    base = json.loads(bundled_models()["llama-3.1-8b"].read_text())
    shape = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "vocab_size", "rope_scaling", "tie_word_embeddings")
    assert {k: cfg[k] for k in shape} == {k: base[k] for k in shape}
    # the log's kwargs are the config's (row 1302 quotes them)
    assert "'model.layers.1.mlp'], 'llm_int8_threshold': 6.0}" in ROWS[1302]["quote"]


def test_weights_are_the_hand_count_with_layer_1_mlp_in_16_bits() -> None:
    """Llama-3.1-8B: H 4096, I 14336, 32 layers, 32 heads, 8 KV heads × 128, V 128256 (padded
    to 64: 128256). Per layer in nf4: qkv_proj (q 4096 rows; k and v 2 × 1024), o_proj,
    gate_up_proj (2 × 14336), down_proj, the maps counted once per fused tensor
    (``memprof.core.weights.formats.bnb4``); layer 1's MLP 3 × 14336 × 4096 in 16 bits;
    embed_tokens and lm_head in 16 bits, two norms a layer and the final norm."""
    h, i, n, v = 4096, 14336, 32, 128256
    attn = _nf4(4096, h) + _nf4(2 * 1024, h) + _nf4(h, 4096)
    mlp4 = _nf4(2 * i, h) + _nf4(h, i)
    mlp16 = 3 * i * h * 2
    norms = n * 2 * h * 2 + h * 2
    total = n * attn + (n - 1) * mlp4 + mlp16 + 2 * v * h * 2 + norms
    assert _weights(MODEL, "0.7.3") == total
    # the plain bnb-4bit form of the same model (--quantization bitsandbytes on the base config)
    assert _weights("llama-3.1-8b", "0.7.3", "bitsandbytes") == total - mlp16 + mlp4


def test_the_two_unsloth_logs_differ_by_layer_1_mlp() -> None:
    """Rows 1301 (plain bnb-4bit, 0.7.1) and 1302 (dynamic, 0.7.3) log 'Loading model weights
    took' 5.3541 and 5.5976 GB (GiB): 0.2435 GiB apart, what layer 1's MLP costs in 16 bits
    over its nf4 form (336 MiB − 86.7 MiB). memprof's figures land within 0.1% of each."""
    logged = {1301: 5.3541, 1302: 5.5976}
    got = {}
    for rid, want in logged.items():
        o = outcome(ROWS[rid])
        key, log, mine = o.pairs["weights"]
        assert (key, log) == ("weights_gb", want)
        assert abs(mine - want) / want < 0.001, (rid, mine)
        got[rid] = mine
    h, i = 4096, 14336
    step = (3 * i * h * 2 - (_nf4(2 * i, h) + _nf4(h, i))) / GiB
    assert abs((logged[1302] - logged[1301]) - step) < 0.001
    assert got[1302] - got[1301] == pytest.approx(step, abs=1e-3)


@pytest.mark.parametrize(("version", "match"), [
    ("0.6.3.post1", "none"), ("0.6.4", "component"), ("0.7.1", "component"),
    ("0.7.2", "component"), ("0.7.3", "component_or_prefix"), ("0.8.0", "component_or_prefix"),
])
def test_release_rows(version: str, match: str) -> None:
    row = next(r for r in BNB_SKIP_MATCH if r.holds(version))
    assert row.value == match


def test_the_match_as_vllm_reads_it() -> None:
    gate_up = "model.layers.1.mlp.gate_up_proj"
    assert skip_matches(SKIP, gate_up, "component_or_prefix")
    assert not skip_matches(SKIP, gate_up, "component")  # a dotted entry is no component
    assert not skip_matches(SKIP, "model.layers.11.mlp.gate_up_proj", "component_or_prefix")
    # a leading run only: a dotted entry inside the name does not match (0.7.3 prefix_check)
    assert not skip_matches(("layers.1.mlp",), gate_up, "component_or_prefix")
    # a whole component, never a substring (vllm-project/vllm#9887: kv_proj in qkv_proj)
    assert skip_matches(("mlp",), gate_up, "component")
    assert not skip_matches(("kv_proj",), "model.layers.0.self_attn.qkv_proj", "component")
    assert not skip_matches(SKIP, gate_up, "none")
    assert bnb_skipped(SKIP, "model.layers.2.mlp.down_proj", "0.7.1") is False
    assert bnb_skipped(SKIP, gate_up, "0.4.3", "sglang") is None  # no SGLang row: generic


@pytest.mark.parametrize("version", ["0.6.3.post1", "0.7.1", "0.7.2"])
def test_a_release_that_would_build_the_skipped_mlp_4bit_is_refused(version: str) -> None:
    with pytest.raises(ConfigError, match=r"keeps model\.layers\.1\.mlp\.gate_up_proj unquantised"):
        _weights(MODEL, version)


def test_refusal_is_one_error_and_one_hint(capsys: pytest.CaptureFixture[str]) -> None:
    # float16, as vLLM 0.7.1 needs on a T4 for a bfloat16 checkpoint (memprof.core.auto_dtype)
    assert run(["estimate", "-m", MODEL, "--gpu", "T4", "--engine-version", "0.7.1",
                "--dtype", "float16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("error: ") and err[1].startswith("hint: ")
    assert "--engine-version 0.7.3 or later" in err[1]


def test_resolves_by_its_hf_id() -> None:
    assert hf_ids()["unsloth/meta-llama-3.1-8b-instruct-unsloth-bnb-4bit"][1] == MODEL

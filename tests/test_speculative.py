"""n-gram speculative decoding (memprof/core/speculative.py): what vLLM's n-gram drafter adds to a
rank and what it does not, the runner it runs on, and how a pasted command, a log and the CLI set
it. The figures are hand calculations with the shapes of vLLM 0.30.0's source."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_runner import runs_v2
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms.activation import sampler_stage
from memprof.core.terms.cudagraph import capture_sizes, graph_modes
from memprof.probes.serve_command import parse_tokens
from memprof.probes.startup_log import parse_log

# row 1722 / 1723's deployment (Qwen2.5-7B-Instruct AWQ on an L4, vLLM 0.30.0)
BASE = Deployment(engine_version="0.30.0", max_model_len=8192, gpu_memory_utilization=0.85,
                  quantization="awq_marlin", max_num_seqs=32, max_num_batched_tokens=2048)
NGRAM = BASE.with_(num_speculative_tokens=4, speculative_method="ngram")


def _names(dep: Deployment) -> dict[str, int]:
    e = estimate("qwen2.5-7b-instruct", dep, gpu_name="L4")
    return {c.name: c.bytes for c in e.ranks[0].components}


def test_ngram_leaves_model_runner_v2_for_v1() -> None:
    # 0.30.0 runs every model on V2 (use_v2_model_runner), but for V2's unsupported features:
    # "ngram" is one (config/vllm.py _get_v2_model_runner_unsupported_features); "mtp" is not
    common = {"listed": False, "moe": False, "hybrid": False, "quantised": True}
    assert runs_v2("0.30.0", **common)
    assert not runs_v2("0.30.0", **common, speculative="ngram")
    assert runs_v2("0.30.0", **common, speculative="mtp")
    # 0.25.0: a dense generate model runs V2 by default, n-gram sends it back to V1
    assert runs_v2("0.25.0", listed=False, moe=False, hybrid=False, quantised=False)
    assert not runs_v2("0.25.0", listed=False, moe=False, hybrid=False, quantised=False,
                       speculative="ngram")


def test_ngram_adds_no_weights_and_no_kv_layer() -> None:
    base, ngram = _names(BASE), _names(NGRAM)
    for name in ("embed_tokens", "attention", "mlp (dense)", "lm_head"):
        assert ngram[name] == base[name]
    # V2's sampler state is gone with V2 (output_bin_counts [32, 152064] int32 its bulk)
    assert "sampler state (Model Runner V2)" in base
    assert "sampler state (Model Runner V2)" not in ngram
    e = estimate("qwen2.5-7b-instruct", NGRAM, gpu_name="L4")
    # 28 layers × K and V × 4 KV heads × 128 × 2 B: no draft layer joins the pool
    assert e.kv_cache_bytes_per_token == 28 * 2 * 4 * 128 * 2 == 57_344


def test_ngram_decode_graphs_are_one_plus_k_tokens_a_request() -> None:
    # 0.30.0 config/vllm.py _set_cudagraph_sizes: min(max_num_seqs × (1 + k) × 2, 512)
    assert max(capture_sizes(BASE)) == 64
    assert max(capture_sizes(NGRAM)) == 32 * 5 * 2 == 320
    # FULL graphs for uniform decode batches: 5 ≤ size ≤ 5 × 32
    full = graph_modes(NGRAM)["FULL"]
    assert min(full) == 8 and max(full) == 160


def test_ngram_needs_no_mtp_layer_but_mtp_does() -> None:
    estimate("qwen2.5-7b-instruct", NGRAM, gpu_name="L4")  # no num_nextn_predict_layers needed
    with pytest.raises(BadInput, match="no MTP layer"):
        estimate("qwen2.5-7b-instruct", BASE.with_(num_speculative_tokens=4), gpu_name="L4")


@pytest.mark.parametrize(("dep", "words"), [
    (BASE.with_(num_speculative_tokens=4, speculative_method="medusa"), "not a method"),
    (BASE.with_(speculative_method="ngram"), "without --num-speculative-tokens"),
])
def test_bad_speculative_settings_are_refused(dep: Deployment, words: str) -> None:
    with pytest.raises(BadInput, match=words) as exc:
        estimate("qwen2.5-7b-instruct", dep, gpu_name="L4")
    assert exc.value.hint


def test_the_cli_refuses_an_unknown_method_in_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    code = run(["estimate", "-m", "qwen3-0.6b", "--gpu", "H100", "--num-speculative-tokens", "2",
                "--speculative-method", "medusa"])
    err = capsys.readouterr().err
    assert code == 2
    assert "error:" in err and "hint:" in err and "Traceback" not in err


@pytest.mark.parametrize(("conf", "settings"), [
    ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4},
     {"num_speculative_tokens": 4, "speculative_method": "ngram"}),
    # the older form: no method, the model "[ngram]" (0.30.0 SpeculativeConfig.__post_init__)
    ({"model": "[ngram]", "num_speculative_tokens": 3},
     {"num_speculative_tokens": 3, "speculative_method": "ngram"}),
    ({"method": "deepseek_mtp", "num_speculative_tokens": 1}, {"num_speculative_tokens": 1}),
])
def test_a_pasted_speculative_config_sets_it(conf: dict[str, object],
                                             settings: dict[str, object]) -> None:
    c = parse_tokens(["vllm", "serve", "m", "--speculative-config", json.dumps(conf)])
    assert c.settings == settings


def test_an_unmodelled_method_is_listed_and_an_unknown_one_refused() -> None:
    c = parse_tokens(["vllm", "serve", "m", "--speculative-config",
                      json.dumps({"method": "draft_model", "model": "x/small",
                                  "num_speculative_tokens": 3})])
    assert c.settings == {}
    assert any("draft_model" in why for _flag, why in c.not_modelled)
    with pytest.raises(BadInput, match="not one of vLLM's speculative methods") as exc:
        parse_tokens(["vllm", "serve", "m", "--speculative-config",
                      json.dumps({"method": "ngramz", "num_speculative_tokens": 3})])
    assert exc.value.hint


def test_a_logs_non_default_args_set_it() -> None:
    got = parse_log(
        "INFO 10-04 18:18:07 [utils.py:278] non-default args: {'model': 'Qwen/Qwen2.5-7B-"
        "Instruct-AWQ', 'max_model_len': 8192, 'max_num_seqs': 32, 'speculative_config': "
        "{'method': 'ngram', 'num_speculative_tokens': 4, 'prompt_lookup_max': 4}}\n"
        "INFO 10-04 18:19:07 [kv_cache_utils.py:1733] GPU KV cache size: 203,888 tokens\n")
    assert got.settings["num_speculative_tokens"] == 4
    assert got.settings["speculative_method"] == "ngram"


def _sampler_parts(dep: Deployment) -> dict[str, int]:
    e = estimate("qwen2.5-7b-instruct", dep, gpu_name="L4")
    ctx = rank_context(e, e.ranks[0])
    return dict(sampler_stage(ctx, 2048, 32).parts)


def test_the_rejection_warm_up_drafts_one_token_a_request() -> None:
    # _dummy_sampler_run (0.8.1-0.31.0): draft_token_ids = [[0] for _ in range(num_reqs)], so
    # 32 + 32 rows whatever k: fp32 logits + probs [64, V] and the 32 draft rows in bf16
    v = 152_064
    parts = _sampler_parts(NGRAM)
    assert parts["rejection sampler [64,V] fp32+probs"] == 64 * v * 8 + 32 * v * 2
    assert _sampler_parts(NGRAM.with_(num_speculative_tokens=1)) == parts
    # 0.8.0's _dummy_sampler_run has no rejection-sampler warm-up
    old = NGRAM.with_(engine_version="0.8.0", quantization=None)
    assert not any(n.startswith("rejection") for n in _sampler_parts(old))


def test_explain_rebuilds_the_logged_ngram_speculation(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ngram.log"
    log.write_text(
        "INFO 10-04 18:18:01 [api_utils.py:339] vLLM API server version 0.30.0\n"
        "INFO 10-04 18:18:07 [utils.py:278] non-default args: {'model': 'Qwen/Qwen2.5-7B-"
        "Instruct', 'max_model_len': 8192, 'max_num_seqs': 32, 'speculative_config': "
        "{'method': 'ngram', 'num_speculative_tokens': 4, 'prompt_lookup_max': 4}}\n"
        "INFO 10-04 18:19:07 [kv_cache_utils.py:1733] GPU KV cache size: 203,888 tokens\n",
        encoding="utf-8")
    run(["explain", str(log), "--model", "qwen2.5-7b-instruct", "--gpu", "L4"])
    out = " ".join(capsys.readouterr().out.split())
    assert "ngram speculation (4 draft tokens)" in out


@pytest.mark.parametrize("version", ["0.7.3", "0.8.5+v0"])
def test_ngram_on_the_v0_engine_is_refused(version: str) -> None:
    # V0 drafts through its spec-decode worker, which memprof does not model
    dep = Deployment(engine_version=version, num_speculative_tokens=4, speculative_method="ngram")
    with pytest.raises(BadInput, match="V0 engine") as exc:
        estimate("qwen2.5-7b-instruct", dep, gpu_name="L4")
    assert exc.value.hint

"""EAGLE / EAGLE-3 draft heads (memprof/core/models/draft_head.py, memprof/core/terms/
draft_head.py): the head's weights, its layer's KV in the shared pool and the proposer's buffers,
from hand calculations with the shapes of vLLM 0.30.0's llama_eagle3.py / llama_eagle.py,
v1/worker/gpu/spec_decode/ and v1/spec_decode/llm_base_proposer.py; and how a command, a log
and the CLI name the head, and refuse what memprof does not size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.errors import BadInput, ConfigError, LayoutError
from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.models.draft_head import head_from_config
from memprof.core.terms.draft_head import (
    BUFFERS,
    WEIGHTS,
    head_weight_parts,
    proposer_buffer_parts,
)
from memprof.probes.serve_command import parse_tokens
from memprof.probes.startup_log import parse_log

HEAD = Path(__file__).parent / "data" / "draft_heads" / "eagle3-qwen3-8b-shapes"
BASE = Deployment(engine_version="0.30.0", max_model_len=16384, max_num_seqs=256,
                  max_num_batched_tokens=8192)
EAGLE3 = BASE.with_(num_speculative_tokens=3, speculative_method="eagle3",
                    speculative_model=str(HEAD))


def _components(dep: Deployment, model: str = "qwen3-8b", gpu: str = "H100"
                ) -> dict[str, int]:
    e = estimate(model, dep, gpu_name=gpu)
    return {c.name: c.bytes for c in e.ranks[0].components}


def _head(**fields: object) -> dict[str, object]:
    return {**json.loads((HEAD / "config.json").read_text()), **fields}


def test_eagle3_head_weights_by_hand() -> None:
    # one Llama decoder layer at H = 4096, bf16 (s = 2): qkv over 2H (embedding ‖ hidden):
    # (32 + 2 × 8) × 128 = 6144 rows × 8192; o_proj 4096 × 4096; gate_up 24576 × 4096;
    # down 4096 × 12288; input/post-attention/hidden norms 3 × 4096; the final norm 4096;
    # fc 4096 × (3 × 4096); lm_head over the 32000-token draft vocabulary (a multiple of 64:
    # no padding) × 4096; d2t int64 [32000]. The embedding is the target's (same width).
    s = 2
    layer = (6144 * 8192 + 4096 * 4096 + 24576 * 4096 + 4096 * 12288 + 3 * 4096) * s
    head = layer + 4096 * s + 4096 * 12288 * s + 32000 * 4096 * s + 32000 * 8
    assert _components(EAGLE3)[WEIGHTS] == head == 799_303_680
    # TP 2: the column / row shards halve, fc and the norms stay whole, lm_head splits
    tp2 = (((3072 * 8192 + 4096 * 2048 + 12288 * 4096 + 4096 * 6144 + 3 * 4096) * s)
           + 4096 * s + 4096 * 12288 * s + 16000 * 4096 * s + 32000 * 8)
    assert _components(EAGLE3.with_(tp=2))[WEIGHTS] == tp2


def test_the_heads_layer_joins_the_kv_pool() -> None:
    # Qwen3-8B: 36 layers × K and V × 8 KV heads × 128 × 2 B; the head's layer is one more
    base = estimate("qwen3-8b", BASE, gpu_name="H100")
    eagle = estimate("qwen3-8b", EAGLE3, gpu_name="H100")
    assert base.kv_cache_bytes_per_token == 36 * 2 * 8 * 128 * 2 == 147_456
    assert eagle.kv_cache_bytes_per_token == 37 * 2 * 8 * 128 * 2 == 151_552
    tp2 = estimate("qwen3-8b", EAGLE3.with_(tp=2), gpu_name="H100")
    assert tp2.kv_cache_bytes_per_token == 37 * 2 * 4 * 128 * 2


def test_v2_proposer_buffers_by_hand() -> None:
    # Model Runner V2 (0.30.0 DraftModelSpeculator + AutoRegressiveSpeculator), N = 8192,
    # R = 256, k = 3, each rounded to 512 B: the [N, H] bf16 hidden_states are the bulk
    e = estimate("qwen3-8b", EAGLE3, gpu_name="H100")
    parts = dict(proposer_buffer_parts(rank_context(e, e.ranks[0])))
    assert parts["hidden_states [N,H]"] == 8192 * 4096 * 2
    assert parts["idx_mapping int32 [R]"] == 1024
    assert parts["draft_tokens int64 [R,k]"] == 256 * 3 * 8
    assert parts["draft_token_confidence_probs fp32 [R,k]"] == 3072
    assert parts["current_draft_step int64"] == 512
    n = 8192
    assert sum(parts.values()) == (n * 4 + n * 8 + n + 1536 + 1024 + 1024 + 1024 + 1024
                                   + 2048 + 6144 + 3072 + n * 4096 * 2 + 512 + 2048 + 2048)
    assert _components(EAGLE3)[BUFFERS] == sum(parts.values())
    # 0.32.0 on: idx_mapping int64
    late = estimate("qwen3-8b", EAGLE3.with_(engine_version="0.33.0"), gpu_name="H100")
    assert "idx_mapping int64 [R]" in dict(proposer_buffer_parts(rank_context(late,
                                                                              late.ranks[0])))


def _buffers(dep: Deployment, model: str = "qwen3-8b") -> dict[str, int]:
    e = estimate(model, dep, gpu_name="H100")
    return dict(proposer_buffer_parts(rank_context(e, e.ranks[0])))


def test_v2_buffers_per_release() -> None:
    # 0.27.0 / 0.28.0: no sample_src_positions, no confidence probabilities; 0.29.0 adds the
    # first, 0.30.0 the second (the wheels' speculator.py / autoregressive/speculator.py)
    for version, src, conf in (("0.28.0", False, False), ("0.29.0", True, False),
                               ("0.30.0", True, True)):
        names = _buffers(EAGLE3.with_(engine_version=version))
        assert ("sample_src_positions int64 [R]" in names) is src, version
        assert ("draft_token_confidence_probs fp32 [R,k]" in names) is conf, version


def test_v1_proposer_buffers_by_hand() -> None:
    # a MoE target runs the V1 runner at 0.28.0 (vllm_runner.runs_v2): EagleProposer's
    # SpecDecodeBaseProposer buffers, N = 8192, R = 256, the head's H = 4096 in bf16
    got = _buffers(EAGLE3.with_(engine_version="0.28.0"), "qwen3-30b-a3b")
    assert got == {"input_ids int32 [N]": 8192 * 4, "positions int64 [N]": 8192 * 8,
                   "hidden_states [N,H]": 8192 * 4096 * 2,
                   "arange int32 [max(R+1,N)]": 8192 * 4,
                   "inputs_embeds [N,H]": 8192 * 4096 * 2,
                   "backup_next_token_ids int32 [R]": 1024, "slot_mapping int64 [N]": 8192 * 8}


def test_the_buffers_are_charged_only_where_the_release_charges_the_runners() -> None:
    # 0.26.x charges no constructor buffer (runner_buffers.RUNNER_BUFFERS_CHARGED): the head's
    # weights are there, its buffers are not
    old = _components(EAGLE3.with_(engine_version="0.26.0"))
    assert old[WEIGHTS] == 799_303_680 and BUFFERS not in old


def test_a_head_of_another_width_keeps_its_own_embedding() -> None:
    # a 2048-wide head on the 4096-wide target: vLLM shares the embedding only where the widths
    # match (llm_base_proposer._maybe_share_embeddings; V2's _should_share compares tensors):
    # the head holds [151936, 2048] of its own
    narrow = head_from_config(_head(hidden_size=2048, num_attention_heads=16,
                                    intermediate_size=6144, target_hidden_size=4096), "eagle3")
    assert narrow.hidden_size == 2048 and narrow.target_hidden_size == 4096
    parts = dict(head_weight_parts(narrow, tp=1, dtype="bfloat16", target_hidden=4096,
                                   target_vocab=151936))
    emb = next(v for k, v in parts.items() if k.startswith("embed_tokens"))
    assert emb == 151936 * 2048 * 2
    assert parts["fc [2048, 12288]"] == 2048 * 3 * 4096 * 2


def test_a_full_vocabulary_head_shares_the_lm_head_and_has_no_d2t() -> None:
    full = head_from_config(_head(draft_vocab_size=151936), "eagle3")
    names = [n for n, _b in head_weight_parts(full, tp=1, dtype="bfloat16", target_hidden=4096,
                                              target_vocab=151936)]
    assert not any(n.startswith(("lm_head", "d2t")) for n in names)


def test_eagle1_head_by_hand() -> None:
    # EagleLlamaForCausalLM (llama_eagle.py): fc over [embedding ‖ hidden] (2H → H), the first
    # layer without input_layernorm, no final norm, no lm_head (the target's)
    cfg = _head(architectures=["LlamaForCausalLM"])
    del cfg["draft_vocab_size"]
    head = head_from_config(cfg, "eagle")
    assert head.architecture == "EagleLlamaForCausalLM" and head.fc_inputs == 0
    s = 2
    layer = (6144 * 4096 + 4096 * 4096 + 24576 * 4096 + 4096 * 12288 + 1 * 4096) * s
    assert sum(b for _n, b in head_weight_parts(head, tp=1, dtype="bfloat16",
                                                target_hidden=4096, target_vocab=151936)) \
        == layer + 4096 * 8192 * s


def test_a_speculators_config_is_read_as_vllm_reads_it() -> None:
    # transformers_utils/configs/speculators: transformer_layer_config + update_eagle3's fields
    layer = {k: v for k, v in _head().items() if k not in ("architectures", "draft_vocab_size",
                                                           "_source")}
    cfg = {"speculators_model_type": "eagle3", "draft_vocab_size": 32000,
           "norm_before_fc": True, "transformer_layer_config": {**layer, "model_type": "qwen3"},
           "speculators_config": {"algorithm": "eagle3"}}
    head = head_from_config(cfg, "eagle3")
    assert head.architecture == "Eagle3Qwen3ForCausalLM" and head.qk_norm
    assert head.norm_before_fc and head.draft_vocab_size == 32000 and head.fc_inputs == 3


@pytest.mark.parametrize(("cfg", "method", "words"), [
    (_head(architectures=["DeepseekV3ForCausalLM"]), "eagle3", "does not size"),
    (_head(quantization_config={"quant_method": "fp8"}), "eagle3", "quantised"),
    ({k: v for k, v in _head().items() if k != "hidden_size"}, "eagle3", "no hidden_size"),
    (_head(num_hidden_layers=0), "eagle3", "not a positive integer"),
    ({"speculators_model_type": "dflash", "transformer_layer_config": {}}, "eagle3", "dflash"),
    # algos.py update_eagle3 maps llama and qwen3 only (Family.eagle3_speculators)
    ({"speculators_model_type": "eagle3", "transformer_layer_config": {"model_type": "mistral"}},
     "eagle3", "no EAGLE-3 speculator of model_type 'mistral'"),
])
def test_an_unknown_or_unreadable_head_is_refused(cfg: dict[str, object], method: str,
                                                  words: str) -> None:
    with pytest.raises(ConfigError, match=words) as exc:
        head_from_config(cfg, method)
    assert exc.value.hint


@pytest.mark.parametrize(("dep", "error", "words"), [
    (BASE.with_(num_speculative_tokens=3, speculative_method="eagle3"), BadInput,
     "without --speculative-model"),
    (BASE.with_(speculative_model=str(HEAD)), BadInput, "without --num-speculative-tokens"),
    (BASE.with_(num_speculative_tokens=3, speculative_method="ngram",
                speculative_model=str(HEAD)), BadInput, "only an EAGLE method"),
    (EAGLE3.with_(speculative_model="/no/such/head"), ConfigError, "--speculative-model"),
    (EAGLE3.with_(pp=2), LayoutError, "pipeline"),
    # 0.8.4 runs Eagle on V0 (arg_utils 'Eagle is under development'), whose spec-decode
    # worker memprof does not model
    (EAGLE3.with_(engine_version="0.8.4", max_num_batched_tokens=None, max_num_seqs=None),
     BadInput, "V0 engine"),
])
def test_bad_eagle_settings_are_refused(dep: Deployment, error: type[BadInput],
                                        words: str) -> None:
    with pytest.raises(error, match=words) as exc:
        estimate("qwen3-8b", dep, gpu_name="H100")
    assert exc.value.hint


def test_the_cli_refuses_a_missing_head_in_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    code = run(["estimate", "-m", "qwen3-8b", "--gpu", "H100", "--num-speculative-tokens", "3",
                "--speculative-method", "eagle3", "--speculative-model", "org/not-bundled"])
    err = capsys.readouterr().err
    assert code == 2
    assert "error: --speculative-model" in err and "hint:" in err and "Traceback" not in err


def test_a_pasted_command_and_a_log_name_the_head() -> None:
    conf = {"method": "eagle3", "model": str(HEAD), "num_speculative_tokens": 3}
    c = parse_tokens(["vllm", "serve", "Qwen/Qwen3-8B", "--speculative-config",
                      json.dumps(conf)])
    assert c.settings == {"num_speculative_tokens": 3, "speculative_method": "eagle3",
                          "speculative_model": str(HEAD)}
    got = parse_log(
        "INFO 10-04 18:18:07 [utils.py:278] non-default args: {'model': 'Qwen/Qwen3-8B', "
        "'speculative_config': {'method': 'eagle3', 'model': 'org/head', "
        "'num_speculative_tokens': 3}}\n"
        "INFO 10-04 18:19:07 [kv_cache_utils.py:1733] GPU KV cache size: 30,784 tokens\n")
    assert got.settings["speculative_method"] == "eagle3"
    assert got.settings["speculative_model"] == "org/head"
    # an EAGLE method without its head is listed as not modelled, not run without it
    bare = parse_tokens(["vllm", "serve", "m", "--speculative-config",
                         json.dumps({"method": "eagle3", "num_speculative_tokens": 3})])
    assert bare.settings == {} and any("without a head" in w for _f, w in bare.not_modelled)


def test_the_json_names_the_head(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["estimate", "-m", "qwen3-8b", "--gpu", "H100", "-f", "json",
                "--num-speculative-tokens", "3", "--speculative-method", "eagle3",
                "--speculative-model", str(HEAD)]) in (0, 1)
    d = json.loads(capsys.readouterr().out)["deployment"]
    assert d["speculative_method"] == "eagle3" and d["speculative_model"] == str(HEAD)


def test_trace_refuses_a_head_it_does_not_build(capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    code = run(["trace", "-m", "qwen3-0.6b", "--gpu", "H100", "--device", "fake",
                "--num-speculative-tokens", "3", "--speculative-method", "eagle3",
                "--speculative-model", str(HEAD)])
    err = capsys.readouterr().err
    # (the command refuses every draft before any work, EAGLE heads among them)
    assert code == 2 and "trace runs no speculative decoding" in err and "hint:" in err


def test_a_sweep_point_is_its_estimate(capsys) -> None:  # type: ignore[no-untyped-def]
    # the sweep estimates each point with the head (prepared_layout leaves EAGLE layouts to the
    # full estimate, which adds the head to the model)
    flags = ["-m", "qwen3-8b", "--gpu", "H100", "--num-speculative-tokens", "3",
             "--speculative-method", "eagle3", "--speculative-model", str(HEAD)]
    assert run(["sweep", *flags, "--set", "gpu_memory_utilization=0.8,0.9", "-f", "json"]) == 0
    points = json.loads(capsys.readouterr().out)
    for p in points:
        e = estimate("qwen3-8b", Deployment(gpu_memory_utilization=p["gpu_memory_utilization"],
                                            num_speculative_tokens=3,
                                            speculative_method="eagle3",
                                            speculative_model=str(HEAD)), gpu_name="H100")
        assert p["kv_cache_bytes_per_token"] == 37 * 4096
        assert (p["kv_cache_tokens"], p["weights_bytes"]) == (e.kv_cache_tokens,
                                                             e.weights_bytes_max)


@pytest.mark.parametrize(("key", "value"), [
    ("draft_sample_method", "probabilistic"), ("parallel_drafting", True),
    ("draft_tensor_parallel_size", 1), ("quantization", "fp8"), ("kv_cache_dtype", "fp8"),
])
def test_a_head_setting_memprof_does_not_size_is_listed(key: str, value: object) -> None:
    # e.g. draft_sample_method probabilistic keeps [R, k, V] draft logits (speculator.py)
    conf = {"method": "eagle3", "model": str(HEAD), "num_speculative_tokens": 3, key: value}
    c = parse_tokens(["vllm", "serve", "m", "--speculative-config", json.dumps(conf)])
    assert c.settings == {} and any(key in why for _f, why in c.not_modelled)


def _stages(dep: Deployment, model: str = "qwen3-8b") -> dict[str, int]:
    from memprof.core.terms.activation import activation_stages

    e = estimate(model, dep, gpu_name="H100")
    return {st.name: st.bytes for st in activation_stages(rank_context(e, e.ranks[0]))}


def test_the_drafters_profile_forward_by_hand() -> None:
    # Model Runner V2 (0.30.0), T = 8192, H = 4096, bf16: _dummy_run still holds the target's
    # output and EAGLE-3's three aux states; propose folds them through fc ([T, 3H] cat), then
    # the head's layer runs over T tokens beside the combined hidden state
    row = 8192 * 4096 * 2
    held = row + 3 * row + row  # target hidden_states, aux 3×[T,H], combined hidden
    got = _stages(EAGLE3)
    assert got["EAGLE-3 fc (profile run)"] == row + 3 * row + 3 * row + row
    # the fixture's plain config: norm_before_residual false, the residual is the input buffer
    live = 2 * row  # input_embeds, normed embeds
    assert got["draft attention (profile run)"] == (held + live + 2 * row
                                                    + 8192 * (4096 + 2 * 1024) * 2
                                                    + 8192 * 4096 * 2 + row)
    assert got["draft MLP (profile run)"] == (held + live + row + 8192 * 2 * 12288 * 2
                                              + 8192 * 12288 * 2 + row)
    # a speculators config keeps the hidden state's norm as the residual (update_eagle3's
    # norm_before_residual default): one [T, H] more in both layer stages
    assert head_from_config({"speculators_model_type": "eagle3", "draft_vocab_size": 32000,
                             "transformer_layer_config": {
                                 k: v for k, v in _head().items()
                                 if k not in ("architectures", "draft_vocab_size", "_source")}},
                            "eagle3").norm_before_residual


def test_the_v1_drafter_runs_over_its_buffers() -> None:
    # the V1 runner (a MoE target at 0.28.0) drops the aux states after the target's forward
    # and EagleProposer.dummy_run feeds the head its persistent buffers: no fc stage, only the
    # target's output held (Qwen3-30B-A3B: H = 2048, so the 4096-wide head keeps its own table)
    got = _stages(EAGLE3.with_(engine_version="0.28.0"), "qwen3-30b-a3b")
    assert "EAGLE-3 fc (profile run)" not in got
    row = 8192 * 4096 * 2
    assert got["draft MLP (profile run)"] == (8192 * 2048 * 2 + 2 * row + row
                                              + 8192 * 2 * 12288 * 2 + 8192 * 12288 * 2 + row)


def test_the_targets_forward_holds_the_aux_states() -> None:
    # EAGLE-3: the target keeps [T, H] at layers 2, N/2 and N-3 for the head, live through its
    # last layers: each target layer stage grows by 3 × T × H × 2 B; EAGLE (no aux) by nothing
    aux = 3 * 8192 * 4096 * 2
    base, eagle3 = _stages(BASE), _stages(EAGLE3)
    assert eagle3["dense MLP"] - base["dense MLP"] == aux
    assert eagle3["embedding"] == base["embedding"]
    # the sampler runs after _dummy_run returned: the aux states are gone by then
    from memprof.core.terms.activation import activation_stages

    e = estimate("qwen3-8b", EAGLE3, gpu_name="H100")
    sampler = next(st for st in activation_stages(rank_context(e, e.ranks[0]))
                   if st.name == "sampler")
    assert not any("aux" in name for name, _b in sampler.parts)
    eagle1 = head_from_config({k: v for k, v in _head(architectures=["LlamaForCausalLM"]).items()
                               if k != "draft_vocab_size"}, "eagle")
    assert eagle1.fc_inputs == 0


def test_the_estimate_states_what_it_assumed_of_the_head() -> None:
    notes = " ".join(estimate("qwen3-8b", EAGLE3, gpu_name="H100").notes)
    assert "--speculative-model eagle3-qwen3-8b-shapes" in notes
    assert "embedding shared with the target [assumption" in notes and "not modelled" in notes

"""vLLM's pooling runner (``--runner pooling --convert embed``, ``--task embed`` before 0.13.0):
the rules of memprof/core/engines/vllm_pooling.py, each against a figure counted by hand from
the engine source the rule cites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.errors import BadInput, ConfigError
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.engines.vllm_pooling import pooler_parts, pooling_convert
from memprof.core.estimate import Estimate, estimate
from memprof.core.models import load_model
from memprof.core.models.encoder_only import refuse_encoder_only
from memprof.core.models.score_heads import refuse_score_head, score_labels, seq_cls_base
from memprof.core.terms.activation import activation_stages
from memprof.core.terms.cudagraph import graph_modes
from memprof.probes.serve_command import parse_tokens
from memprof.probes.startup_log import parse_log
from tests.cli_helpers import completed, one_error

QWEN3_8B = "qwen3-8b"  # Qwen3ForCausalLM, untied lm_head (tie_word_embeddings false)
QWEN3_06B = "qwen3-0.6b"  # tied lm_head


def _est(model: str = QWEN3_8B, version: str = "0.11.0", **kw: object) -> Estimate:
    return estimate(model, Deployment(engine_version=version, max_model_len=8192,
                                      **kw), gpu_name="H100-80GB")  # type: ignore[arg-type]


def _component(e: Estimate, name: str) -> int:
    return sum(c.bytes for c in e.ranks[0].components if c.name == name)


def _formula(e: Estimate, name: str) -> str:
    return next(c.formula for c in e.ranks[0].components if c.name == name)


def test_pooler_parts_by_hand_before_and_after_the_token_task() -> None:
    """T = 8192 tokens over R = 256 requests, H = 4096, bf16. 0.12.0 drops token_embed under
    chunked prefill, so the embed task (LAST) sets the stage: [R, H] gathered in bf16 + its
    fp32 copy + the normalised fp32 = 256 × 4096 × (2 + 4 + 4) = 10 MiB. 0.13.0 keeps
    token_embed: every token's normalised fp32 (8192 × 4096 × 4 = 128 MiB) + the last
    request's fp32 copy (32 tokens × 4096 × 4 = 512 KiB). Both beside the bf16 hidden states
    (64 MiB), profile_run's last_hidden_states [R, H] (256 × 4096 × 2 = 2 MiB) and the dummy
    token ids (256 × 32 × 4 B)."""
    old = dict(pooler_parts("0.12.0", tokens=8192, rows=256, hidden=4096, model_itemsize=2))
    new = dict(pooler_parts("0.13.0", tokens=8192, rows=256, hidden=4096, model_itemsize=2))
    hidden, ids = 8192 * 4096 * 2 + 256 * 4096 * 2, 256 * 32 * 4
    assert sum(old.values()) == hidden + ids + 256 * 4096 * 10
    assert sum(new.values()) == hidden + ids + 8192 * 4096 * 4 + 32 * 4096 * 4
    assert any(k.startswith("embed (LAST)") for k in old)
    assert any(k.startswith("token_embed") for k in new)


def test_v2_pooler_parts_by_hand() -> None:
    """Model Runner V2's PoolingRunner (0.33.0 v1/worker/gpu/pool/pooling_runner.py): no GPU
    token ids, and T % R extra tokens go one each to the last requests. T = 8200 over R = 256,
    H = 4096, bf16: t = 32, 8 extra, so the last request has 33 tokens (V1 gives it 32 + 8 =
    40). Peak: hidden [T, H] + sample hidden [R, H] in bf16 = (8200 + 256) × 4096 × 2, then
    token_embed's normalised fp32 of every token 8200 × 4096 × 4 + the last request's fp32 copy
    33 × 4096 × 4."""
    v2 = dict(pooler_parts("0.33.0", tokens=8200, rows=256, hidden=4096, model_itemsize=2,
                           v2=True))
    v1 = dict(pooler_parts("0.33.0", tokens=8200, rows=256, hidden=4096, model_itemsize=2))
    assert sum(v2.values()) == (8200 + 256) * 4096 * 2 + 8200 * 4096 * 4 + 33 * 4096 * 4
    assert sum(v1.values()) == ((8200 + 256) * 4096 * 2 + 256 * 32 * 4
                                + 8200 * 4096 * 4 + 40 * 4096 * 4)
    assert not any("token ids" in k for k in v2)


def test_fp32_model_makes_no_head_copy() -> None:
    """Tensor.to(float32) on fp32 hidden states returns them: the embed task holds the gathered
    [R, H] and the normalised [R, H] only, 2 × 4 B an element (0.12.0: no token task)."""
    parts = dict(pooler_parts("0.12.0", tokens=4096, rows=128, hidden=1024, model_itemsize=4))
    embed = next(b for k, b in parts.items() if k.startswith("embed (LAST)"))
    assert embed == 128 * 1024 * 8


def test_task_spellings() -> None:
    """0.11.0 config/model.py _task_to_convert: embed / embedding / score → embed."""
    assert pooling_convert("generate", None, "embedding") == "embed"
    assert pooling_convert("generate", None, "score") == "embed"
    assert pooling_convert("generate", None, "generate") is None
    assert pooling_convert("pooling", None, None) == "embed"  # --convert auto
    assert pooling_convert("pooling", "auto", None) == "embed"
    assert pooling_convert("generate", None, None) is None


def test_untied_lm_head_is_not_built() -> None:
    """Qwen3-8B's lm_head (151,936 × 4,096 × 2 B = 1,244,659,712 B) leaves the weights; a
    tied one (Qwen3-0.6B: the input embedding) stays, so its weights do not move."""
    gen, emb = _est(), _est(runner="pooling")
    lm_head = load_model(QWEN3_8B).vocab_size * 4096 * 2
    assert _component(gen, "lm_head") == lm_head
    assert _component(emb, "lm_head") == 0
    # the load's allocator rounding of the lm_head (a 2 MiB block boundary) goes with it
    assert gen.ranks[0].weights_bytes - emb.ranks[0].weights_bytes - lm_head in (0, 1 << 20)
    tied_gen, tied_emb = _est(QWEN3_06B), _est(QWEN3_06B, runner="pooling")
    assert tied_gen.ranks[0].weights_bytes == tied_emb.ranks[0].weights_bytes


def test_profile_run_has_no_sampler() -> None:
    """At 1,024 sequences the V1 sampler (12 bytes an element of [R, V] and more) is the
    generation peak; the pooling runner has none: its peak is a forward stage or the pooler."""
    gen, emb = _est(), _est(runner="pooling")
    peak = "activation peak (profile run)"
    assert "sampler" in _formula(gen, peak)
    assert "sampler" not in _formula(emb, peak)
    assert _component(emb, peak) < _component(gen, peak) - 1024 * 151_936 * 12


def test_pooling_models_capture_piecewise_only() -> None:
    """0.11.0 on: FULL_AND_PIECEWISE for generation, PIECEWISE for a pooling model."""
    gen, emb = _est(), _est(runner="pooling")
    assert set(graph_modes(gen.deployment)) == {"PIECEWISE", "FULL"}
    assert set(graph_modes(emb.deployment)) == {"PIECEWISE"}
    assert graph_modes(emb.deployment)["PIECEWISE"] == graph_modes(gen.deployment)["PIECEWISE"]


def _ctx(e: Estimate) -> TermContext:
    r = e.ranks[0]
    return TermContext(spec=e.spec, dep=e.deployment, gpu=e.gpu, coord=r.coord, plan=r.plan,
                       weights_bytes=r.weights_bytes, model_dtype=e.model_dtype, quant=e.quant)


def _stage(e: Estimate) -> str:
    return _formula(e, "activation peak (profile run)")


def _pooler_stage_bytes(e: Estimate, version: str, v2: bool) -> int:
    """The pooler stage of ``e``'s profile run, from its T and R (Qwen3-8B: H = 4096, bf16)."""
    d = e.deployment
    t = int(d.max_num_batched_tokens)  # type: ignore[arg-type]
    r = min(int(d.max_num_seqs), t)  # type: ignore[arg-type]
    return sum(b for _n, b in pooler_parts(version, tokens=t, rows=r, hidden=4096,
                                           model_itemsize=2, v2=v2))


@pytest.mark.parametrize("version", ["0.22.0", "0.25.0", "0.28.0"])
def test_pooling_models_stay_on_v1_before_0_29(version: str) -> None:
    """0.22.0-0.28.0 config/vllm.py _is_default_v2_model_runner_model: 'if
    model_config.runner_type != "generate": return False'. Qwen3ForCausalLM runs V2 for
    generation there (listed from 0.22.0, every dense model from 0.25.0), but its pooling
    runner is V1's: no V2 output-copy stream pool, and the note says so."""
    gen, emb = _est(version=version), _est(version=version, runner="pooling")
    pool = "torch stream pool (Model Runner V2's output_copy_stream)"
    assert _component(gen, pool) == 73_400_320
    assert _component(emb, pool) == 0
    assert any("keeps a pooling model on the V1 runner" in n for n in emb.notes)


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
def test_pooling_models_run_v2_from_0_29(version: str) -> None:
    """0.29.0-0.33.0: every model runs Model Runner V2, pooling ones included
    (use_v2_model_runner; no pooling entry among the unsupported features). Its load_model
    builds no Sampler for a pooling model, so the V2 sampler state ([1024, 151936] int32
    output_bin_counts and the rest, 0.6 GiB here) is not charged; its __init__ still makes
    output_copy_stream (73,400,320 B of torch's stream pool), and its own CUDA-graph estimate
    counts PIECEWISE graphs only (no FULL sample)."""
    emb = _est(version=version, runner="pooling")
    assert _component(emb, "sampler state (Model Runner V2)") == 0
    assert _component(emb, "torch stream pool (Model Runner V2's output_copy_stream)") \
        == 73_400_320
    assert "Model Runner V2 at vLLM" in _formula(emb, "CUDA-graph estimate")
    assert "(no FULL graph)" in _formula(emb, "CUDA-graph estimate")
    assert set(graph_modes(emb.deployment)) == {"PIECEWISE"}
    assert any("PoolingRunner.dummy_pooler_run" in n for n in emb.notes)
    assert not any("sampler pass" in n for n in emb.notes)


def test_v2_pooler_is_the_profile_runs_stage_at_0_30() -> None:
    """0.30.0 compiles cold, so V2's own profile terms hold; the pooler stage (V2's: no token
    ids) replaces the sampler's, whatever the peak stage is."""
    gen, emb = _est(version="0.30.0"), _est(version="0.30.0", runner="pooling")
    assert _component(gen, "sampler state (Model Runner V2)") > 0
    assert "sampler" not in _stage(emb)
    stages = activation_stages(_ctx(emb))
    pooler = [st for st in stages if st.name.startswith("pooler")]
    assert [st.name for st in pooler] == ["pooler (pooling runner, Model Runner V2)"]
    assert pooler[0].bytes == _pooler_stage_bytes(emb, "0.30.0", v2=True)
    assert not any(st.name.startswith("sampler") for st in stages)


def test_task_embed_is_the_same_deployment_before_0_13() -> None:
    a = _est(version="0.12.0", task="embed")
    b = _est(version="0.12.0", runner="pooling", convert="embed")
    assert a.kv_cache_tokens == b.kv_cache_tokens and a.weights_bytes_max == b.weights_bytes_max


def test_output_says_what_changed_and_json_carries_it() -> None:
    r = completed(["estimate", "--model", QWEN3_8B, "--gpu", "H100-80GB", "--engine-version",
                   "0.14.0", "--max-model-len", "8192", "--runner", "pooling"])
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "_dummy_pooler_run" in text and "token_embed" in text
    assert "LAST pooling is assumed" in text
    j = completed(["estimate", "--model", QWEN3_8B, "--gpu", "H100-80GB", "--engine-version",
                   "0.14.0", "--max-model-len", "8192", "--runner", "pooling", "--format",
                   "json"])
    dep = json.loads(j.stdout)["deployment"]
    assert (dep["runner"], dep["convert"]) == ("pooling", "embed")
    g = completed(["estimate", "--model", QWEN3_8B, "--gpu", "H100-80GB", "--engine-version",
                   "0.14.0", "--max-model-len", "8192", "--format", "json"])
    assert "runner" not in json.loads(g.stdout)["deployment"]


@pytest.mark.parametrize(("args", "text"), [
    (["--engine-version", "0.10.2", "--runner", "pooling"], "not at 0.10.2"),
    (["--engine-version", "0.14.0", "--task", "embed"], "has no --task"),
    (["--engine-version", "0.11.0", "--runner", "pooling", "--convert", "classify"],
     "--convert classify on Qwen3ForCausalLM: a causal LM's checkpoint has no score.weight"),
    (["--engine-version", "0.15.0", "--runner", "pooling", "--convert", "reward"],
     "--convert reward (adapters.py as_reward_model"),
    (["--engine-version", "0.16.0", "--runner", "pooling", "--convert", "reward"],
     "vLLM 0.16.0 has no --convert reward"),
    (["--engine-version", "0.11.0", "--convert", "embed"], "applies to the pooling runner"),
    (["--engine-version", "0.11.0", "--runner", "draft"], "--runner 'draft'"),
    (["--engine-version", "0.11.0", "--task", "transcribe"], "unknown --task"),
    (["--engine", "sglang", "--runner", "pooling"], "vLLM's flag"),
    (["--engine-version", "0.11.0", "--runner", "pooling", "--enable-lora"],
     "--enable-lora with --runner pooling"),
])
def test_refusals_are_one_line(args: list[str], text: str) -> None:
    r = completed(["estimate", "--model", QWEN3_8B, "--gpu", "H100-80GB",
                   "--max-model-len", "8192", *args])
    assert r.returncode == 2
    one_error(r.stderr, text)


def test_a_multimodal_model_on_the_pooling_runner_is_refused() -> None:
    with pytest.raises(BadInput, match="multimodal"):
        estimate("qwen3-vl-4b-instruct", Deployment(engine_version="0.11.0", runner="pooling",
                                                    max_model_len=8192), gpu_name="H100-80GB")


def test_encoder_only_models_are_refused_by_name() -> None:
    """A BERT-class checkpoint has no KV cache on vLLM (EncoderOnlyAttention): never sized as a
    dense decoder, not even with --assume-architecture."""
    with pytest.raises(ConfigError, match="encoder-only"):
        refuse_encoder_only("XLMRobertaModel")
    refuse_encoder_only("Qwen3ForCausalLM")  # a decoder passes


def test_encoder_only_config_from_the_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert",
                               "hidden_size": 1024, "num_hidden_layers": 24,
                               "num_attention_heads": 16, "intermediate_size": 4096,
                               "vocab_size": 30522, "max_position_embeddings": 512}))
    r = completed(["estimate", "--model", str(cfg), "--gpu", "H100-80GB", "--engine-version",
                   "0.11.0", "--runner", "pooling", "--assume-architecture", "dense-decoder"])
    assert r.returncode == 2
    one_error(r.stderr, "BertModel is an encoder-only model")


@pytest.mark.parametrize("arch", ["Qwen3ForTokenClassification", "Qwen2ForRewardModel",
                                  "InternLM2ForRewardModel", "LlamaClassificationModel"])
def test_token_classification_and_reward_heads_are_refused_by_name(arch: str) -> None:
    """Heads of their own (config/model.py _SUFFIX_TO_DEFAULTS; qwen2_rm.py's two-layer score
    MLP), which memprof does not model."""
    with pytest.raises(ConfigError, match="classification or reward checkpoint"):
        refuse_score_head(arch)


@pytest.mark.parametrize("arch", ["Qwen3ForCausalLM", "MistralModel", "Qwen2Model"])
def test_decoders_and_bare_decoders_are_no_score_heads(arch: str) -> None:
    refuse_score_head(arch)  # passes: a causal LM, or a bare decoder sized on the pooling runner


def test_seq_cls_base_follows_the_registry_suffix_order() -> None:
    """registry.py _normalize_arch: the suffix replaced by the first _SUFFIX_TO_DEFAULTS suffix
    whose class the registry lists (ForCausalLM before ForConditionalGeneration)."""
    known = {"Qwen3ForCausalLM", "Gemma3ForConditionalGeneration"}
    assert seq_cls_base("Qwen3ForSequenceClassification", known) == "Qwen3ForCausalLM"
    assert (seq_cls_base("Gemma3ForSequenceClassification", known)
            == "Gemma3ForConditionalGeneration")
    assert seq_cls_base("FooForSequenceClassification", known) is None
    assert seq_cls_base("Qwen3ForCausalLM", known) is None


def test_seq_cls_of_an_unknown_family_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A *ForSequenceClassification whose causal LM is no family (bge-reranker-v2-gemma is
    Gemma 1's GemmaForCausalLM) is refused, even with --assume-architecture."""
    cfg = json.loads((Path(__file__).parent.parent / "configs" / "models"
                      / "qwen3-0.6b.json").read_text())
    cfg.pop("_source", None)
    cfg.update(architectures=["GemmaForSequenceClassification"], model_type="gemma")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for extra in ([], ["--assume-architecture", "dense-decoder"]):
        r = completed(["estimate", "--model", str(path), "--gpu", "H100-80GB", *extra])
        assert r.returncode == 2
        one_error(r.stderr, "GemmaForSequenceClassification is a classification checkpoint "
                  "whose causal LM")


def test_pasted_command_applies_runner_and_task() -> None:
    cmd = parse_tokens(["vllm", "serve", "Qwen/Qwen3-Embedding-8B", "--runner", "pooling",
                        "--convert", "embed", "--override-pooler-config",
                        '{"pooling_type": "MEAN"}'])
    assert cmd.settings["runner"] == "pooling" and cmd.settings["convert"] == "embed"
    assert [f for f, _why in cmd.not_modelled] == ["--override-pooler-config"]
    old = parse_tokens(["vllm", "serve", "intfloat/e5-mistral-7b-instruct", "--task", "embed"])
    assert old.settings["task"] == "embed"


def test_log_reader_takes_the_runner_from_non_default_args() -> None:
    log = parse_log(
        "INFO 08-03 15:21:40 [api_server.py:1839] vLLM API server version 0.11.0\n"
        "INFO 08-03 15:21:40 [utils.py:233] non-default args: {'model': '/m', "
        "'runner': 'pooling', 'convert': 'embed', 'max_model_len': 8192}\n")
    assert log.settings["runner"] == "pooling" and log.settings["convert"] == "embed"


def test_chunked_prefill_off_is_not_modelled_on_the_pooling_runner_only() -> None:
    """--no-enable-chunked-prefill changes nothing V1's generation runner does (it always
    chunks), but a pooling model runs the token-level task and max_model_len-sized batches."""
    pooling = parse_tokens(["vllm", "serve", "m", "--runner", "pooling",
                            "--no-enable-chunked-prefill"])
    assert [f for f, _why in pooling.not_modelled] == ["--no-enable-chunked-prefill"]
    assert "--no-enable-chunked-prefill" not in pooling.ignored
    generation = parse_tokens(["vllm", "serve", "m", "--no-enable-chunked-prefill"])
    assert generation.not_modelled == () and "--no-enable-chunked-prefill" in generation.ignored


def test_async_scheduling_is_not_modelled_on_the_pooling_runner_only() -> None:
    """vLLM turns async scheduling off by default for a pooling model (config/vllm.py); asked for,
    0.28.0's AllPool clones every request's hidden states in the token_embed task."""
    pooling = parse_tokens(["vllm", "serve", "m", "--runner", "pooling", "--async-scheduling"])
    assert [f for f, _why in pooling.not_modelled] == ["--async-scheduling"]
    assert "--async-scheduling" not in pooling.ignored
    generation = parse_tokens(["vllm", "serve", "m", "--async-scheduling"])
    assert generation.not_modelled == () and "--async-scheduling" in generation.ignored


def _bare(tmp_path, arch: str = "MistralModel"):  # type: ignore[no-untyped-def]
    """mistral-7b-instruct-v0.3's config.json as e5-mistral-7b-instruct names it."""
    cfg = json.loads((Path(__file__).parent.parent / "configs" / "models"
                      / "mistral-7b-instruct-v0.3.json").read_text())
    cfg.pop("_source", None)
    cfg["architectures"] = [arch]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_bare_decoder_is_its_decoder_on_the_pooling_runner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """vLLM 0.11.0 / 0.33.0 registry.py _EMBEDDING_MODELS: MistralModel → ('llama',
    'LlamaForCausalLM'). On the pooling runner it is the same rank as the MistralForCausalLM
    checkpoint of the same shapes: the same weights without the untied lm_head (32,768 × 4,096
    × 2 B), the same KV cache."""
    dep = Deployment(engine_version="0.20.0", max_model_len=8192, runner="pooling")
    bare = estimate(str(_bare(tmp_path)), dep, gpu_name="H100-80GB")
    causal = estimate("mistral-7b-instruct-v0.3", dep, gpu_name="H100-80GB")
    assert bare.spec.architecture == "MistralModel" and bare.spec.family == "llama"
    assert bare.weights_bytes_max == causal.weights_bytes_max
    assert bare.kv_cache_tokens == causal.kv_cache_tokens
    gen = estimate("mistral-7b-instruct-v0.3", Deployment(engine_version="0.20.0",
                                                          max_model_len=8192),
                   gpu_name="H100-80GB")
    assert gen.ranks[0].weights_bytes - bare.ranks[0].weights_bytes >= 32768 * 4096 * 2


@pytest.mark.parametrize(("args", "text"), [
    ([], "MistralModel is a decoder saved without its lm_head"),
    (["--runner", "generate"], "MistralModel is a decoder saved without its lm_head"),
    (["--engine", "sglang", "--engine-version", "0.5.4"], "SGLang's embedding server"),
])
def test_bare_decoder_needs_the_pooling_runner(tmp_path, args: list[str],  # type: ignore[no-untyped-def]
                                               text: str) -> None:
    """vLLM resolves --runner auto for it from the repository's sentence-transformers files
    (config/model.py _get_default_runner_type: get_pooling_config), which memprof cannot see."""
    version = [] if "--engine" in args else ["--engine-version", "0.20.0"]
    r = completed(["estimate", "--model", str(_bare(tmp_path)), "--gpu", "H100-80GB",
                   "--max-model-len", "8192", *version, *args])
    assert r.returncode == 2
    one_error(r.stderr, text)


# --- --convert classify: a score head on the decoder (vllm_pooling.py item 9) ---------------

RERANKER = json.dumps({"architectures": ["Qwen3ForSequenceClassification"],
                       "classifier_from_token": ["no", "yes"],
                       "is_original_qwen3_reranker": True})  # Qwen3-Reranker's model card


def _seq_cls(tmp_path, labels: int = 3, base: str = QWEN3_8B,  # type: ignore[no-untyped-def]
             arch: str = "Qwen3ForSequenceClassification"):
    """A bundled config saved as a classifier of ``labels`` labels (id2label)."""
    cfg = json.loads((Path(__file__).parent.parent / "configs" / "models"
                      / f"{base}.json").read_text())
    cfg.pop("_source", None)
    cfg["architectures"] = [arch]
    cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(labels)}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_classify_pooler_parts_by_hand() -> None:
    """T = 8192 over R = 256 requests, H = 4096, bf16, L = 1 label. classify (LAST): the gathered
    [R, H] bf16 + its fp32 copy + [R, L] logits and scores in fp32 = 256 × 4096 × 6 + 2 × 256 ×
    4. From 0.13.0 token_classify runs too: the kept scores 8192 × 1 × 4 + the last request's
    32 tokens × (4096 × 4 + 4) = 557,184 B, less, so classify sets the stage at both releases.
    With R = 8 (t = 1024) token_classify is the larger: 32,768 + 1024 × 16,388."""
    hidden, ids = (8192 + 256) * 4096 * 2, 256 * 32 * 4
    for version in ("0.12.0", "0.13.0"):
        parts = dict(pooler_parts(version, tokens=8192, rows=256, hidden=4096,
                                  model_itemsize=2, labels=1))
        assert sum(parts.values()) == hidden + ids + 256 * 4096 * 6 + 2 * 256 * 4
        assert any(k.startswith("classify (LAST)") for k in parts)
    few = dict(pooler_parts("0.13.0", tokens=8192, rows=8, hidden=4096, model_itemsize=2,
                            labels=1))
    token = next(b for k, b in few.items() if k.startswith("token_classify"))
    assert token == 8192 * 4 + 1024 * (4096 * 4 + 4)
    old = dict(pooler_parts("0.12.0", tokens=8192, rows=8, hidden=4096, model_itemsize=2,
                            labels=1))  # no token task before 0.13.0 under chunked prefill
    assert not any(k.startswith("token_classify") for k in old)
    v2 = dict(pooler_parts("0.33.0", tokens=8203, rows=8, hidden=4096, model_itemsize=2,
                           labels=1, v2=True))  # t = 1025 + 3 spread: the last request 1026
    assert next(b for k, b in v2.items() if k.startswith("token_classify")) == (
        8203 * 4 + 1026 * (4096 * 4 + 4))
    v1 = dict(pooler_parts("0.33.0", tokens=8203, rows=8, hidden=4096, model_itemsize=2,
                           labels=1))  # V1 gives the last request all 3: 1028
    assert next(b for k, b in v1.items() if k.startswith("token_classify")) == (
        8203 * 4 + 1028 * (4096 * 4 + 4))


def test_score_labels_as_vllm_sets_them() -> None:
    """adapters.py SequenceClassificationConfig (0.11.0, 0.33.0): from_2_way_softmax → 1,
    no_post_processing → one label a token; models/config.py Qwen3ForSequenceClassificationConfig:
    is_original_qwen3_reranker sets from_2_way_softmax; else transformers' PretrainedConfig
    (id2label wins over num_labels; 2 without either)."""
    q3 = "Qwen3ForSequenceClassification"
    assert score_labels({"classifier_from_token": ["no", "yes"],
                         "method": "from_2_way_softmax"}, "Qwen3ForCausalLM")[0] == 1
    assert score_labels({"classifier_from_token": ["no", "yes"],
                         "is_original_qwen3_reranker": True}, q3)[0] == 1
    assert score_labels({"classifier_from_token": ["Yes"], "method": "no_post_processing"},
                        "Gemma2ForCausalLM")[0] == 1
    assert score_labels({"classifier_from_token": ["a", "b", "c"],
                         "method": "no_post_processing"}, q3)[0] == 3
    assert score_labels({"id2label": {"0": "a", "1": "b", "2": "c"}, "num_labels": 5}, q3)[0] == 3
    assert score_labels({"num_labels": 4}, q3)[0] == 4
    assert score_labels({}, q3) == (2, "no id2label or num_labels in the config: transformers' "
                                       "default 2")


@pytest.mark.parametrize(("cfg", "arch", "text"), [
    ({"classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": True},
     "Qwen2ForSequenceClassification", "classifier_from_token without a method"),
    ({"classifier_from_token": ["no", "yes"], "method": "softmax"},
     "Qwen3ForSequenceClassification", "conversion method 'softmax'"),
    ({"classifier_from_token": ["a", "b", "c"], "method": "from_2_way_softmax"},
     "Qwen3ForSequenceClassification", "needs classifier_from_token with two tokens"),
    ({"classifier_from_token": "yes", "method": "no_post_processing"},
     "Qwen3ForSequenceClassification", "must be a non-empty list"),
    ({"num_labels": 0}, "Qwen3ForSequenceClassification", "positive integer"),
])
def test_score_labels_refuses_what_vllm_asserts(cfg: dict[str, object], arch: str,
                                                text: str) -> None:
    with pytest.raises(ConfigError, match=text.replace("(", r"\(")):
        score_labels(cfg, arch)


@pytest.mark.parametrize("version", ["0.11.0", "0.20.0", "0.33.0"])
def test_seq_cls_checkpoint_is_its_causal_lm_plus_an_fp32_score_head(
        tmp_path, version: str) -> None:  # type: ignore[no-untyped-def]
    """A Qwen3ForSequenceClassification of Qwen3-8B's shapes with 3 labels, no runner flag: vLLM
    resolves --runner auto / --convert auto to pooling / classify (_SUFFIX_TO_DEFAULTS). Its
    rank is the embedding model's (no lm_head) plus the score head 3 × 4096 × 4 B = 48 KiB on
    every rank (ReplicatedLinear, fp32), TP2 included; PIECEWISE graphs only."""
    path = str(_seq_cls(tmp_path))
    for tp in (1, 2):
        cls = estimate(path, Deployment(engine_version=version, max_model_len=8192, tp=tp),
                       gpu_name="H100-80GB")
        emb = estimate(QWEN3_8B, Deployment(engine_version=version, max_model_len=8192,
                                            runner="pooling", tp=tp), gpu_name="H100-80GB")
        assert (cls.deployment.runner, cls.deployment.convert) == ("pooling", "classify")
        assert cls.spec.family == "qwen3"
        for c, e in zip(cls.ranks, emb.ranks, strict=True):
            assert c.weights_bytes - e.weights_bytes == 3 * 4096 * 4
        assert _component(cls, "score head") == 3 * 4096 * 4
        tensor = next(t for t in cls.ranks[0].tensors if t.module == "score")
        assert "3×4096×4B (rep" in tensor.formula and tensor.bytes_each == 3 * 4096 * 4
        assert any("num_labels 3 (the config's id2label)" in n for n in cls.notes)
        assert set(graph_modes(cls.deployment)) == {"PIECEWISE"}
        stage = next(s for s in activation_stages(_ctx(cls))
                     if s.name.startswith("pooler"))
        assert any(n.startswith("classify (LAST)") for n, _b in stage.parts)


def test_qwen3_reranker_through_hf_overrides() -> None:
    """The model card's --hf-overrides on Qwen3-8B's shapes (Qwen3-Reranker-8B): the score head
    is one label (from_2_way_softmax), 4096 × 4 B; the lm_head it is cut from lives only inside
    the weight load."""
    dep = Deployment(engine_version="0.33.0", max_model_len=8192, hf_overrides=RERANKER)
    rr = estimate(QWEN3_8B, dep, gpu_name="H100-80GB")
    emb = estimate(QWEN3_8B, Deployment(engine_version="0.33.0", max_model_len=8192,
                                        runner="pooling"), gpu_name="H100-80GB")
    assert rr.ranks[0].weights_bytes - emb.ranks[0].weights_bytes == 4096 * 4
    assert any("num_labels 1 (method from_2_way_softmax" in n for n in rr.notes)
    r = completed(["estimate", "--model", QWEN3_8B, "--gpu", "H100-80GB", "--max-model-len",
                   "8192", "--hf-overrides", RERANKER])
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "--convert classify" in text and "token_classify" in text


def test_task_score_is_classify_for_a_cross_encoder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """0.11.0 config/model.py _task_to_convert: 'score' is classify where the default pooling
    task is classify (a *ForSequenceClassification), embed otherwise."""
    path = str(_seq_cls(tmp_path, labels=1))
    e = estimate(path, Deployment(engine_version="0.11.0", max_model_len=8192, task="score"),
                 gpu_name="H100-80GB")
    assert e.deployment.convert == "classify" and _component(e, "score head") == 4096 * 4


@pytest.mark.parametrize(("args", "text"), [
    (["--runner", "pooling", "--convert", "embed"],
     "Qwen3ForSequenceClassification is a classification checkpoint: vLLM builds it only as "
     "--convert classify"),
    (["--engine", "sglang", "--engine-version", "0.5.4"], "SGLang's classification"),
    (["--hf-overrides", '{"head_dtype": "model"}'], "head_dtype 'model'"),
    (["--hf-overrides", '{"classifier_from_token": ["no", "yes"], "method": "x"}'],
     "conversion method 'x'"),
    (["--quantization", "fp8"], "quantised with a score head"),
])
def test_classify_refusals_are_one_line(tmp_path, args: list[str],  # type: ignore[no-untyped-def]
                                        text: str) -> None:
    version = [] if "--engine" in args else ["--engine-version", "0.20.0"]
    r = completed(["estimate", "--model", str(_seq_cls(tmp_path)), "--gpu", "H100-80GB",
                   "--max-model-len", "8192", *version, *args])
    assert r.returncode == 2
    one_error(r.stderr, text)


def test_num_labels_override_replaces_the_configs_id2label(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--hf-overrides reaches PretrainedConfig.update, whose num_labels setter rebuilds an
    id2label of another length (transformers configuration_utils.py): 3 labels in the config,
    num_labels 1 in the override → a [1, H] score head (4096 × 4 B)."""
    e = estimate(str(_seq_cls(tmp_path)), Deployment(engine_version="0.20.0", max_model_len=8192,
                                                     hf_overrides='{"num_labels": 1}'),
                 gpu_name="H100-80GB")
    assert _component(e, "score head") == 4096 * 4

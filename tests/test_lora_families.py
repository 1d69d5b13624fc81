"""LoRA for the families whose vLLM class supports it beyond Llama / Qwen2 / Qwen3 / Mixtral
(``Family.lora`` rows): the buffers of ``memprof/core/terms/lora.py`` against hand counts from
vLLM's source, and the refusals where a release has no LoRA for the family or puts it on the
experts.

Read in the wheels: Phi3ForCausalLM is LlamaForCausalLM with ``packed_modules_mapping =
{"qkv_proj": ["qkv_proj"], "gate_up_proj": ["gate_up_proj"]}``, so QKVParallelLinearWithLoRA and
ColumnParallelLinearWithLoRA wrap the fused linears with one A [L, 1, r, H] and one B over the
whole output (0.7.1 lora/layers.py, 0.33.0 lora/layers/column_parallel_linear.py);
Glm4MoeForCausalLM (0.10.1 - 0.11.0) puts LoRA on attention, the shared expert and the dense
layer, not on its ``nn.Linear`` router; Gemma 2 has no embedding modules."""

from __future__ import annotations

import pytest

from memprof.cli import run
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.models.families import family_row
from memprof.core.models.families.row import LoraSupport
from memprof.core.terms.lora import lora_graph_nodes
from memprof.core.versions import value_at

MiB = 1 << 20


def _lora(model: str, dep: Deployment, gpu: str = "H100") -> dict[str, int]:
    e = estimate(model, dep, gpu=resolve_gpu(gpu, None))
    return {c.name: c.bytes for c in e.ranks[0].components if c.name.startswith("LoRA")}


def test_phi3_mini_fused_qkv_and_gate_up_are_one_slice_each() -> None:
    """Phi-3-mini (H 3072, 32 heads = 32 KV heads of 96, I 8192, 32 layers, vocab 32064, untied)
    at 0.8.2 (V1), TP 2, max_loras 2, rank 16, bf16."""
    got = _lora("phi-3-mini-4k-instruct",
                Deployment(engine_version="0.8.2", tp=2, enable_lora=True, max_loras=2,
                           max_lora_rank=16, vllm_use_v1=1))
    n, r, h, i, t = 2, 16, 3072, 8192, 2
    qkv = n * r * h + n * (3 * 32 // t * 96) * r  # one A, one B over q + k + v of the rank
    o = n * r * (h // t) + n * h * r
    gate_up = n * r * h + n * (2 * i // t) * r  # one A, one B over gate + up
    down = n * r * (i // t) + n * h * r
    per_layer = 2 * (qkv + o + gate_up + down)  # bf16; every tensor a whole 512-B block
    assert got["LoRA stacked A/B buffers"] == 32 * per_layer == 60 * MiB
    v, x = 32064, 256
    embed = 2 * (n * (v + x) * r + n * h * r + n * x * h)
    head = 2 * (n * r * h + n * 32512 * r + n * x * h)  # B: 32320 rows padded to 256
    assert got["LoRA embed_tokens / lm_head buffers"] == embed + head
    # embed_tokens + 256 × 2 rows (32064 → 32576), lm_head 32064 → 32512 (padded to 256), / TP
    assert got["LoRA extra vocabulary rows"] == (512 // t + 448 // t) * h * 2


def test_phi3_without_the_extra_vocabulary_from_0_12() -> None:
    got = _lora("phi-3-mini-4k-instruct", Deployment(engine_version="0.12.0", enable_lora=True))
    assert "LoRA extra vocabulary rows" not in got
    r, h, i = 16, 3072, 8192
    per_layer = 2 * (r * h + 3 * h * r + r * h + h * r + r * h + 2 * i * r + r * i + h * r)
    assert got["LoRA stacked A/B buffers"] == 32 * per_layer


def _ctx(model: str, version: str) -> TermContext:
    dep = Deployment(engine_version=version, enable_lora=True, dtype="float16")
    e = estimate(model, dep, gpu=resolve_gpu("T4", None))
    r = e.ranks[0]
    return TermContext(spec=e.spec, dep=e.deployment, gpu=e.gpu, coord=r.coord, plan=r.plan,
                       weights_bytes=r.weights_bytes, model_dtype=e.model_dtype, quant=e.quant)


def test_phi3_decode_graph_nodes_at_0_7_1_count_one_slice() -> None:
    """0.7.1's V0 decode: a fill and a bgmv shrink / expand per slice; Phi-3's four linears are
    one slice each (1 + 2 each: 12 a layer, Llama's 18), and the embedding's 6."""
    assert lora_graph_nodes(_ctx("phi-3-mini-4k-instruct", "0.7.1")) == 32 * 12 + 6


def test_glm_4_5_air_shared_expert_and_dense_layer_no_router() -> None:
    """GLM-4.5-Air (H 4096, 96 heads, 8 KV heads of 128, 46 layers: layer 0 dense I 10944, the
    rest 128 experts with one shared expert of 1408) at 0.10.2, TP 4, one adapter of rank 16:
    the router (an fp32 nn.Linear) and the routed experts carry no LoRA."""
    got = _lora("glm-4.5-air", Deployment(engine_version="0.10.2", tp=4, enable_lora=True),
                gpu="H200")
    r, h, t = 16, 4096, 4
    qkv = 3 * r * h + (96 // t * 128 + 2 * (8 // t) * 128) * r
    o = r * (96 * 128 // t) + h * r

    def mlp(inter: int) -> int:
        return 2 * r * h + 2 * (inter // t) * r + r * (inter // t) + h * r

    moe_layer, dense_layer = qkv + o + mlp(1408), qkv + o + mlp(10944)
    assert got["LoRA stacked A/B buffers"] == 2 * (45 * moe_layer + dense_layer) == 53_786_112
    assert "LoRA embed_tokens / lm_head buffers" not in got  # no embedding modules


def test_qwen3_moe_router_is_a_lora_linear_before_expert_lora() -> None:
    """Qwen3-30B-A3B (H 2048, 32 heads, 4 KV heads of 128, 48 layers of 128 experts) at 0.11.0,
    TP 2: attention and the ReplicatedLinear router, whole on every rank."""
    got = _lora("qwen3-30b-a3b", Deployment(engine_version="0.11.0", tp=2, enable_lora=True),
                gpu="H200")
    r, h, t = 16, 2048, 2
    qkv = 3 * r * h + (32 // t * 128 + 2 * (4 // t) * 128) * r
    o = r * (32 * 128 // t) + h * r
    router = r * h + 128 * r
    assert got["LoRA stacked A/B buffers"] == 48 * 2 * (qkv + o + router)


def test_gemma2_decoder_linears_only() -> None:
    """Gemma-2-9B (H 3584, 16 heads, 8 KV heads of 256, I 14336, 42 layers) at 0.8.5: q/k/v and
    gate/up packed (3 and 2 slices), no embedding modules, no extra vocabulary."""
    got = _lora("gemma-2-9b-it", Deployment(engine_version="0.8.5", enable_lora=True))
    r, h, i = 16, 3584, 14336
    per_layer = (3 * r * h + (4096 + 2048 + 2048) * r + r * 4096 + h * r
                 + 2 * r * h + 2 * i * r + r * i + h * r)
    assert got["LoRA stacked A/B buffers"] == 42 * 2 * per_layer
    assert set(got) == {"LoRA stacked A/B buffers", "LoRA punica metadata"}


def test_the_rows_say_what_the_wheels_say() -> None:
    phi3 = value_at(family_row("phi3").lora, "0.33.0")
    assert isinstance(phi3, LoraSupport) and phi3.fused_slices and phi3.embeddings
    glm = value_at(family_row("glm4_moe").lora, "0.11.0")
    assert isinstance(glm, LoraSupport) and not glm.router and not glm.experts
    for family, first in (("qwen2_moe", "0.10.0"), ("qwen3_moe", "0.10.0"),
                          ("glm4_moe", "0.10.1"), ("gemma3", "0.8.0"), ("gemma3_mm", "0.8.0")):
        assert family_row(family).lora[0].since == first
    # FusedMoEWithLoRA is first released in 0.11.1: every MoE family's experts carry LoRA there
    for family in ("mixtral", "qwen2_moe", "qwen3_moe", "glm4_moe"):
        before = value_at(family_row(family).lora, "0.11.0")
        at = value_at(family_row(family).lora, "0.11.1")
        assert isinstance(before, LoraSupport) and not before.experts
        assert isinstance(at, LoraSupport) and at.experts


@pytest.mark.parametrize(("model", "version", "says"), [
    ("gemma-3-1b-it", "0.7.3", "vLLM 0.7.3 has no LoRA for it: Gemma 3 support (first released "
     "in 0.8.0)"),
    ("qwen3-30b-a3b", "0.9.2", "first released in 0.10.0"),
    ("glm-4.5-air", "0.10.0", "SupportsLoRA on Glm4MoeForCausalLM (first released in 0.10.1)"),
    ("qwen3-30b-a3b", "0.11.1", "experts (FusedMoEWithLoRA)"),
    ("mixtral-8x7b", "0.11.1", "experts (FusedMoEWithLoRA)"),
    # classes with LoRA on layers memprof does not size: refused with what they are
    ("deepseek-v3", "0.10.1", "has no LoRA for it: SupportsLoRA on DeepseekV2ForCausalLM "
     "(first released in 0.10.2)"),
    ("deepseek-v3", "0.10.2", "LoRA on the deepseek_v3 family's MLA attention projections,"),
    ("kimi-k2", "0.12.0", "MLA attention projections and the experts"),
    ("gpt-oss-20b", "0.11.0", "(first released in 0.11.1)"),
    ("gpt-oss-20b", "0.12.0", "experts (FusedMoEWithLoRA)"),
    ("minimax-m2.7", "0.14.1", "(first released in 0.15.0)"),
    ("nemotron-h-8b-base-8k", "0.12.0", "Mamba-2 mixers (in_proj, out_proj)"),
    ("granite-4.0-h-350m", "0.12.0", "Mamba-2 mixers (in_proj, out_proj)"),
    ("qwen3-next-80b-a3b-instruct", "0.11.1", "Gated DeltaNet projections and the experts"),
    ("qwen3.5-27b", "0.20.0", "qwen3_5 family's Gated DeltaNet projections,"),
    ("llama-4-scout-17b-16e", "0.11.0", "(first released in 0.11.1)"),
    ("qwen3-vl-4b-instruct", "0.11.0", "vision tower linears"),
    ("qwen3-vl-30b-a3b-instruct", "0.12.0", "experts (FusedMoEWithLoRA)"),
])
def test_refusals_name_the_release(capsys, model: str, version: str, says: str) -> None:  # type: ignore[no-untyped-def]
    tp = "1" if model.startswith(("gpt-oss-20b", "nemotron-h", "granite", "qwen3-vl-4b")) else "8"
    assert run(["estimate", "-m", model, "--gpu", "H200", "-tp", tp, "--engine-version",
                version, "--enable-lora"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: ") and says in err[0], err
    assert err[1].startswith("hint: "), err
    # the hint offers only the spans memprof sizes, never one it refuses (expert LoRA)
    assert "0.11.1 – today" not in err[1] and "0.12.0 – today" not in err[1]


def test_mistral_has_its_own_class_without_embedding_lora_from_0_15() -> None:
    """vLLM 0.15.0 registers MistralForCausalLM as mistral.py's own subclass of LlamaForCausalLM
    with ``embedding_modules = {}`` (0.14.1: LlamaForCausalLM itself); Llama keeps its LoRA
    embed_tokens / lm_head."""
    key = "LoRA embed_tokens / lm_head buffers"
    for version, mistral_has in (("0.14.1", True), ("0.15.0", False), ("0.33.0", False)):
        mistral = _lora("mistral-7b-instruct-v0.3",
                        Deployment(engine_version=version, enable_lora=True))
        assert (key in mistral) is mistral_has, version
        llama = _lora("llama-3.1-8b", Deployment(engine_version=version, enable_lora=True))
        assert key in llama
    # the decoder's LoRA is the same class's either side of the split
    before = _lora("mistral-7b-instruct-v0.3", Deployment(engine_version="0.14.1",
                                                          enable_lora=True))
    assert mistral["LoRA stacked A/B buffers"] == before["LoRA stacked A/B buffers"]


def test_qwen2_5_vl_language_model_only() -> None:
    """Qwen2.5-VL-7B's language model (Qwen2: H 3584, 28 heads, 4 KV heads of 128, I 18944, 28
    layers) at 0.8.5: its decoder linears, not the vision tower (filtered out by the LoRA model
    manager), no embedding LoRA."""
    got = _lora("qwen2.5-vl-7b-instruct", Deployment(engine_version="0.8.5", enable_lora=True))
    r, h, i = 16, 3584, 18944
    per_layer = (3 * r * h + (3584 + 512 + 512) * r + r * h + h * r
                 + 2 * r * h + 2 * i * r + r * i + h * r)
    assert got["LoRA stacked A/B buffers"] == 28 * 2 * per_layer == 77 * MiB
    assert set(got) == {"LoRA stacked A/B buffers", "LoRA punica metadata"}


def test_qwen3_vl_language_model_as_qwen3_from_0_11_1() -> None:
    """Qwen3-VL-4B's language model (Qwen3: H 2560, 32 heads, 8 KV heads of 128, I 9728, 36
    layers, tied embeddings): the decoder linears at 0.12.0 (no embedding modules before
    0.16.0), then embed_tokens / lm_head, the tied lm_head wrapped again up to 0.27.1."""
    got = _lora("qwen3-vl-4b-instruct", Deployment(engine_version="0.12.0", enable_lora=True))
    r, h, i = 16, 2560, 9728
    per_layer = (3 * r * h + (4096 + 1024 + 1024) * r + r * 4096 + h * r
                 + 2 * r * h + 2 * i * r + r * i + h * r)
    assert got["LoRA stacked A/B buffers"] == 36 * 2 * per_layer == 63 * MiB
    assert "LoRA embed_tokens / lm_head buffers" not in got
    key = "LoRA embed_tokens / lm_head buffers"
    wrapped_twice = _lora("qwen3-vl-4b-instruct",
                          Deployment(engine_version="0.27.1", enable_lora=True))[key]
    once = _lora("qwen3-vl-4b-instruct", Deployment(engine_version="0.28.0", enable_lora=True))[key]
    v = 151936
    assert wrapped_twice - once == 2 * (v * r + h * r)  # a second A [1, V, r] and B [1, 1, H, r]

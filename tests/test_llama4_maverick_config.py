"""The bundled Llama 4 Maverick config (``configs/models/llama-4-maverick-17b-128e.json``; its
``_source`` says how it was assembled: not a verbatim copy) against the checkpoint's published
parameter count, 401,583,781,376 (meta-llama/Llama-4-Maverick-17B-128E(-Instruct), quoted in
public repositories: tests/test_family_llama4.py), and one TP8 rank against a hand count of how
vLLM 0.12.0 ``llama4.py`` / ``mllama4.py`` shard it."""

from __future__ import annotations

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.weights import rank_weights
from memprof.core.weights.rank import unsharded_total

MAVERICK = "llama-4-maverick-17b-128e"
MAVERICK_PARAMS = 401_583_781_376
H, V, LAYERS, I_MOE, I_MLP, EXPERTS = 5120, 202_048, 48, 8192, 16384, 128
VH, VI, V_LAYERS = 1408, 5632, 34  # the vision tower


def test_the_bundled_config_reads_as_maverick() -> None:
    spec = load_model(MAVERICK)
    assert spec.num_layers == LAYERS
    kinds = [x.mlp.kind for x in spec.layers]
    assert kinds == ["dense", "moe"] * (LAYERS // 2)  # interleave_moe_layer_step 2
    assert {x.mlp.num_experts for x in spec.layers if x.mlp.kind == "moe"} == {EXPERTS}
    # no no_rope_layers in the config: HF fills every 4th layer NoPE
    assert [x.index for x in spec.layers if x.attention.rope == "none"] == list(range(3, 48, 4))
    assert spec.max_position_embeddings == 1_048_576
    assert spec.vision is not None and spec.vision.depth == V_LAYERS


def test_weights_match_the_published_parameter_count() -> None:
    assert unsharded_total(load_model(MAVERICK), None) == 2 * MAVERICK_PARAMS  # bf16


def test_one_tp8_rank_by_hand() -> None:
    spec = load_model(MAVERICK)
    dep = Deployment(tp=8)
    got = sum(t.bytes for t in rank_weights(spec, dep, None, ranks(dep)[0], "sm90"))
    tp = 8
    attn = H * (40 // tp + 2 * (8 // tp)) * 128 + (40 // tp) * 128 * H  # qkv + o, 5 q / 1 kv head
    moe = H * EXPERTS + EXPERTS * 3 * H * (I_MOE // tp) + 3 * H * (I_MOE // tp)  # router whole
    dense = 3 * H * (I_MLP // tp)
    text = (LAYERS * (attn + 2 * H) + LAYERS // 2 * (moe + dense)
            + 2 * (V // tp) * H + H)  # embed_tokens and lm_head vocab-parallel, final norm
    sharded = (V_LAYERS * (3 * VH * VH + 3 * VH + VH * VH + VI * VH + VI + VH * VI)
               + 3 * 14 * 14 * VH + VI * 4096 + 4096 * 4096 + 4096 * H)
    whole = V_LAYERS * (VH + VH + 4 * VH) + VH + 577 * VH + 4 * VH  # row biases, norms, embeds
    assert got == 2 * (text + sharded // tp + whole)

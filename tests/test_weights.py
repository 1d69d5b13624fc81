"""Per-rank weights against hand calculations and vLLM's layouts."""

import pytest

from memprof.base.errors import LayoutError
from memprof.base.units import GiB
from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.weights import rank_weights, unsharded_total


def rank_total(name: str, dep: Deployment, arch: str = "sm90", rank: int = 0) -> int:
    spec = load_model(name)
    coord = ranks(dep)[rank]
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, coord, arch))


def test_qwen3_32b_bf16_by_hand() -> None:
    # GIVEN Qwen3-32B: H 5120, 64 layers, 64 q heads × 128, 8 KV heads, I 25600, vocab 151936
    h, hd, layers, i, v = 5120, 128, 64, 25600, 151936
    per_layer = (h * (64 + 2 * 8) * hd  # qkv
                 + 64 * hd * h  # o_proj
                 + 2 * hd  # q_norm, k_norm
                 + 3 * h * i  # gate, up, down
                 + 2 * h)  # two RMSNorms
    expected = 2 * (layers * per_layer + 2 * v * h + h)  # + embed, lm_head, final norm; bf16
    # THEN memprof matches to the byte, and vLLM's reported 61.03 GiB (seed 001) within 0.5%
    assert rank_total("qwen3-32b", Deployment()) == expected
    assert abs(expected / GiB - 61.03) / 61.03 < 0.005


def test_vocab_padding_to_64_then_split() -> None:
    # Llama-3.1-8B vocab 128256 is a multiple of 64: no padding; each TP rank holds 1/tp
    spec = load_model("llama-3.1-8b")
    dep = Deployment(tp=4)
    t = {x.module: x for x in rank_weights(spec, dep, None, ranks(dep)[3])}
    assert t["model.embed_tokens"].bytes == 128256 // 4 * 4096 * 2
    # gpt-oss vocab 201088 = 64 × 3142: two ranks hold 100544 rows each
    gpt = load_model("gpt-oss-120b")
    dep2 = Deployment(tp=2)
    t2 = {x.module: x for x in rank_weights(gpt, dep2, gpt.quant, ranks(dep2)[1])}
    assert t2["lm_head"].bytes == 100544 * 2880 * 2


def test_vocab_not_divisible_is_a_layout_error() -> None:
    # vLLM divides the padded vocab by TP exactly (it asserts); 151936 / 3 is not whole
    spec = load_model("qwen3-0.6b")
    with pytest.raises(LayoutError, match="padded vocabulary"):
        rank_weights(spec, Deployment(tp=3), None, ranks(Deployment(tp=3))[0])


def test_kv_heads_replicated_when_tp_exceeds_them() -> None:
    spec = load_model("llama-3.1-70b")  # 8 KV heads
    dep = Deployment(tp=16)
    t = {x.module.split(".")[-1]: x for x in rank_weights(spec, dep, None, ranks(dep)[0])}
    kv = t["qkv_proj(kv)"]
    assert kv.bytes_each == 2 * 1 * 128 * 8192 * 2  # one K and one V head per rank
    assert kv.replicas == 2


def test_larger_tp_splits_sharded_tensors() -> None:
    one = rank_total("llama-3.1-70b", Deployment(tp=1))
    eight = rank_total("llama-3.1-70b", Deployment(tp=8))
    assert one / 8 < eight < one / 7.9  # norms are replicated, everything else splits


def test_pp_stages_hold_their_layers_and_the_ends() -> None:
    spec = load_model("deepseek-r1")
    dep = Deployment(pp=2, tp=8)
    first = {t.module for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0])}
    last = {t.module for t in rank_weights(spec, dep, spec.quant, ranks(dep)[8])}
    assert "model.embed_tokens" in first and "lm_head" not in first
    assert "lm_head" in last and "model.norm" in last and "model.embed_tokens" not in last


def test_expert_parallel_spreads_experts_unevenly_when_needed() -> None:
    spec = load_model("deepseek-v3")  # 256 experts over DP3 × EP: 256 = 3·85 + 1
    dep = Deployment(dp=3, enable_expert_parallel=True)
    sizes = [rank_total("deepseek-v3", dep, rank=r) for r in range(3)]
    assert sizes[0] > sizes[1] == sizes[2]
    experts = [t for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0])
               if t.module.endswith("mlp.experts")]
    assert experts[0].formula.startswith("86 experts")


def test_fp8_block_scales_and_unquantised_router() -> None:
    spec = load_model("deepseek-r1")
    dep = Deployment(tp=8)
    t = {x.module.split("layers.*.")[-1]: x for x in
         rank_weights(spec, dep, spec.quant, ranks(dep)[0])}
    # o_proj: RowParallel 7168 × (128·128/8) fp8 + ceil(7168/128)·ceil(2048/128) fp32 scales
    assert t["self_attn.o_proj"].bytes_each == 7168 * 2048 + 4 * 56 * 16
    # the MoE gate stays bf16 (quant_config=None), the correction bias fp32
    assert t["mlp.gate"].bytes_each == 256 * 7168 * 2
    assert t["mlp.gate.e_score_correction_bias"].bytes_each == 256 * 4
    # kv_b_proj is fp8, so the absorbed W_UK_T/W_UV copy exists: 16 heads × 512 × 256 × 2 B
    assert t["self_attn.mla_attn.W_UK_T+W_UV"].bytes_each == 16 * 512 * 256 * 2


@pytest.mark.parametrize(("arch", "per_expert"), [("sm90", 13_282_560), ("sm100", 14_449_664)])
def test_gpt_oss_mxfp4_experts_with_kernel_padding(arch: str, per_expert: int) -> None:
    # vLLM 0.33.0 Mxfp4MoEMethod: SM90 Triton pads scale rows to 256 and K to 2
    # (HopperMXScaleLayout); SM100 FlashInfer pads I 2880→2944 and H 2880→3072; biases become
    # fp32 (hand numbers in the helper report).
    spec = load_model("gpt-oss-120b")
    dep = Deployment()
    experts = [t for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], arch)
               if ".mlp.experts" in t.module]
    assert sum(t.bytes_each for t in experts) == 128 * per_expert
    assert all(t.count == 36 for t in experts)


@pytest.mark.parametrize(
    ("name", "dep", "gib"),
    [  # reference/deepseek_v4.md §4.3, checkpoint-exact formulas (fp32 vs e8m0 scales differ
        # by < 0.05%)
        ("deepseek-v4-pro", Deployment(tp=8), 101.94),
        ("deepseek-v4-flash", Deployment(tp=8), 19.24),
        ("deepseek-v4-pro", Deployment(dp=8, enable_expert_parallel=True), 122.42),
        ("deepseek-v4-flash", Deployment(tp=2, enable_expert_parallel=True), 73.26),
    ],
)
def test_deepseek_v4_per_rank_weights(name: str, dep: Deployment, gib: float) -> None:
    assert abs(rank_total(name, dep) / GiB - gib) / gib < 0.001


def test_deepseek_v4_checkpoint_total() -> None:
    # Flash checkpoint total_size 159,609,485,896 B (deepseek_v4.md §4.1) includes the MTP block.
    # memprof keeps block scales in fp32 (vLLM) where the checkpoint stores 1-byte e8m0, and
    # tid2eid in int32 where it stores int64: within 0.1%.
    spec = load_model("deepseek-v4-flash", speculative_mtp=True)
    total = unsharded_total(spec, spec.quant)
    assert abs(total - 159_609_485_896) / 159_609_485_896 < 0.001


def test_every_tensor_is_its_parameters() -> None:
    """Each tensor lists the parameters the engine allocates (shape × dtype), and their bytes are
    the tensor's bytes, for every bundled model and a few layouts (the tracer allocates these)."""
    from memprof.core.deployment import Deployment, ranks
    from memprof.core.models import bundled_models

    for name in bundled_models():
        spec = load_model(name)
        for dep in (Deployment(), Deployment(tp=8)):
            try:
                coords = ranks(dep)
                tensors = rank_weights(spec, dep, spec.quant, coords[-1], "sm100")
            except Exception as exc:  # a layout the model refuses
                assert "divisible" in str(exc) or "divide" in str(exc)
                continue
            for t in tensors:
                assert t.params, (name, t.module)
                assert sum(p.bytes for p in t.params) == t.bytes_each, (name, t.module)


@pytest.mark.parametrize("model", ["qwen3-32b", "deepseek-r1", "gpt-oss-120b",
                                   "deepseek-v4-flash", "qwen3-235b-a22b", "deepseek-r1-nvfp4"])
def test_in_order_params_equal_the_full_build(model: str) -> None:
    """``weights_in_order_params`` builds each layer kind once and renames its parameters; it
    lists exactly the parameters, names and bytes of ``weights_in_order`` (every layer built)."""
    from memprof.core.weights.rank import _IN_ORDER, weights_in_order, weights_in_order_params

    spec = load_model(model)
    for dep in (Deployment(), Deployment(tp=2, pp=2), Deployment(pp=3, engine_version="0.7.2"),
                Deployment(tp=4, dp=2, enable_expert_parallel=True)):
        for coord in list(ranks(dep))[::3]:
            full = [(f"{t.module}.{p.name}", p.bytes)
                    for t in weights_in_order(spec, dep, spec.quant, coord) for p in t.params]
            _IN_ORDER.clear()
            assert weights_in_order_params(spec, dep, spec.quant, coord) == full, (dep, coord)

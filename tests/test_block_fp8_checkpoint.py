"""Block-fp8 checkpoints as they declare themselves: the bundled Qwen/Qwen3-235B-A22B-FP8
(``quant_method: fp8``, ``weight_block_size: [128, 128]``, ``activation_scheme: dynamic`` and a
``modules_to_not_convert`` list of 283 names), its weights per rank counted by hand from the
layout the engines allocate, the engines' refusal of experts that do not split into whole blocks,
and the matcher of exclusion lists.

Sources:
- vLLM v0.9.2 (the release of published row 32) and v0.11.0
  ``model_executor/layers/quantization/fp8.py``: ``Fp8LinearMethod.create_weights`` (fp8
  ``weight`` of the rank's partition, fp32 ``weight_scale_inv`` of ``ceil(out/128) ×
  ceil(in/128)``), ``Fp8MoEMethod.create_weights`` (``w13_weight_scale_inv`` ``(E, 2·ceil(I/128),
  ceil(H/128))``, ``w2_weight_scale_inv`` ``(E, ceil(H/128), ceil(I/128))``, fp32, and the
  ``ValueError`` when ``I`` per rank is not a multiple of the block); neither release pads the
  weights on CUDA. ``models/qwen3_moe.py``: the router is ``ReplicatedLinear(...,
  quant_config=None)``.
- SGLang ``python/sglang/srt/layers/quantization/fp8.py`` (read in the 0.4.9.post2 wheel, the
  release current when row 33's log was published): the same shapes, no post-load change of them
  on CUDA ("Block quant doesn't need to process weights after loading"), the same refusal
  (QwenLM/Qwen3 issue #1485: Qwen3-235B-A22B-FP8 at TP8 on sglang 0.4.6.post5); ``models/
  qwen3_moe.py`` builds the router with ``quant_config=None``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memprof.base.errors import LayoutError
from memprof.core.deployment import Deployment, ranks
from memprof.core.estimate import estimate
from memprof.core.models import bundled_models, load_model
from memprof.core.weights import rank_weights
from memprof.core.weights.shard import excluded

FP8 = "qwen3-235b-a22b-fp8"


def _rank_groups(model: str, dep: Deployment, quant_flag: str | None = None,
                 arch: str = "sm90") -> dict[str, int]:
    spec = load_model(model)
    quant = spec.quant
    if quant_flag:
        from memprof.core.models.quant_config import quant_from_flag

        quant = quant_from_flag(quant_flag, spec)
    groups: dict[str, int] = {}
    for t in rank_weights(spec, dep, quant, ranks(dep)[0], arch):
        groups[t.group] = groups.get(t.group, 0) + t.bytes
    return groups


def test_the_bundled_fp8_config_is_the_bf16_one_with_its_quantization_config() -> None:
    fp8 = json.loads(bundled_models()[FP8].read_text())
    bf16 = json.loads(bundled_models()["qwen3-235b-a22b"].read_text())
    q = fp8.pop("quantization_config")
    strip = {"_source", "_hf_ids"}
    assert {k: v for k, v in fp8.items() if k not in strip} == {
        k: v for k, v in bf16.items() if k not in strip}
    assert (q["quant_method"], q["weight_block_size"], q["activation_scheme"]) == (
        "fp8", [128, 128], "dynamic")
    # lm_head and, for each of the 94 layers, its two norms and its router
    assert len(q["modules_to_not_convert"]) == 1 + 3 * 94
    spec = load_model("Qwen/Qwen3-235B-A22B-FP8")  # resolves by its HF id
    assert spec.quant is not None
    assert (spec.quant.method, spec.quant.block, spec.quant.checkpoint_format) == (
        "fp8", (128, 128), "")


def _hand_count_tp4() -> dict[str, int]:
    """One TP4 rank of Qwen3-235B-A22B-FP8, from the vLLM v0.9.2 layout (module docstring):
    hidden 4096, 94 layers, 64 query / 4 KV heads of 128, 128 experts of 1536, vocab 151936."""
    layers, h, e = 94, 4096, 128
    i = 1536 // 4  # 384 = 3 blocks
    qkv_out = (64 // 4 + 2 * (4 // 4)) * 128  # 2304 = 18 blocks
    o_in = 64 * 128 // 4  # 2048
    vocab = 151936 // 4  # 151936 is a multiple of 64 already
    scale = 4  # fp32
    return {
        "embed_tokens": vocab * h * 2,
        "lm_head": vocab * h * 2,
        "final norm": h * 2,
        "norms": layers * 2 * h * 2,
        "router": layers * e * h * 2,  # bf16, ReplicatedLinear(quant_config=None)
        "attention": layers * (qkv_out * h + (qkv_out // 128) * (h // 128) * scale
                               + h * o_in + (h // 128) * (o_in // 128) * scale
                               + 2 * 128 * 2),  # q_norm, k_norm
        "experts": layers * e * (2 * i * h + h * i
                                 + (2 * (i // 128) * (h // 128) + (h // 128) * (i // 128))
                                 * scale),
    }


@pytest.mark.parametrize(("engine", "version"), [("vllm", "0.9.2"), ("vllm", "0.11.0"),
                                                 ("sglang", "0.4.9")])
def test_weights_per_rank_match_the_hand_count(engine: str, version: str) -> None:
    dep = Deployment(engine=engine, tp=4, engine_version=version)
    assert _rank_groups(FP8, dep) == _hand_count_tp4()


def test_the_checkpoint_differs_from_the_online_fp8_stand_in_by_its_block_scales() -> None:
    """``-q fp8`` on the bf16 config (what rows 32/33 ran before) keeps one fp32 scale per
    linear and, per expert, one for w13 and one for w2 (vLLM v0.9.2 fp8.py
    ``Fp8MoEMethod.process_weights_after_loading`` re-initialises ``w13_weight_scale`` to one
    per expert when it quantises a bf16 checkpoint); the checkpoint keeps a scale per 128×128
    block."""
    dep = Deployment(tp=4, engine_version="0.9.2")
    block = _rank_groups(FP8, dep)
    online = _rank_groups("qwen3-235b-a22b", dep, quant_flag="fp8")
    assert block["experts"] - online["experts"] == 94 * 128 * (6 * 32 + 32 * 3 - 2) * 4
    # memprof builds qkv_proj as its q and kv parts (kv heads replicate under TP): the stand-in
    # holds a per-tensor scale for each part and one for o_proj (vLLM requantises the fused
    # qkv to a single scale, 4 B per layer fewer); the checkpoint 18×32 + 32×16 block scales
    assert block["attention"] - online["attention"] == 94 * ((18 * 32 + 32 * 16) - 3) * 4
    for g in ("embed_tokens", "lm_head", "router", "norms", "final norm"):
        assert block[g] == online[g], g


@pytest.mark.parametrize("tp", [8, 16])
def test_experts_that_do_not_split_into_whole_blocks_are_refused(tp: int) -> None:
    # 1536 / 8 = 192 and 1536 / 16 = 96: not multiples of 128
    with pytest.raises(LayoutError, match="not divisible by the checkpoint's fp8 block"):
        estimate(FP8, Deployment(tp=tp), gpu_name="H100")
    # with expert parallelism each rank holds whole experts (I = 1536 = 12 blocks)
    e = estimate(FP8, Deployment(tp=tp, enable_expert_parallel=True), gpu_name="H100")
    assert e.weights_bytes_max > 0


def test_the_refusal_is_an_error_line_and_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    from memprof.cli import run

    rc = run(["estimate", "--model", FP8, "--gpu", "H100", "--tp", "8"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[0].startswith("error: ") and "192" in err[0] and "128" in err[0]
    assert err[1].startswith("hint: ") and "--enable-expert-parallel" in err[1]


def test_online_fp8_on_the_bf16_config_is_not_held_to_the_block_rule() -> None:
    # --quantization fp8 on an unquantised checkpoint is per-tensor: no blocks to split
    e = estimate("qwen3-235b-a22b", Deployment(tp=8, quantization="fp8"), gpu_name="H100")
    assert e.weights_bytes_max > 0


# --- the exclusion matcher: the same answers as the rule it replaces ------------------------------

def _old_rule(exclude: tuple[str, ...], module: str) -> bool:
    """The four-clause matcher memprof used before the split one (kept here as the oracle)."""
    for pat in exclude:
        if pat.startswith("re:"):
            if re.match(pat[3:], module):
                return True
            continue
        p = pat.rstrip(".")
        if (fnmatch.fnmatch(module, p) or fnmatch.fnmatch(module, p + ".*")
                or module.endswith("." + p) or ("." + p + ".") in ("." + module + ".")):
            return True
    return False


_COMPONENTS = st.sampled_from(["model", "layers", "0", "1", "10", "mlp", "gate", "experts",
                               "self_attn", "qkv_proj", "lm_head", "visual", "blocks"])
_MODULES = st.lists(_COMPONENTS, min_size=1, max_size=6).map(".".join)
_PATTERNS = st.one_of(
    _MODULES,
    _MODULES.map(lambda m: m + "."),
    _MODULES.map(lambda m: "." + m),
    _MODULES.map(lambda m: m.replace("1", "*", 1)),
    _MODULES.map(lambda m: m.replace("0", "?", 1)),
    _MODULES.map(lambda m: "re:" + re.escape(m) + ".*"),
    st.sampled_from(["", ".", "mlp..gate", "model.layers.[01].mlp", "*.gate"]),
)


@given(st.lists(_PATTERNS, max_size=8).map(tuple), _MODULES)
def test_the_split_matcher_agrees_with_the_four_clause_rule(exclude: tuple[str, ...],
                                                            module: str) -> None:
    assert excluded(exclude, module) == _old_rule(exclude, module)


def test_the_checkpoints_names_leave_its_routers_and_lm_head_unquantised_only() -> None:
    q = load_model(FP8).quant
    assert q is not None
    assert excluded(q.exclude, "model.layers.93.mlp.gate")
    assert excluded(q.exclude, "lm_head")
    assert not excluded(q.exclude, "model.layers.9.mlp.experts")
    assert not excluded(q.exclude, "model.layers.1.self_attn.qkv_proj")
    # a per-layer name does not reach a layer whose index merely starts with it
    assert not excluded(("model.layers.1.mlp.gate",), "model.layers.10.mlp.gate")


# --- layers told apart by the exclude list: built once per distinct set of names ---------------

@pytest.mark.parametrize("extra", [(), ("model.layers.3.self_attn.qkv_proj",
                                        "model.layers.7.mlp.experts", "model.layers.7.mlp.gate")])
@pytest.mark.parametrize("layout", [{"tp": 4}, {"tp": 4, "pp": 3},
                                    {"tp": 2, "enable_expert_parallel": True}])
def test_grouping_layers_by_the_names_excluding_them_changes_no_tensor(
        extra: tuple[str, ...], layout: dict[str, Any]) -> None:
    """The checkpoint names every layer (283 names); layers that the names exclude alike are
    built once. Oracle: the same list plus an entry with a digit that matches nothing, which
    makes memprof build each layer on its own."""
    from dataclasses import replace

    from memprof.core.weights.rank import _InOrderParams

    spec = load_model(FP8)
    assert spec.quant is not None
    q = replace(spec.quant, exclude=spec.quant.exclude + extra)
    each = replace(q, exclude=(*q.exclude, "model.layers.99999.*"))
    dep = Deployment(**layout)
    for coord in (ranks(dep)[0], ranks(dep)[-1]):
        grouped = sorted((t.module, t.bytes, t.count) for t in rank_weights(spec, dep, q, coord))
        alone = sorted((t.module, t.bytes, t.count) for t in rank_weights(spec, dep, each, coord))
        assert grouped == alone
        assert (_InOrderParams(spec, dep, q, coord, "sm90").build_params()
                == _InOrderParams(spec, dep, each, coord, "sm90").build_params())
    if extra and dep.pp == 1:
        qkv = sorted((t.count, t.bytes_each) for t in rank_weights(spec, dep, q, ranks(dep)[0])
                     if t.module.endswith("qkv_proj(q)"))
        # layer 3's qkv stays bf16 (its q part: 2048 × 4096 × 2 B on a TP4 rank); the other
        # 93 layers keep the fp8 weight and its 16 × 32 fp32 block scales
        if dep.tp == 4:
            assert qkv == [(1, 2048 * 4096 * 2), (93, 2048 * 4096 + 16 * 32 * 4)]
        else:
            assert [c for c, _ in qkv] == [1, 93]


# --- ROCm: vLLM pads block-fp8 linear weights by 256 bytes a row -------------------------------

def _rank_total(dep: Deployment, arch: str) -> int:
    spec = load_model(FP8)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], arch))


def test_vllm_on_rocm_pads_each_block_fp8_linear_whose_rows_are_512_byte_multiples() -> None:
    """vLLM 0.8.2+ ``_maybe_pad_weight`` / ``_maybe_pad_fp8_weight`` (ROCM_FP8_BLOCK_PADDING):
    on a TP4 rank qkv_proj (2304 rows of 4096 B) and o_proj (4096 rows of 2048 B) gain 256 B a
    row; the experts (FusedMoE, no padding in ``Fp8MoEMethod``) and the bf16 router do not."""
    per_rank = 94 * (2304 + 4096) * 256
    before = _rank_total(Deployment(tp=4, engine_version="0.8.1"), "gfx942")
    after = _rank_total(Deployment(tp=4, engine_version="0.8.2"), "gfx942")
    assert after - before == per_rank
    assert _rank_total(Deployment(tp=4, engine_version="0.33.0"), "gfx942") == after
    # CUDA does not pad; SGLang's release rows are not vLLM's
    assert _rank_total(Deployment(tp=4, engine_version="0.8.2"), "sm90") == before
    assert _rank_total(Deployment(engine="sglang", tp=4, engine_version="0.4.9"),
                       "gfx942") == before
    # the padded storage is the weight's own parameter: (rows, 4096 + 256) fp8
    spec = load_model(FP8)
    dep = Deployment(tp=4, engine_version="0.8.2")
    o = next(t for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "gfx942")
             if t.module.endswith("self_attn.o_proj"))
    assert o.params[0].shape == (4096, 2048 + 256) and o.padding_each == 4096 * 256

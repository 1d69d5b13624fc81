"""A checkpoint's exclusion list against vLLM's fused modules and its model-file renames.

vLLM's ``is_layer_skipped`` (quantization/utils/quant_utils.py, v0.27.1 / v0.33.0) skips a
fused module (``packed_modules_mapping``) the list names, or one whose parts it all names, and
refuses one it names in part; ``Fp8Config.apply_vllm_mapper`` renames the list by the model's
``hf_to_vllm_mapper`` first (Qwen3.5 inherits qwen3_vl.py's ``model.language_model.`` ->
``language_model.model.``). The Qwen3.5/3.6-27B-FP8 checkpoints list each GDN layer's
``in_proj_a`` / ``in_proj_b`` (bf16 in the file), which vLLM loads into the fused
``in_proj_ba`` left in bf16.
"""

from __future__ import annotations

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.weights import rank_weights
from memprof.core.weights.shard import excluded


def test_a_fused_module_is_excluded_when_all_its_parts_are() -> None:
    parts = ("model.layers.0.linear_attn.in_proj_a", "model.layers.0.linear_attn.in_proj_b")
    assert excluded(parts, "model.layers.0.linear_attn.in_proj_ba")
    assert not excluded(parts, "model.layers.1.linear_attn.in_proj_ba")
    assert not excluded(parts, "model.layers.0.linear_attn.in_proj_qkvz")


def test_a_fused_module_named_in_part_is_refused() -> None:
    with pytest.raises(ConfigError, match="in_proj_a of the fused"):
        excluded(("model.layers.0.linear_attn.in_proj_a",),
                 "model.layers.0.linear_attn.in_proj_ba")


def test_the_fused_name_itself_still_excludes() -> None:
    assert excluded(("model.layers.0.self_attn.qkv_proj",), "model.layers.0.self_attn.qkv_proj")


@pytest.mark.parametrize("model", ["qwen3.5-27b-fp8", "qwen3.6-27b-fp8"])
def test_qwen3_5_in_proj_ba_is_the_checkpoints_bf16(model: str) -> None:
    """The checkpoint's in_proj_a and in_proj_b: [48, 5120] bf16 each in each of the 48 GDN
    layers (64 layers, full attention every 4th), so in_proj_ba is 48 x 96 x 5120 x 2 B."""
    spec = load_model(model)
    assert spec.quant is not None
    assert not any(e.startswith("model.language_model.") for e in spec.quant.exclude)
    dep = Deployment(tp=1)
    ba = [t for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90")
          if t.module.endswith("linear_attn.in_proj_ba")]
    assert sum(t.bytes for t in ba) == 48 * 96 * 5120 * 2

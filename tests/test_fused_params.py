"""``memprof.core.terms.load_rounding.fused`` joins the q and kv parts of each QKV parameter as
vLLM allocates them: checked against a plain one-parameter-at-a-time reading of the same rule,
on every bundled model's first rank and on random parameter lists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import bundled_models, load_model
from memprof.core.terms.load_rounding import fused
from memprof.core.weights.rank import weights_in_order_params


def _plain(params: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The rule parameter by parameter: a run of consecutive q / kv parts becomes one entry
    per parameter name (sizes added, in first-seen order); every other parameter is kept."""
    out: list[tuple[str, int]] = []
    run: dict[str, int] = {}
    for name, size in params:
        if "qkv_proj(q)" in name or "qkv_proj(kv)" in name:
            key = name.replace("qkv_proj(q)", "qkv_proj").replace("qkv_proj(kv)", "qkv_proj")
            run[key] = run.get(key, 0) + size
            continue
        out += run.items()
        run = {}
        out.append((name, size))
    return out + list(run.items())


@pytest.mark.parametrize("model", sorted(bundled_models()))
def test_fused_matches_the_plain_rule_on_each_bundled_model(model: str) -> None:
    try:
        spec = load_model(model)
    except Exception:  # a config memprof refuses without a flag has no ranks to check
        pytest.skip("refused without a flag")
    dep = Deployment()
    params = weights_in_order_params(spec, dep, spec.quant, ranks(dep)[0], "sm90")
    got = fused(params)
    assert got == _plain(params)
    assert sum(n for _, n in got) == sum(n for _, n in params)


NAMES = ["model.layers.0.self_attn.qkv_proj(q).weight",
         "model.layers.0.self_attn.qkv_proj(kv).weight",
         "model.layers.0.self_attn.qkv_proj(q).bias", "model.layers.0.self_attn.qkv_proj(kv).bias",
         "model.layers.1.self_attn.qkv_proj(q).weight", "model.layers.0.self_attn.qkv_proj.x",
         "model.layers.0.self_attn.o_proj.weight", "model.norm.weight", "lm_head.weight"]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(1, 1 << 30)), max_size=40))
def test_fused_matches_the_plain_rule_on_random_lists(params: list[tuple[str, int]]) -> None:
    assert fused(params) == _plain(params)

"""SGLang's ``--max-total-tokens``: the KV pool is the smaller of the cap and what
mem_fraction_static leaves (``ModelRunner.init_memory_pool``, sglang 0.4.3 to SGL@d315eb7);
a vLLM deployment has no such flag; a pasted command and a log's ServerArgs carry it."""

from __future__ import annotations

import shlex

import pytest

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.probes.serve_command import parse_tokens


def _tokens(**kw: object) -> int:
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", **kw), gpu_name="H100")
    return e.kv_cache_tokens


def test_a_cap_below_the_pool_is_the_pool() -> None:
    full = _tokens()
    assert full > 100_000
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", max_total_tokens=100_000),
                 gpu_name="H100")
    assert e.kv_cache_tokens == 100_000
    # the pool's bytes shrink with it: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B a token
    assert e.ranks[0].kv.kv_cache_bytes == 100_000 * 32 * 8 * 128 * 2 * 2


def test_a_cap_above_the_pool_changes_nothing() -> None:
    assert _tokens(max_total_tokens=10**9) == _tokens()


def test_vllm_has_no_such_flag() -> None:
    with pytest.raises(BadInput, match="--max-total-tokens is SGLang's flag"):
        estimate("llama-3.1-8b", Deployment(engine="vllm", max_total_tokens=1000),
                 gpu_name="H100")


def test_a_pasted_command_applies_it() -> None:
    c = parse_tokens(shlex.split("python -m sglang.launch_server --model-path m "
                                 "--max-total-tokens 65536"))
    assert c.settings["max_total_tokens"] == 65536
    assert not c.not_modelled

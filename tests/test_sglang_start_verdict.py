"""SGLang starts with a KV pool smaller than one request of the context length: its
``TpModelWorker`` caps the longest request at the pool (``max_req_len = min(context_len - 1,
max_total_num_tokens - 1)``, managers/tp_worker.py, sglang 0.4.3 to 0.5.9), where vLLM refuses
to start (``Engine.refuses_request_over_kv``). Published row 403 is such a start: Llama-3.1-8B at
a 131,072 context on a 24 GB card with a 38,141-token pool."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import ENGINE
from memprof.core.engines.vllm import ENGINE as VLLM
from memprof.core.estimate import Estimate, estimate
from memprof.core.gpus import find_gpu


def _estimate(engine: str, version: str) -> Estimate:
    dep = Deployment(engine=engine, engine_version=version, max_model_len=131072)
    return estimate("llama-3.1-8b", dep, gpu=find_gpu("RTX-4090"))


def test_flags() -> None:
    assert VLLM.refuses_request_over_kv and not ENGINE.refuses_request_over_kv


def test_sglang_starts_where_vllm_refuses() -> None:
    s = _estimate("sglang", "0.4.9")
    r = s.ranks[0]
    # the pool holds fewer tokens than one 131,072-token request needs
    assert 0 < s.kv_cache_tokens < 131072 and r.kv.kv_cache_bytes > 0
    assert s.verdict != "startup_oom"
    v = _estimate("vllm", "0.9.2")
    assert v.kv_cache_tokens < 131072 and v.verdict == "startup_oom"

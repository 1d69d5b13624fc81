"""torch's stream pool in an SGLang rank without an NCCL communicator
(memprof/core/engines/sglang_streams.py): made before the decode CUDA graphs from 0.4.4 on, so
the capture's figure ("Capture cuda graph end. … mem usage") leaves it out and a component of its
own keeps it in the rank's total."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import SGLang
from memprof.core.engines.sglang_streams import stream_pool_maker
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model

POOL = "torch stream pool (made before the CUDA graphs)"
STREAM_POOL_BYTES = 73_400_320


def _maker(model: str, version: str, gpu: str) -> str | None:
    dep = Deployment(engine="sglang", engine_version=version)
    made = stream_pool_maker(dep, find_gpu(gpu), load_model(model))
    return None if made is None else made[0]


def _graph_and_pool(model: str, version: str, gpu: str, tp: int = 1) -> tuple[int, int]:
    e = estimate(model, Deployment(engine="sglang", engine_version=version, tp=tp),
                 gpu_name=gpu)
    rank = e.ranks[0]
    graph = sum(c.bytes for c in rank.components if c.name == "CUDA-graph estimate")
    pool = sum(c.bytes for c in rank.components if c.name == POOL)
    return graph, pool


@pytest.mark.parametrize(("version", "made_by"), [
    ("0.4.3", None),                       # the capture stream makes it
    ("0.4.4", "MHATokenToKVPool"),         # KV pool's alt_stream
    ("0.4.9", "MHATokenToKVPool"),
    ("0.5.8", "MHATokenToKVPool"),
    ("0.5.9", "ModelRunner"),              # forward_stream before the load
    ("0.5.10", "ModelRunner"),
])
def test_what_makes_the_pool_per_release(version: str, made_by: str | None) -> None:
    got = _maker("llama-3.1-8b", version, "H100")
    assert (got is None) if made_by is None else (got is not None and made_by in got)


def test_rocm_kv_pool_makes_no_stream_from_047() -> None:
    # 0.4.7 memory_pool.py: `Stream() if _is_cuda else None`; 0.4.5 made it on every device
    assert _maker("llama-3.1-8b", "0.4.5", "MI300X") is not None
    assert _maker("llama-3.1-8b", "0.4.9", "MI300X") is None
    assert _maker("llama-3.1-8b", "0.5.10", "MI300X") is not None


def test_mla_pool_makes_no_stream_before_059() -> None:
    # MLATokenToKVPool has no alt_stream; ModelRunner.forward_stream from 0.5.9 is every model's
    assert _maker("deepseek-v3", "0.4.9", "H200") is None
    assert _maker("deepseek-v3", "0.5.10", "H200") is not None


def test_the_pool_leaves_the_graph_figure_and_stays_in_the_total(
        monkeypatch: pytest.MonkeyPatch) -> None:
    graph, pool = _graph_and_pool("llama-3.1-8b", "0.4.9", "RTX-4090")
    assert pool == STREAM_POOL_BYTES
    monkeypatch.setattr(SGLang, "stream_pool_before_graphs", lambda *a: None)
    graph_in, pool_none = _graph_and_pool("llama-3.1-8b", "0.4.9", "RTX-4090")
    assert pool_none == 0
    assert graph_in == graph + STREAM_POOL_BYTES


def test_043_capture_keeps_the_pool() -> None:
    graph, pool = _graph_and_pool("llama-3.1-8b", "0.4.3", "H100")
    assert pool == 0
    assert graph > STREAM_POOL_BYTES


def test_tp2_communicator_made_it_and_no_component_is_added() -> None:
    _, pool = _graph_and_pool("llama-3.1-8b", "0.5.10", "H100", tp=2)
    assert pool == 0


def test_from_059_the_pool_is_made_before_the_load_and_leaves_the_kv_pool() -> None:
    # 0.5.9 ModelRunner.__init__ makes forward_stream before load_model: the pool is in "Load
    # weight begin ... avail mem", so the KV pool (mem_fraction_static x free before load - the
    # load) is mem_fraction_static x 70 MiB smaller than where the KV pool's alt_stream made it
    # after the pool (0.5.8)
    dep = Deployment(engine="sglang", engine_version="0.5.9")
    assert stream_pool_maker(dep, find_gpu("H100"), load_model("llama-3.1-8b"))[1] is True
    old = stream_pool_maker(dep.with_(engine_version="0.5.8"), find_gpu("H100"),
                            load_model("llama-3.1-8b"))
    assert old is not None and old[1] is False
    kv = {}
    for version in ("0.5.8", "0.5.9"):
        e = estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version=version,
                                                mem_fraction_static=0.8), gpu_name="H100")
        pool = next(c for c in e.ranks[0].components if c.name == POOL)
        assert pool.where == ("baseline" if version == "0.5.9" else "budget")
        kv[version] = e.ranks[0].kv.kv_cache_bytes
    assert kv["0.5.8"] - kv["0.5.9"] == pytest.approx(0.8 * STREAM_POOL_BYTES, abs=1 << 20)

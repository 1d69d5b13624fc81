"""A sweep estimates each point from its layout's deployment and its utilisation
(``Evaluator.estimate_at``, ``CachedSteps.prepared_at``) without building the point's own
deployment: every record and every refusal is the cold estimate's, also where the sweep falls
back to the point's deployment (a utilisation the steps prepare on their own, SGLang,
``--no-gpu-peer-access``, ``--hf-overrides``)."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.batch.sweep import Evaluator, parse_axis, record, sweep
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu

EXTRA = ("gpu", "model")


def _cold(model: str, base: Deployment, gpu: str, point: dict[str, object]
          ) -> tuple[str, object]:
    dep = base.with_(**{k: v for k, v in point.items() if k not in EXTRA})
    try:
        e = estimate(str(point.get("model", model)), dep,
                     gpu=resolve_gpu(str(point.get("gpu", gpu)), None), notes=False)
    except BadInput as exc:
        return "error", exc.message
    return "ok", record(e)


@pytest.mark.parametrize(("model", "gpu", "base", "sets", "some_fit"), [
    ("qwen3-32b", "H200", Deployment(),
     ["tp=1,2,3", "max_model_len=8K,64K", "gpu_memory_utilization=0.5,0.9,1.5"], True),
    ("llama-3.1-8b", "H100", Deployment(),
     ["gpu_memory_utilization=0.9,0.95", "no_gpu_peer_access=false,true", "pp=1,2",
      "kv_cache_dtype=auto,fp7"], True),
    ("qwen3-0.6b", "H100", Deployment(),
     ["gpu=H100,RTX-4090", "model=qwen3-0.6b,llama-3.1-8b", "gpu_memory_utilization=0.8,0.9"],
     True),
    # SGLang has no such flag: each point refused as the estimate refuses it
    ("gpt-oss-120b", "H100", Deployment(engine="sglang"),
     ["tp=2,4", "gpu_memory_utilization=0.8,0.9"], False),
    ("gpt-oss-120b", "H100", Deployment(engine="sglang"),
     ["tp=2,4", "mem_fraction_static=0.8,0.9"], True),
    ("qwen3-0.6b", "H100", Deployment(hf_overrides='{"max_position_embeddings": 4096}'),
     ["max_model_len=2K,8K", "gpu_memory_utilization=0.8,0.9"], True),
])
def test_each_record_is_the_cold_estimate(model: str, gpu: str, base: Deployment,
                                          sets: list[str], some_fit: bool) -> None:
    axes = [parse_axis(s) for s in sets]
    rows = sweep(model, base, gpu, None, axes)
    names = {a.field: a.name for a in axes}
    seen = set()
    for row in rows:
        point = {f: row[n] for f, n in names.items()}
        kind, want = _cold(model, base, gpu, point)
        seen.add(kind)
        if kind == "error":
            assert (row["verdict"], row["error"]) == ("invalid", want), point
        else:
            assert isinstance(want, dict)
            assert {k: row[k] for k in want} == want, point
    assert ("ok" in seen) == some_fit


def test_a_point_from_its_layout_is_the_estimate_of_its_deployment() -> None:
    ev, g = Evaluator(), resolve_gpu("H200", None)
    layout = Deployment(tp=2, max_model_len=16384)
    at = ev.prepared_layout("qwen3-32b", layout, g)
    assert at is not None
    for util in (0.85, 0.9, None):
        got = ev.estimate_prepared(*at, util, g)
        assert got == estimate("qwen3-32b", layout.with_(gpu_memory_utilization=util), gpu=g,
                               notes=False)


def test_what_a_layout_cannot_share() -> None:
    ev, g = Evaluator(), resolve_gpu("H200", None)
    assert ev.prepared_layout("qwen3-32b", Deployment(no_gpu_peer_access=True), g) is None
    assert ev.prepared_layout("qwen3-0.6b", Deployment(hf_overrides="{}"), g) is None
    # a deployment given to ``ready`` is taken as prepared once, by the estimate that follows
    spec = ev.spec("qwen3-32b", False)
    base, n = ev._cached.prepared_base(Deployment(), spec, g)
    ready = base.with_(gpu_memory_utilization=0.9)
    ev._cached.ready(ready, n)
    assert ev._cached.prepared(ready, spec, g) is ready
    again = ev._cached.prepared(ready, spec, g)
    assert again == ready and again is not ready

"""``memprof.batch.steps.LayoutKeys``: deployments that differ in ``gpu_memory_utilization``
alone get one number, others get their own; a number remembered for a deployment object is
what it reads next; and a sweep's prepared deployment is read under the number of its layout."""

from __future__ import annotations

from memprof.batch.steps import CachedSteps, LayoutKeys
from memprof.core.deployment import Deployment
from memprof.core.gpus import resolve_gpu
from memprof.core.models import load_model


def test_numbers_by_settings_but_utilization() -> None:
    keys = LayoutKeys()
    a = Deployment(tp=2, gpu_memory_utilization=0.8)
    assert keys(a) == keys(a.with_(gpu_memory_utilization=0.95)) == keys(Deployment(tp=2))
    assert keys(Deployment(tp=4)) != keys(a)
    b = Deployment(tp=8)
    keys.remember(b, keys(a))  # a copy of ``a`` in all but utilization, by the caller's word
    assert keys(b) == keys(a)


def test_prepared_deployment_keeps_its_layout_number() -> None:
    steps = CachedSteps()
    spec, gpu = load_model("qwen3-0.6b"), resolve_gpu("H100", None)
    one = steps.prepared(Deployment(gpu_memory_utilization=0.8), spec, gpu)
    two = steps.prepared(Deployment(gpu_memory_utilization=0.9), spec, gpu)
    assert one.gpu_memory_utilization == 0.8 and two.gpu_memory_utilization == 0.9
    assert one.with_(gpu_memory_utilization=0.9) == two
    fresh = LayoutKeys()
    assert (steps._layout(one) == steps._layout(two)) and (fresh(one) == fresh(two))

"""pytest plugin (entry point ``pytest11: memprof``): GPU-memory budgets as test markers.

Installed with memprof, it registers the marker ``memprof_budget``; a marked test fails when the
deployment breaks its budget, with the broken limits and the worst rank's largest components in
the failure message — like pytest-memray's ``limit_memory``, but for the GPU memory of a
serving deployment, estimated (no GPU needed)::

    import pytest

    @pytest.mark.memprof_budget(model="llama-3.1-8b", gpu="H100", max_num_seqs=256,
                                max_model_len=32768, max_peak_bytes="76GiB",
                                min_kv_tokens=400_000, verdict="fits")
    def test_llama_8b_config_fits():
        ...  # the test body runs only when the budget holds

    @pytest.mark.memprof_budget("qwen3-32b", gpu="H200", kv_cache_dtype="turboquant_k8v4",
                                max_num_seqs=256, min_kv_tokens=500_000)
    def test_qwen_kv_capacity(memprof_estimate):
        assert memprof_estimate["summary"]["max_concurrency"] > 10

Arguments: ``model`` (first positional or keyword), ``gpu``, ``gpu_memory``, the limits
``max_peak_bytes``, ``max_weights_bytes``, ``min_kv_tokens``, ``verdict`` (default ``"fits"``)
and any deployment field (``memprof estimate``'s flags in snake_case). See
:mod:`memprof.budget` for their meaning. The budget is checked before the test body runs. The
``memprof_estimate`` fixture gives the test the estimate (the JSON contract) of its marker.
"""

from __future__ import annotations

from typing import Any

import pytest

MARKER = "memprof_budget"
_CACHE = pytest.StashKey[dict[int, Any]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(model, gpu=None, max_peak_bytes=None, min_kv_tokens=None, "
        "max_weights_bytes=None, verdict='fits', **deployment): fail the test when memprof's "
        "estimate of the deployment breaks the budget",
    )


def _check(item: pytest.Item, mark: pytest.Mark) -> Any:
    """The mark's :class:`memprof.budget.BudgetReport` (cached per item and mark)."""
    from memprof.base.errors import MemprofError
    from memprof.budget import check_budget

    cache = item.stash.setdefault(_CACHE, {})
    if id(mark) in cache:
        return cache[id(mark)]
    kwargs = dict(mark.kwargs)
    if mark.args:
        if len(mark.args) > 1 or "model" in kwargs:
            pytest.fail(f"{MARKER}: give the model once, as the only positional argument",
                        pytrace=False)
        kwargs["model"] = mark.args[0]
    if "model" not in kwargs:
        pytest.fail(f"{MARKER}: no model (e.g. @pytest.mark.{MARKER}(model=\"llama-3.1-8b\", "
                    "gpu=\"H100\"))", pytrace=False)
    error = ""
    try:
        report = check_budget(**kwargs)
    except MemprofError as exc:
        error = f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else "")
    if error:  # failed outside the except block: no "during handling" chain in the report
        pytest.fail(error, pytrace=False)
    cache[id(mark)] = report
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    for mark in item.iter_markers(MARKER):
        report = _check(item, mark)
        if not report.ok:
            pytest.fail(report.message(), pytrace=False)


@pytest.fixture
def memprof_estimate(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The estimate (memprof's JSON contract) of the test's ``memprof_budget`` marker."""
    mark = request.node.get_closest_marker(MARKER)
    if mark is None:
        pytest.fail(f"the memprof_estimate fixture needs a @pytest.mark.{MARKER}(...) marker",
                    pytrace=False)
    estimate: dict[str, Any] = _check(request.node, mark).estimate
    return estimate

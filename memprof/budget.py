"""GPU-memory budgets for a project's own tests: :func:`assert_fits` and :func:`check_budget`.

A budget is a deployment (the same keys as a gate scenario: ``memprof estimate``'s flags in
snake_case) plus limits; memprof estimates it (no GPU needed, milliseconds) and fails when a
limit is broken::

    from memprof.budget import assert_fits

    def test_llama_8b_serves_256_sequences_on_one_h100():
        assert_fits("llama-3.1-8b", gpu="H100", max_num_seqs=256, max_model_len=32768,
                    min_kv_tokens=400_000, max_weights_bytes="16GiB")

Limits (each optional):

* ``max_peak_bytes``: the worst rank's peak — the sum of every component of the rank, i.e. what
  the process holds at run time (CUDA context, the engine's budget incl. the KV cache, and the
  unbudgeted runtime buffers); see :mod:`memprof.core.gate`;
* ``max_weights_bytes``: the largest rank's weights;
* ``min_kv_tokens``: the KV-cache capacity in tokens (the smallest rank's);
* ``verdict``: the expected verdict, ``"fits"`` by default (``None`` skips the check;
  ``"runtime_oom"`` documents a known OOM).

Sizes are integers (bytes) or strings with a unit (``"70GiB"``). The pytest marker
``@pytest.mark.memprof_budget(...)`` (:mod:`memprof.pytest_plugin`) takes the same arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes, parse_size
from memprof.core.verdict import VERDICTS

LIMIT_KEYS = ("max_peak_bytes", "max_weights_bytes", "min_kv_tokens", "verdict")


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetReport:
    """The estimate (the JSON contract) and the limits it breaks (empty: within budget)."""

    estimate: dict[str, Any]
    violations: tuple[str, ...]
    headline: str
    details: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations

    def message(self) -> str:
        lines = [f"memprof budget broken: {self.headline}"]
        lines += [f"  - {v}" for v in self.violations]
        lines += [f"  {d}" for d in self.details]
        return "\n".join(lines)


def _size(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_size(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise BadInput(f"{name} must be a size (bytes or e.g. \"70GiB\"), got {value!r}",
                   hint=f"e.g. {name}=\"70GiB\"")


def _headline(est: dict[str, Any]) -> str:
    d = est["deployment"]
    par = f"tp {d['tensor_parallel_size']} pp {d['pipeline_parallel_size']} " \
          f"dp {d['data_parallel_size']}"
    if d.get("enable_expert_parallel"):
        par += f" ep {d['expert_parallel_size']}"
    return (f"{est['model']['name']} on {d['world_size']}× {est['gpu']['name']} "
            f"({fmt_bytes(est['gpu']['total_bytes'])}), {par}, {d['engine']}, "
            f"max_model_len {d['max_model_len']}, max_num_seqs {d['max_num_seqs']}")


def check_budget(model: str, *, gpu: str | None = None, gpu_memory: int | str | None = None,
                 gpu_arch: str | None = None,
                 max_peak_bytes: int | str | None = None,
                 max_weights_bytes: int | str | None = None,
                 min_kv_tokens: int | None = None, verdict: str | None = "fits",
                 **deployment: Any) -> BudgetReport:
    """Estimate ``model`` on the deployment and list the limits it breaks.

    Raises :class:`memprof.base.errors.BadInput` for an unknown key or a bad value.
    """
    from memprof.core.contract import estimate_dict
    from memprof.core.gate import rank_key, snapshot_rank
    from memprof.core.scenarios import evaluate, request_from_mapping

    if verdict is not None and verdict not in VERDICTS:
        raise BadInput(f"verdict must be one of {', '.join(VERDICTS)} or None, got {verdict!r}",
                       hint='verdict="fits"')
    if min_kv_tokens is not None and (not isinstance(min_kv_tokens, int)
                                      or isinstance(min_kv_tokens, bool)):
        raise BadInput(f"min_kv_tokens must be an integer, got {min_kv_tokens!r}",
                       hint="min_kv_tokens=100_000")
    peak_limit = _size("max_peak_bytes", max_peak_bytes)
    weights_limit = _size("max_weights_bytes", max_weights_bytes)
    values: dict[str, object] = {"model": model, **deployment}
    if gpu is not None:
        values["gpu"] = gpu
    if gpu_memory is not None:
        values["gpu_memory"] = gpu_memory
    if gpu_arch is not None:
        values["gpu_arch"] = gpu_arch
    request = request_from_mapping(values, where="memprof budget")
    est = estimate_dict(evaluate(request))

    ranks = [(rank_key(r), snapshot_rank(r), r) for r in est["ranks"]]
    violations: list[str] = []
    key, snap, _ = max(ranks, key=lambda x: int(x[1]["peak_bytes"]))
    peak = int(snap["peak_bytes"])
    if peak_limit is not None and peak > peak_limit:
        violations.append(f"peak {fmt_bytes(peak)} on {key} > max_peak_bytes "
                          f"{fmt_bytes(peak_limit)} (+{fmt_bytes(peak - peak_limit)})")
    wkey, wsnap, _ = max(ranks, key=lambda x: int(x[1]["weights_bytes"]))
    weights = int(wsnap["weights_bytes"])
    if weights_limit is not None and weights > weights_limit:
        violations.append(f"weights {fmt_bytes(weights)} on {wkey} > max_weights_bytes "
                          f"{fmt_bytes(weights_limit)} (+{fmt_bytes(weights - weights_limit)})")
    tokens = int(est["summary"]["kv_cache_tokens"])
    if min_kv_tokens is not None and tokens < min_kv_tokens:
        violations.append(f"kv_cache_tokens {tokens:,} < min_kv_tokens {min_kv_tokens:,} "
                          f"({tokens - min_kv_tokens:+,})")
    got = est["summary"]["verdict"]
    if verdict is not None and got != verdict:
        why = "; ".join(est["summary"]["reasons"])
        violations.append(f"verdict {got}, expected {verdict}" + (f": {why}" if why else ""))

    worst = sorted(snap["components"].items(), key=lambda kv: -kv[1])
    kv_bytes = next((int(r["kv_cache_bytes"]) for k, _s, r in ranks if k == key), 0)
    top = [*worst[:5], ("kv_cache: KV cache", kv_bytes)]
    details = (
        f"{key}: peak {fmt_bytes(peak)}, weights {fmt_bytes(int(snap['weights_bytes']))}, "
        f"KV cache {tokens:,} tokens, verdict {got}",
        "largest components: " + ", ".join(f"{n} {fmt_bytes(b)}"
                                           for n, b in sorted(top, key=lambda kv: -kv[1]) if b),
    )
    return BudgetReport(estimate=est, violations=tuple(violations), headline=_headline(est),
                        details=details)


def assert_fits(model: str, *, gpu: str | None = None, gpu_memory: int | str | None = None,
                min_kv_tokens: int | None = None, max_weights_bytes: int | str | None = None,
                max_peak_bytes: int | str | None = None, verdict: str | None = "fits",
                **deployment: Any) -> dict[str, Any]:
    """Assert that the deployment fits its budget; returns the estimate (the JSON contract).

    Raises ``AssertionError`` with a readable message naming every broken limit and the
    largest components of the worst rank. Example::

        assert_fits("qwen3-32b", gpu="H200", kv_cache_dtype="turboquant_k8v4",
                    gpu_memory_utilization=0.9, max_num_seqs=256, min_kv_tokens=500_000)
    """
    report = check_budget(model, gpu=gpu, gpu_memory=gpu_memory, max_peak_bytes=max_peak_bytes,
                          max_weights_bytes=max_weights_bytes, min_kv_tokens=min_kv_tokens,
                          verdict=verdict, **deployment)
    if not report.ok:
        raise AssertionError(report.message())
    return report.estimate

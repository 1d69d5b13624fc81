"""vLLM's ``--max-model-len auto``: the context length fitted to the KV cache after profiling, and
the KV capacity check it replaces.

vLLM 0.14.0 reads ``--max-model-len`` with ``human_readable_int_or_auto`` (engine/arg_utils.py:
``-1`` or ``auto`` -> -1, vllm-project/vllm#29431). ``_get_and_verify_max_len``
(config/model.py) then takes the length derived from the model's config, as for an unset flag,
and keeps ``original_max_model_len = -1``: the runner, its buffers and the profile run are built
at the derived length. After profiling, ``get_kv_cache_configs`` (v1/core/kv_cache_utils.py; in
0.33.0 v1/core/kv_cache_planning.py) calls ``_auto_fit_max_model_len``: a binary search over
``[1, derived]`` for the longest request whose KV cache (``max_memory_usage_bytes`` of the KV
cache groups, the same function the "estimated maximum model length" of the capacity check
uses) fits the available memory. A shorter length replaces ``max_model_len`` ("Auto-fit
max_model_len: reduced from X to Y to fit in available GPU memory"); the full one is kept
("full model context length X fits"); none fits: "Cannot auto-fit max_model_len" and the engine
stops. The engine core then sends the new length to its workers (v1/engine/core.py
``update_max_model_len``), and the capacity check that follows passes by construction. The KV
pool itself is sized from the available memory, as without the flag.

Where the fit is taken (``MAX_MODEL_LEN_AUTO``): 0.14.0-0.16.x search the model's global KV
cache groups (every layer, all PP stages) against the smallest worker's available memory;
from 0.17.0 each worker's groups are projected onto its own layers
(``_project_kv_cache_groups_to_worker``) and searched against its own memory, the engine taking
the smallest result.

From 0.29.0 the capacity check and the fit plan against the pool less the one block
``BlockPool`` holds back as its null block (``check_memory = available - bytes per block``;
``KV_CHECK_NULL_BLOCK``); 0.28.0 compares the whole available memory.

SGLang has no such value: ``--context-length`` is an integer.
"""

from __future__ import annotations

from collections.abc import Callable

from memprof.base.errors import BadInput
from memprof.core.engines import engine_named
from memprof.core.versions import Rule, rule_in_force

# vLLM's own encoding of the flag: ``human_readable_int_or_auto('auto') == -1``
AUTO_FIT = -1

MAX_MODEL_LEN_AUTO: tuple[Rule, ...] = (
    Rule(name="max_model_len_auto_fit", changes="--max-model-len auto: the fitted length",
         since="0.14.0", until="0.17.0", value="global",
         introduced_by="vllm-project/vllm#29431 (first released in 0.14.0)",
         removed_by="the fit per worker on its projected groups (first released in 0.17.0)",
         source="0.14.0 engine/arg_utils.py human_readable_int_or_auto; config/model.py "
         "_get_and_verify_max_len (-1: the derived length); v1/core/kv_cache_utils.py "
         "get_kv_cache_configs -> _auto_fit_max_model_len(vllm_config, "
         "global_kv_cache_groups, available_memory): _estimate_max_model_len_from_groups at "
         "min(available_memory); v1/engine/core.py update_max_model_len to the workers"),
    Rule(name="max_model_len_auto_fit", changes="--max-model-len auto: the fitted length",
         since="0.17.0", until=None, value="per_worker",
         introduced_by="the fit per worker (first released in 0.17.0; 0.15.0 and 0.16.0 "
         "fit the global groups)",
         source="0.17.0 / 0.22.0 / 0.28.0 v1/core/kv_cache_utils.py _auto_fit_max_model_len("
         "vllm_config, projected_groups_per_worker, available_memory): the smallest of each "
         "worker's _estimate_max_model_len_from_groups on its own memory; 0.33.0 "
         "v1/core/kv_cache_planning.py the same"),
)

KV_CHECK_NULL_BLOCK: tuple[Rule, ...] = (
    Rule(name="kv_check_null_block", changes="KV capacity check and --max-model-len auto: "
         "the pool less the null block", since="0.29.0", until=None, value=True,
         introduced_by="check_memory in get_kv_cache_configs (first released in 0.29.0; "
         "0.28.0 checks the whole available memory)",
         source="0.29.0 / 0.30.0 / 0.32.0 v1/core/kv_cache_utils.py get_kv_cache_configs: "
         "check_memory = avail_mem - _pool_bytes_per_block(groups), for "
         "_auto_fit_max_model_len and _check_enough_kv_cache_memory ('Reserve the null block "
         "BlockPool permanently holds back'); 0.33.0 v1/core/kv_cache_planning.py the same"),
)


def check_auto_fit(engine: str, version: str | None, flag: str) -> None:
    """Refuse ``--max-model-len auto`` (-1) where the engine or release has no such value."""
    runs = engine_named(engine)
    if not runs.takes_max_model_len_auto:
        raise BadInput(f"{flag} auto (-1) is vLLM's auto-fit; {runs.display}'s {flag} is a "
                       "token count", hint=f"give {flag} a length, e.g. 32768")
    if rule_in_force(MAX_MODEL_LEN_AUTO, version) is None:
        first = MAX_MODEL_LEN_AUTO[0].since
        raise BadInput(f"{flag} auto (-1) arrived in vLLM {first} (vllm-project/vllm#29431); "
                       f"vLLM {version} reads --max-model-len as a plain token count",
                       hint=f"use --engine-version {first} or later, or give a length")


def takes_auto(engine: str, version: str | None) -> bool:
    """Does the engine at ``version`` read ``--max-model-len auto``?"""
    return (engine_named(engine).takes_max_model_len_auto
            and rule_in_force(MAX_MODEL_LEN_AUTO, version) is not None)


def fit_mode(version: str | None) -> str:
    """"global" (0.14.0-0.16.x: the whole model's groups against the smallest worker's memory)
    or "per_worker" (0.17.0 on), at ``version``."""
    row = rule_in_force(MAX_MODEL_LEN_AUTO, version)
    return str(row.value) if row is not None else "per_worker"


def holds_back_null_block(version: str | None, engine: str) -> bool:
    """Whether the release's capacity check (and fit) leaves out the null block's bytes."""
    return rule_in_force(KV_CHECK_NULL_BLOCK, version, engine) is not None


def longest_fitting(request_bytes: Callable[[int], int], usable: int, upper: int) -> int:
    """vLLM's binary search (``_estimate_max_model_len_from_groups``): the longest length in
    ``[1, upper]`` whose request needs at most ``usable`` bytes; 0 where even one token does
    not fit."""
    if upper < 1 or usable <= 0 or request_bytes(1) > usable:
        return 0
    lo, hi = 1, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if request_bytes(mid) <= usable:
            lo = mid
        else:
            hi = mid - 1
    return lo

"""The estimator keeps no speed machinery: no module of ``memprof.core`` holds a table filled at
run time except the bounded caches keyed by values listed here, no cache key is an ``id()``,
``estimate`` takes no memo, and a caller's cache wraps the estimator's steps from outside."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from memprof.core.deployment import Deployment
from memprof.core.estimate import STEPS, Steps, estimate
from memprof.core.gpus import resolve_gpu

CORE = Path(__file__).resolve().parents[1] / "memprof" / "core"
# module-level tables filled at run time, each keyed by values (the spec hashes once)
# (and the settings an engine has no flag for, by engine name: deployment.check_engine_flags)
VALUE_CACHES = {("weights/rank.py", "_IN_ORDER"), ("terms/load_rounding.py", "_BY_LOAD"),
                ("deployment.py", "_FOREIGN")}


def _module_tables(path: Path) -> list[str]:
    """Names bound at module level to an empty dict, list or set (a table filled later)."""
    out = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        empty = (isinstance(value, ast.Dict | ast.List | ast.Set) and not (
            value.keys if isinstance(value, ast.Dict) else value.elts)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "list", "set") and not value.args)
        if empty:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [t.id for t in targets if isinstance(t, ast.Name)]
    return out


def test_no_module_table_but_the_value_caches() -> None:
    found = {(str(p.relative_to(CORE)), name) for p in sorted(CORE.rglob("*.py"))
             for name in _module_tables(p)}
    assert found == VALUE_CACHES


def test_no_id_keys_outside_a_function_s_own_locals() -> None:
    """``id()`` appears only where a function groups objects it holds for its own duration
    (``kv_plan``'s specs per attention object, ``layer_kinds``'s per layer kind)."""
    uses = sorted(f"{p.relative_to(CORE)}:{i}" for p in CORE.rglob("*.py")
                  for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                  if "id(" in line.replace("_id(", "").replace("valid(", ""))
    assert [u.split(":")[0] for u in uses] == ["kvcache.py", "models/spec.py"], uses


def test_estimate_takes_steps_not_a_memo() -> None:
    params = inspect.signature(estimate).parameters
    assert "memo" not in params and "steps" in params


def test_a_caller_wraps_the_steps() -> None:
    """A wrapper of ``class_core`` sees every class once per estimate and changes nothing."""
    calls: list[int] = []

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return STEPS.class_core(*args, **kwargs)

    steps = Steps(model_spec=STEPS.model_spec, prepared=STEPS.prepared, class_core=counting,
                  weights=STEPS.weights, kv_plan=STEPS.kv_plan)
    gpu = resolve_gpu("H200", None)
    dep = Deployment(tp=2, pp=2)
    plain = estimate("qwen3-32b", dep, gpu=gpu)
    wrapped = estimate("qwen3-32b", dep, gpu=gpu, steps=steps)
    assert wrapped == plain
    assert len(calls) == 2  # one class per PP stage

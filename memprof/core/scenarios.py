"""Gate scenarios: named reference deployments kept as data (``configs/scenarios/*.toml``).

One TOML file is one deployment; its file name (without ``.toml``) is the scenario's name. The
keys are the ``memprof estimate`` flags in snake_case, i.e. the fields of
:class:`memprof.core.deployment.Deployment` plus ``model``, ``gpu``, ``gpu_memory``, ``gpu_arch``
(the architecture of a ``gpu_memory``-only card: required without ``gpu``) and ``description``::

    description = "Qwen3-32B on one H200, TurboQuant k8v4 KV cache, 256 sequences"
    model = "qwen3-32b"            # bundled name, or a config.json path (relative to this file)
    gpu = "H200"                   # catalog name; or gpu_memory = "23.58GiB" + gpu_arch = "sm89"
    tensor_parallel_size = 1       # or tp = 1 (the Deployment field name)
    kv_cache_dtype = "turboquant_k8v4"
    gpu_memory_utilization = 0.9
    max_num_seqs = 256

The vLLM flag names ``tensor_parallel_size``, ``pipeline_parallel_size``, ``data_parallel_size``
and ``kv_cache_memory`` stand for the fields ``tp``, ``pp``, ``dp`` and
``kv_cache_memory_bytes``. Sizes (``gpu_memory``, ``kv_cache_memory``) are strings with a unit
(``"80GiB"``) or integer bytes. An unknown key, a value of the wrong type or a key given twice
(``tp`` and ``tensor_parallel_size``) is :class:`BadInput` naming the file and the key.

The same mapping serves the pytest marker and :func:`memprof.budget.assert_fits`
(:func:`request_from_mapping`).
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from memprof.base.errors import BadInput
from memprof.base.files import path_kind
from memprof.base.units import parse_size
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.core.flags import ALIASES, BY_FIELD, coerce

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib

SCENARIO_KEYS = ("model", "gpu", "gpu_memory", "gpu_arch", "description")
@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What ``memprof estimate`` needs: a model, a GPU and a deployment."""

    model: str
    gpu: str | None
    gpu_memory_bytes: int | None
    deployment: Deployment
    gpu_arch: str | None = None  # the architecture of a gpu_memory-only card (sm89, gfx942)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A named gate scenario: the TOML file it came from, its keys as written, and its request."""

    name: str
    description: str
    source: str  # the file it was read from
    inputs: dict[str, Any]  # the keys as written in the file
    request: Request


def deployment_keys() -> tuple[str, ...]:
    """Every key a deployment accepts: the Deployment fields and each engine's flag names in
    snake_case (``memprof.core.flags``)."""
    return tuple(dict.fromkeys((*(f.name for f in fields(Deployment)), *ALIASES)))


def _coerce(where: str, key: str, field: str, value: object) -> object:
    """A TOML (or Python) value, checked against the field's kind: a string only for string and
    size fields (sizes also take integer bytes)."""
    kind = BY_FIELD[field].kind
    if isinstance(value, str) and kind not in ("str", "size", "tokens"):
        example = {"bool": "true", "int": "8", "float": "0.9"}[kind]
        raise BadInput(f"{where}: {key} must be {kind}, got {value!r} (str)",
                       hint=f"e.g. {key} = {example}")
    if kind == "size" and not isinstance(value, str) and (
            not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise BadInput(f"{where}: {key} must be a size such as \"16GiB\" or a number of bytes, "
                       f"got {value!r}", hint=f"e.g. {key} = \"16GiB\"")
    return coerce(field, value, where=f"{where}: {key}")


def _unknown(where: str, key: str, known: tuple[str, ...]) -> BadInput:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return BadInput(f"{where}: unknown key {key!r}",
                    hint=hint + "keys are memprof estimate's flags in snake_case: "
                    + ", ".join(sorted(known)))


def request_from_mapping(values: Mapping[str, object], *, where: str,
                         extra_keys: tuple[str, ...] = (),
                         base_dir: Path | None = None) -> Request:
    """Build a :class:`Request` from scenario-style keys; ``extra_keys`` are ignored here.

    ``base_dir`` resolves a relative ``model`` path (a config.json or a folder) that exists there.
    """
    known = (*SCENARIO_KEYS, *deployment_keys(), *extra_keys)
    changes: dict[str, object] = {}
    given_as: dict[str, str] = {}
    for key, value in values.items():
        if key in SCENARIO_KEYS or key in extra_keys:
            continue
        field = ALIASES.get(key)
        if field is None:
            raise _unknown(where, key, known)
        if field in given_as:
            raise BadInput(f"{where}: {given_as[field]!r} and {key!r} set the same field",
                           hint=f"keep one of {given_as[field]} and {key}")
        given_as[field] = key
        changes[field] = _coerce(where, key, field, value)
    model = values.get("model")
    if not isinstance(model, str) or not model:
        raise BadInput(f"{where}: no model", hint='add e.g. model = "llama-3.1-8b"')
    if base_dir is not None and ("/" in model or model.endswith(".json")):
        candidate = base_dir / model
        if path_kind(candidate) != "missing":
            model = str(candidate)
    gpu = values.get("gpu")
    if gpu is not None and not isinstance(gpu, str):
        raise BadInput(f"{where}: gpu must be a string, got {gpu!r}", hint='e.g. gpu = "H200"')
    mem = values.get("gpu_memory")
    mem_bytes: int | None
    if mem is None:
        mem_bytes = None
    elif isinstance(mem, str):
        mem_bytes = parse_size(mem)
    elif isinstance(mem, int) and not isinstance(mem, bool) and mem > 0:
        mem_bytes = mem
    else:
        raise BadInput(f"{where}: gpu_memory must be a size, got {mem!r}",
                       hint='e.g. gpu_memory = "23.58GiB"')
    arch = values.get("gpu_arch")
    if arch is not None and not isinstance(arch, str):
        raise BadInput(f"{where}: gpu_arch must be a string, got {arch!r}",
                       hint='e.g. gpu_arch = "sm89"')
    if mem_bytes is not None and gpu is None and arch is None:
        raise BadInput(f"{where}: gpu_memory without gpu or gpu_arch: the card's architecture "
                       "decides its kernels, attention backends and platform figures",
                       hint='add gpu_arch = "sm89" (memprof gpus lists the architectures), or '
                       'name a catalog card with gpu = "L40S"')
    required = [f.name for f in fields(Deployment)
                if f.default is MISSING and f.default_factory is MISSING]
    missing = [f for f in required if f not in changes]
    if missing:  # pragma: no cover - every Deployment field has a default today
        raise BadInput(f"{where}: missing {', '.join(missing)}", hint="add them to the scenario")
    return Request(model=model, gpu=gpu, gpu_memory_bytes=mem_bytes, gpu_arch=arch,
                   deployment=Deployment(**changes))  # type: ignore[arg-type]


def parse_scenario(name: str, data: Mapping[str, object], *, source: str,
                   base_dir: Path | None = None) -> Scenario:
    desc = data.get("description", "")
    if not isinstance(desc, str):
        raise BadInput(f"{source}: description must be a string", hint='description = "..."')
    request = request_from_mapping(data, where=source, base_dir=base_dir)
    return Scenario(name=name, description=desc, source=source, inputs=dict(data),
                    request=request)


SCENARIO_CAP = 1 << 20
"""The most bytes of a scenario file read (a scenario is a dozen ``key = value`` lines)."""


def load_scenario(path: Path) -> Scenario:
    from memprof.base.files import read_capped_text

    text = read_capped_text(path, what="the scenario", cap=SCENARIO_CAP,
                            hint="scenarios are small UTF-8 TOML files, one key = value a line")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path} is not valid TOML: {' '.join(str(exc).split())[:120]}",
                       hint="one key = value per line, strings in double quotes") from None
    except (RecursionError, MemoryError):  # e.g. a = [[[[…]]]] nested 100,000 deep
        raise BadInput(f"{path}: values nested too deeply to read",
                       hint="scenario values are flat: strings, numbers, booleans") from None
    for key, value in data.items():
        if isinstance(value, dict):
            raise BadInput(f"{path}: [{key}] tables are not scenario keys",
                           hint="one scenario per file, flat key = value lines")
    return parse_scenario(path.stem, data, source=str(path), base_dir=path.parent)


def load_scenarios(directory: Path) -> list[Scenario]:
    """Every ``*.toml`` in ``directory``, sorted by name."""
    kind = path_kind(directory)
    if kind != "folder":
        what = {"file": "is a file, not a folder", "missing": "does not exist",
                "inaccessible": "cannot be read (no permission on the way)"}.get(
                    kind, "is not a folder")
        raise BadInput(f"the scenario folder {directory} {what}",
                       hint="pass --scenarios DIR (a folder of *.toml deployments)")
    paths = sorted(directory.glob("*.toml"))
    if not paths:
        raise BadInput(f"no scenarios (*.toml) in {directory}",
                       hint="add one TOML file per deployment, e.g. llama-3.1-8b-h100.toml")
    return [load_scenario(p) for p in paths]


def evaluate(request: Request) -> Estimate:
    return estimate(request.model, request.deployment, gpu_name=request.gpu,
                    gpu_memory_bytes=request.gpu_memory_bytes, gpu_arch=request.gpu_arch)


def evaluate_scenario(s: Scenario) -> Estimate:
    """The scenario's estimate; an error names the scenario."""
    try:
        return evaluate(s.request)
    except BadInput as exc:
        raise type(exc)(f"scenario {s.name}: {exc.message}", hint=exc.hint) from None

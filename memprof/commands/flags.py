"""The deployment flags as a ``Deployment``: every command that builds a deployment
(``estimate``, ``explain``, ``sweep``, ``trace``, ``versions``) parses the flags that
``memprof.commands.options.deployment_options`` generates from the settings table, and reads
them here (with a pasted serve command, when there is one)."""

from __future__ import annotations

import sys
import typing
from dataclasses import replace
from typing import Any

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.gpus import GPU

if typing.TYPE_CHECKING:
    from memprof.probes.serve_command import ServeCommand


def _size(text: str | None, *, vllm_bytes: bool = False) -> int | None:
    from memprof.base.units import parse_size

    if text is None:
        return None
    # zero is none (--gpu-memory-in-use 0, 0B or 0GiB alike); a size setting that must be
    # positive refuses it in deployment.validate
    return parse_size(text, bare_bytes=vllm_bytes, vllm_letters=vllm_bytes, zero_ok=vllm_bytes)


DEFAULT_MODEL = "deepseek-r1"


def deployment(flags: dict[str, Any], serve: ServeCommand | None = None
               ) -> tuple[str, Deployment, str | None, int | None]:
    """(model, deployment, --gpu, --gpu-memory bytes) from the flags, and from a pasted serve
    command when there is one (its settings win over defaults; a setting given both ways with
    two different values is an error)."""
    from memprof.core.flags import SETTINGS

    f = flags
    values: dict[str, Any] = {
        st.field: _size(f[st.field], vllm_bytes=True) if st.kind == "size" else f[st.field]
        for st in SETTINGS}
    dep = Deployment(**values)
    model = f["model"]
    if model is not None and not model.strip():  # --model "$MODEL" with MODEL unset
        raise BadInput("--model is empty", hint=f"give the model, or leave --model out for "
                       f"the default ({DEFAULT_MODEL})")
    if serve is not None:
        model, dep = _merge(model, dep, serve)
        if model is None:  # the engine would serve its own default model, not memprof's
            raise BadInput("the serve command names no model",
                           hint="add it (vllm serve MODEL …, python -m sglang.launch_server "
                           "--model-path MODEL …), or give --model")
    if dep.engine_version is not None:
        dep = _build_release(dep)
    if serve is not None and serve.language_model_only:
        from memprof.core.models.multimodal import check_language_model_only
        from memprof.core.versions import resolve_version

        check_language_model_only(resolve_version(dep.engine_version, dep.engine))
    return model or DEFAULT_MODEL, dep, f["gpu"], _size(f["gpu_memory"])


def _build_release(dep: Deployment) -> Deployment:
    """A development or vendor build as ``--engine-version`` (``0.7.4.dev12``) is modelled at
    the release it maps to (:func:`engine_release`)."""
    release = engine_release(str(dep.engine_version), dep.engine)
    return dep if release == dep.engine_version else dep.with_(engine_version=release)


def engine_release(version: str, engine: str) -> str:
    """``version`` as memprof models it: a development or vendor build (``0.7.4.dev12``,
    ``0.11.2rc1+rhai0``) maps to a modelled release (``memprof.core.release_names.map_build``),
    said on stderr as a note; anything else is returned as given (and checked later)."""
    from memprof.core.release_names import map_build

    mapped = map_build(version, engine)
    if mapped is None:
        return version
    if mapped.note:
        sys.stderr.write(f"note: {mapped.note}\n")
    return mapped.release


def _merge(model: str | None, dep: Deployment, serve: ServeCommand
           ) -> tuple[str | None, Deployment]:
    from memprof.core.flags import flag_name

    default = Deployment()
    if dep.engine != default.engine and dep.engine != serve.engine:
        raise BadInput(f"--engine {dep.engine} but the pasted command runs {serve.engine}",
                       hint="drop --engine: the pasted command names its engine")
    changes: dict[str, Any] = {"engine": serve.engine}
    for fld, value in serve.settings.items():
        mine = getattr(dep, fld)
        if mine != getattr(default, fld) and mine != value:
            flag = flag_name(fld, serve.engine)
            raise BadInput(f"{flag} is {value} in the pasted command and {mine} in memprof's "
                           "flags", hint=f"give {flag} once")
        changes[fld] = value
    if model is not None and serve.model is not None and not _same_model(model, serve.model):
        raise BadInput(f"--model {model} but the pasted command serves {serve.model}",
                       hint="give the model once")
    return model or serve.model, dep.with_(**changes)


def _same_model(a: str, b: str) -> bool:
    """``a`` and ``b`` name one bundled model: the same text, or a bundled name and an HF id of
    it (``--model qwen3-8b`` beside ``vllm serve Qwen/Qwen3-8B`` is no conflict)."""
    if a.strip() == b.strip():
        return True
    from memprof.core.models import bundled_models
    from memprof.core.models.load import hf_ids

    ids, names = hf_ids(), bundled_models()

    def bundled(x: str) -> str | None:
        key = x.strip().lower()
        return key if key in names else ids[key][1] if key in ids else None

    return bundled(a) is not None and bundled(a) == bundled(b)


def gpu_of(name: str | None, memory: int | None, arch: str | None = None) -> GPU:
    """``--gpu`` / ``--gpu-memory`` (/ ``--gpu-arch``) as a GPU; ``--gpu auto`` asks this host
    (exit 3 when it cannot say)."""
    from memprof.core.gpus import resolve_gpu

    if name is not None and name.strip().lower() == "auto":
        from memprof.probes.devices import local_gpu

        if arch is not None:  # bad input, before the host is asked (exit 2, not 3)
            raise BadInput("--gpu-arch with --gpu auto: the host's GPU names its own "
                           "architecture", hint="leave out --gpu-arch")
        local = local_gpu()
        if memory is None:
            return local
        return replace(local, total_bytes=memory, exact=True, source="--gpu-memory")
    return resolve_gpu(name, memory, arch)

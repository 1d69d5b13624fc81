"""A pasted serve command → the deployment it starts.

Reads ``vllm serve MODEL --flag value …``, ``python -m vllm.entrypoints.openai.api_server …``,
``python -m sglang.launch_server --model-path MODEL …`` and ``sglang serve [MODEL] …`` as tokens
(also after ``docker run [docker options] IMAGE``: the vLLM image's entrypoint is ``vllm
serve``, so ``IMAGE MODEL --flags`` serve; the image's tag names the release where it is one),
or as the text of a file: a
shell script (continuation lines joined, simple ``NAME=value`` assignments expanded), a
docker-compose file (the service's ``entrypoint`` + ``command``; the vLLM image's entrypoint is
``vllm serve``) or a Kubernetes manifest (a container's ``command`` + ``args``, also through
``sh -c "…"``).

Flags are looked up in ``memprof.core.flags.SETTINGS`` (applied to the deployment) and in
``memprof.probes.serve_flags`` (not modelled, or ignored); anything else is an error naming the
engine version the tables describe.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any

from memprof.base.errors import BadInput
from memprof.base.files import read_capped_text
from memprof.base.units import human_readable_int
from memprof.core.auto_fit import AUTO_FIT
from memprof.core.deployment import DTYPES, ENGINE_DTYPES
from memprof.core.dtypes import FLAG_ALIASES
from memprof.core.engines import ENGINES
from memprof.core.engines.vllm_pooling import pooling_convert
from memprof.core.flags import SETTINGS, coerce
from memprof.core.speculative import NGRAM, NGRAM_GPU, method_of, speculative_settings, vllm_method
from memprof.probes.serve_flags import (
    ENGINE_VERSION_ASSUMED,
    HUMAN_READABLE,
    MEMPROF_ONLY,
    OTHER_FLAGS,
    SGLANG_CLI,
    ServeFlag,
    sglang_flag_at,
    sglang_flag_refused,
    sglang_no_flag,
    sglang_refused_message,
)

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
MAX_TOKENS = 4096  # a command longer than this is not a command
MAX_FILE_BYTES = 1 << 20
# A compose file or manifest nests a few levels (a Kubernetes Deployment about 10); deeper YAML
# is refused before it is built (PyYAML builds nodes recursively), and so is YAML whose anchors
# and aliases expand to more nodes than a 1 MiB file can spell out (a "billion laughs").
MAX_YAML_DEPTH = 100
MAX_YAML_NODES = 1_000_000
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"exec", "env", "nohup", "sudo", "time", "command", "stdbuf", "numactl", "taskset"}
# Environment settings of a launch that memprof models, by engine: NAME → Deployment field.
# vLLM's VLLM_USE_V1 (envs.py; 0 = the V0 engine, 0.8.0 – 0.10.2: core/engines/vllm.py V0_ENGINE)
# and VLLM_USE_FLASHINFER_SAMPLER (core/terms/activation.py V1_FLASHINFER_SAMPLER); NCCL's
# NCCL_NVLS_ENABLE (core/terms/nccl_nvls.py), which vLLM leaves to NCCL; PyTorch's
# PYTORCH_CUDA_ALLOC_CONF (core/terms/load_rounding.py load_alloc_conf).
ENV_SETTINGS: dict[str, dict[str, str]] = {"vllm": {"VLLM_USE_V1": "vllm_use_v1",
                                                        "VLLM_USE_FLASHINFER_SAMPLER":
                                                        "vllm_use_flashinfer_sampler",
                                                        "VLLM_ROCM_USE_AITER":
                                                        "vllm_rocm_use_aiter",
                                                        "NCCL_NVLS_ENABLE": "nccl_nvls_enable",
                                                        "VLLM_ALLREDUCE_USE_SYMM_MEM":
                                                        "vllm_allreduce_use_symm_mem",
                                                        "PYTORCH_CUDA_ALLOC_CONF":
                                                        "pytorch_cuda_alloc_conf",
                                                        # the attention selector's override
                                                        # (vllm/envs.py), --attention-backend's
                                                        "VLLM_ATTENTION_BACKEND":
                                                        "attention_backend"}}
# Environment settings that change GPU memory but that memprof has no model of, by engine: NAME →
# what they change. Set to anything but 0 / false they are stated as not modelled, never dropped.
# SGLang's PYTORCH_CUDA_ALLOC_CONF: its load segments are replayed under PyTorch's default
# allocator (core/terms/load_segments.py), and --pytorch-cuda-alloc-conf is vLLM's only.
ENV_NOT_MODELLED: dict[str, dict[str, str]] = {
    "vllm": {"VLLM_BATCH_INVARIANT": "batch-invariant kernels and their workspaces"},
    "sglang": {"PYTORCH_CUDA_ALLOC_CONF": "the caching allocator's settings; SGLang's model "
               "load is replayed under PyTorch's defaults"}}
_ENV_OFF = frozenset({"", "0", "false", "False", "FALSE", "no"})
_SHELL_STOP = {"&&", "||", ";", "|", "&", ">", ">>", "2>", "2>&1", "<", "1>", "&>"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeCommand:
    """What a serve command sets: the engine, the model, the Deployment fields its flags set
    (engine values, already read as the engine reads them), and the flags memprof does not apply."""

    engine: str
    model: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()
    not_modelled: tuple[tuple[str, str], ...] = ()
    version: str = ""
    # the release a container image's tag names (``vllm/vllm-openai:v0.27.1`` → "0.27.1"), or
    # None (no image, or a tag such as ``latest`` that names none)
    image_release: str | None = None
    # the command runs vLLM's ``--language-model-only`` (applied to ``settings`` as
    # ``--limit-mm-per-prompt``; the release that must have the flag is checked where it is known)
    language_model_only: bool = False
    # every flag given, as the engine spells it (``--tp_size`` read as ``--tp-size``)
    flags: tuple[str, ...] = ()

    def describe(self, release: str | None = None) -> list[str]:
        """The lines a user reads about what was taken from the command (stderr); ``release``:
        the release modelled where ``--engine-version`` names one (the flag tables stay
        ``version``'s)."""
        name = ENGINE_NAMES[self.engine]
        how = f"{name} {self.version}"
        if self.image_release is not None:
            how = (f"{name} (release {self.image_release} from the image's tag; flags as {name} "
                   f"{self.version} spells them)")
        elif (release is not None and _by_release(self.engine)
              and sglang_flag_at("--model-path", release.removeprefix("v")) is not None):
            # the flags were checked against that release's ServerArgs (check_release)
            how = f"{name} (release {release} from --engine-version, and its flags)"
        elif release is not None and release != self.version:
            how = (f"{name} (release {release} from --engine-version; flags as {name} "
                   f"{self.version} " + ("spell" if " - " in self.version else "spells")
                   + " them)")
        out = [f"read as {how}: model {self.model or '(not given)'}, "
               + (", ".join(f"{k}={v}" for k, v in self.settings.items()) or "no memory flags")]
        if self.not_modelled:
            out.append("warning: not modelled (they change GPU memory; memprof leaves them out): "
                       + "; ".join(f"{f} ({n})" if n else f for f, n in self.not_modelled))
        if self.ignored:
            out.append("ignored (no effect on GPU memory): " + " ".join(self.ignored))
        return out


def _lookup(engine: str) -> dict[str, tuple[str, ServeFlag | None]]:
    """flag → ("setting", field) or ("other", ServeFlag) for one engine."""
    table: dict[str, tuple[str, ServeFlag | None]] = {}
    for s in SETTINGS:
        if s.field in MEMPROF_ONLY:
            continue
        for f in s.flags(engine):
            table[f] = (s.field, None)
    for f, fld in ENGINES[engine].flag_aliases.items():
        table.setdefault(f, (fld, None))
    for sf in OTHER_FLAGS[engine]:
        for f in sf.names:
            table.setdefault(f, ("", sf))
    return table


_TABLES = {e: _lookup(e) for e in ENGINE_NAMES}
_BOOL_FIELDS = {s.field for s in SETTINGS if s.kind == "bool"}


def _required_fields() -> frozenset[str]:
    """Deployment fields that have a value always (``tp``, ``kv_cache_dtype``): the engine
    reads ``None`` for them as an error, not as "its default"."""
    from memprof.core.deployment import Deployment

    return frozenset(f.name for f in fields(Deployment) if f.default is not None)


_REQUIRED = _required_fields()


def _norm_flag(flag: str) -> str:
    """vLLM and SGLang accept ``--tensor_parallel_size`` for ``--tensor-parallel-size``."""
    if flag.startswith("--"):
        return "--" + flag[2:].replace("_", "-")
    return flag


def _unknown(flag: str, engine: str) -> BadInput:
    import difflib

    name = ENGINE_NAMES[engine]
    close = difflib.get_close_matches(flag, list(_TABLES[engine]), n=1, cutoff=0.8)
    hint = (f"did you mean {close[0]}? " if close else "check its spelling; ") + (
        "memprof's own flags (--gpu, --format) go before the --")
    return BadInput(f"unknown {name} flag {flag[:60]!r} (memprof knows the flags of {name} "
                    f"{ENGINE_VERSION_ASSUMED[engine]})", hint=hint)


_SGLANG_SPELLED = tuple(sorted({f for e in SGLANG_CLI["fields"].values() for f in e["flags"]}))


def _sglang_prefix(flag: str, where: str) -> str | None:
    """The SGLang flag ``flag`` abbreviates, as argparse reads a unique prefix of a long flag
    (``allow_abbrev``, on in every release read: server_args.py prepare_server_args builds its
    ``argparse.ArgumentParser`` with the default), among the flags of every release
    (``configs/sglang_cli_flags.json``); a prefix of several is an error, as argparse's
    "ambiguous option"; None: a prefix of none."""
    if not flag.startswith("--") or len(flag) < 4:
        return None
    hits = [f for f in _SGLANG_SPELLED if f.startswith(flag)]
    if len(hits) > 1:
        raise BadInput(f"{where}: {flag[:60]} is ambiguous: SGLang reads a unique prefix of a "
                       f"flag, and it begins {len(hits)} ({', '.join(hits[:3])}, ...)",
                       hint="spell the flag out")
    return hits[0] if hits else None


def find_launcher(tokens: list[str]) -> tuple[str, int] | None:
    """(engine, index of the first argument after the launcher), or None."""
    i = 0
    while i < len(tokens):
        t = tokens[i]
        base = t.rsplit("/", 1)[-1]
        if _ENV_ASSIGN.match(t) or base in _WRAPPERS:
            i += 1
            continue
        for e in ENGINES.values():
            if (e.cli_launcher is not None and base == e.cli_launcher[0]
                    and i + 1 < len(tokens) and tokens[i + 1] == e.cli_launcher[1]):
                return e.name, i + 2
        if re.fullmatch(r"python[0-9.]*", base) or base in ("uv", "run"):
            # python [-u] -m MODULE
            j = i + 1
            while j < len(tokens) and tokens[j] in ("-u", "-O", "-B", "run", "python",
                                                      "python3"):
                j += 1
            if j + 1 < len(tokens) and tokens[j] == "-m":
                mod = tokens[j + 1]
                for e in ENGINES.values():
                    if e.launches(mod):
                        return e.name, j + 2
            return None
        return None
    return None


def parse_tokens(tokens: list[str], *, engine: str | None = None,
                 where: str = "the pasted command",
                 env: dict[str, str] | None = None) -> ServeCommand:
    """A serve command's tokens (launcher included, or ``engine`` given for bare arguments);
    ``NAME=value`` words before the launcher and ``env`` (a script's exports) set what
    ``ENV_SETTINGS`` names."""
    if len(tokens) > MAX_TOKENS:
        raise BadInput(f"{where} has {len(tokens)} words", hint="paste one serve command")
    container = docker_run(tokens)
    if container is not None:
        return _from_docker(container, where, env)
    found = find_launcher(tokens)
    if found is not None:
        engine, start = found
        args = tokens[start:]
        flag = ENGINES[engine].cli_model_flag
        if (flag is not None and args and not args[0].startswith("-")
                and tokens[start - 1] == (ENGINES[engine].cli_launcher or ("", ""))[1]):
            args = [flag, *args]  # sglang serve MODEL
    elif engine is not None:
        args = list(tokens)
    else:
        shown = " ".join(tokens[:3])[:60]
        raise BadInput(f"{where} is not a serve command ({shown!r})",
                       hint="paste 'vllm serve MODEL …', 'python -m sglang.launch_server "
                       "--model-path MODEL …' or 'sglang serve MODEL …'")
    for k, tok in enumerate(args):
        if tok in _SHELL_STOP:
            args = args[:k]
            break
    cmd = _pooling_flags_not_modelled(_parse_args(engine, args, where))
    given = dict(env or {})
    for tok in tokens[:found[1] if found else 0]:
        if _ENV_ASSIGN.match(tok):
            name, _, value = tok.partition("=")
            given[name] = value
    extra = {fld: coerce(fld, given[name], where=f"{where}: {name}")
             for name, fld in ENV_SETTINGS.get(engine, {}).items() if name in given}
    unmodelled = tuple((f"{name}={given[name]}", what)
                       for name, what in ENV_NOT_MODELLED.get(engine, {}).items()
                       if given.get(name, "") not in _ENV_OFF)
    if not extra and not unmodelled:
        return cmd
    return replace(cmd, settings={**extra, **cmd.settings},
                   not_modelled=cmd.not_modelled + unmodelled)


# flags vLLM takes for any model that change what a pooling model's profile run holds, which
# memprof does not model: listed as not modelled with --runner pooling (ignored otherwise)
_POOLING_NOT_MODELLED = {
    # 0.11.0 engine/arg_utils.py _set_default_args, v1/worker/gpu_model_runner.py
    # get_supported_pooling_tasks
    "--no-enable-chunked-prefill": "a pooling model without chunked prefill: the token-level "
    "pooler task in the profile run and max_num_batched_tokens = max_model_len",
    # config/vllm.py: off by default for a pooling model (0.20.0-0.33.0); 0.28.0-0.33.0
    # layers/pooler/tokwise/methods.py AllPool: clone_finished = async_scheduling
    "--async-scheduling": "a pooling model with async scheduling (off by default for one): from "
    "vLLM 0.28.0 the token_embed task clones every request's hidden states",
}


def _pooling_flags_not_modelled(cmd: ServeCommand) -> ServeCommand:
    """The flags of ``_POOLING_NOT_MODELLED`` on vLLM's pooling runner: moved from the ignored
    flags to the not-modelled ones. (For the generation runner they keep their place in the
    ignored list, where ``serve_flags`` puts them: 0.11.0's ``_set_default_args`` forces chunked
    prefill on there.)"""
    settings = cmd.settings
    flags = [f for f in _POOLING_NOT_MODELLED if f in cmd.ignored]
    if not flags or pooling_convert(str(settings.get("runner") or "generate"),
                                    settings.get("convert"), settings.get("task")) is None:
        return cmd
    return replace(cmd, ignored=tuple(f for f in cmd.ignored if f not in flags),
                   not_modelled=(*cmd.not_modelled,
                                 *((f, _POOLING_NOT_MODELLED[f]) for f in flags)))


# --- docker run ------------------------------------------------------------------------------

# The container runtimes whose ``run`` takes ``[OPTIONS] IMAGE [COMMAND] [ARG...]`` (Docker's
# ``docker run`` reference; Podman and nerdctl take the same form).
CONTAINER_RUNTIMES = frozenset({"docker", "podman", "nerdctl"})
# ``docker run``'s options that take no value (the reference's booleans; Podman's --replace):
# every other option takes one, inline (``--ipc=host``) or as the next word (``--gpus all``).
_DOCKER_SWITCHES = frozenset({
    "--detach", "--interactive", "--tty", "--rm", "--privileged", "--init", "--read-only",
    "--publish-all", "--no-healthcheck", "--oom-kill-disable", "--sig-proxy",
    "--disable-content-trust", "--quiet", "--help", "--replace", "--use-api-socket"})
_DOCKER_SHORT_SWITCHES = frozenset("ditPq")  # -d -i -t -P -q, also clustered: -it, -dit
_DOCKER_ENV = frozenset({"-e", "--env"})
# an image tag that is a release: v0.27.1, 0.8.5.post1, v0.4.6.post1-cu124 (a CUDA suffix)
_TAG_RELEASE = re.compile(r"v?([0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:\.?(?:post|dev|rc)[0-9]+)*)"
                          r"(?:-[A-Za-z0-9.]+)*")


@dataclass(frozen=True, slots=True)
class DockerRun:
    """What ``docker run`` starts: the image, its entrypoint override, the words after the
    image, and the environment its ``-e NAME=value`` options set."""

    image: str
    entrypoint: list[str]
    args: list[str]
    env: dict[str, str]


def docker_run(tokens: list[str]) -> DockerRun | None:
    """``[sudo] docker run [OPTIONS] IMAGE [ARG...]`` read, or None where ``tokens`` are no
    container run. Elided words (``...``) among the options are skipped."""
    i = 0
    while i < len(tokens) and (tokens[i].rsplit("/", 1)[-1] in _WRAPPERS
                               or _ENV_ASSIGN.match(tokens[i])):
        i += 1
    if not (i + 1 < len(tokens) and tokens[i].rsplit("/", 1)[-1] in CONTAINER_RUNTIMES):
        return None
    j = i + 1
    if tokens[j] == "container":  # docker container run
        j += 1
    if j >= len(tokens) or tokens[j] != "run":
        return None
    j += 1
    env: dict[str, str] = {}
    entrypoint: list[str] = []
    while j < len(tokens):
        tok = tokens[j]
        if tok in ("...", "…"):
            j += 1
            continue
        if not tok.startswith("-") or tok == "-":
            break
        j += 1
        name, eq, inline = tok.partition("=")
        if tok.startswith("--"):
            if name in _DOCKER_SWITCHES or eq:
                value = inline if eq else None
            else:
                value = tokens[j] if j < len(tokens) else None
                j += 1
        elif set(tok[1:]) <= _DOCKER_SHORT_SWITCHES:
            continue
        elif len(tok) > 2:  # -eNAME=value, -p8000:8000: the value attached
            name, value = tok[:2], tok[2:]
        else:
            value = tokens[j] if j < len(tokens) else None
            j += 1
        if value is None:
            continue
        if name in _DOCKER_ENV and "=" in value:
            key, _, val = value.partition("=")
            env[key] = _unquote(val)
        elif name == "--entrypoint":
            entrypoint = value.split()
    if j >= len(tokens):
        return None  # options and no image: not a command that runs anything
    return DockerRun(image=tokens[j], entrypoint=entrypoint, args=tokens[j + 1:], env=env)


def image_release(image: str) -> str | None:
    """The release an image's tag names (``vllm/vllm-openai:v0.27.1`` → ``0.27.1``,
    ``lmsysorg/sglang:v0.4.6.post1-cu124`` → ``0.4.6.post1``); None for ``latest``,
    ``nightly``, a digest or no tag."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    m = _TAG_RELEASE.fullmatch(last.rsplit(":", 1)[1])
    return m.group(1) if m else None


def image_engine(image: str) -> str | None:
    """The engine an image is named for (``vllm/vllm-openai``, ``lmsysorg/sglang``)."""
    name = image.split("@", 1)[0].lower()
    name = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return next((e.name for e in ENGINES.values() if e.name in name), None)


def _from_docker(run: DockerRun, where: str, env: dict[str, str] | None) -> ServeCommand:
    """The serve command a ``docker run`` starts: a launcher in its words (the entrypoint's and
    the command's, ``sh -c "…"`` included), else the engine image's own entrypoint serving
    (vLLM's image: ``IMAGE MODEL --flags``)."""
    words = [*run.entrypoint, *run.args]
    given = {**(env or {}), **run.env}
    if find_launcher(words) is not None:
        cmd = parse_tokens(words, where=where, env=given)
    else:
        inner = next((w for w in words if _LAUNCH.search(w)), None)
        engine = image_engine(run.image)
        if inner is not None:  # sh -c "…": the launcher is inside one string
            cmd = _from_script(inner, where)
        elif (engine is not None and not run.entrypoint
              and ENGINES[engine].image_entrypoint_serves):
            cmd = parse_tokens(run.args, engine=engine, where=where, env=given)
        else:
            raise BadInput(f"{where} is not a serve command: the container {run.image[:60]!r} "
                           "runs none that memprof can see",
                           hint="paste the vllm serve / python -m sglang.launch_server "
                           "command, or docker run with vLLM's image (vllm/vllm-openai:TAG "
                           "MODEL --flags)")
    return _with_image_release(cmd, run.image)


def _with_image_release(cmd: ServeCommand, image: str | None) -> ServeCommand:
    """``cmd`` at the release its container image's tag names (``docker run``, a compose
    service's or a Kubernetes container's ``image:``), where the image is the engine's own (a
    tag of another image, ``myorg/app:1.2.3``, is no engine release)."""
    from memprof.core.release_names import map_release

    if image is None or image_engine(image) != cmd.engine:
        return cmd
    release = image_release(image)
    settings = dict(cmd.settings)
    not_modelled = cmd.not_modelled
    if release is not None and map_release(release, cmd.engine) is None:
        # a tag memprof cannot read as a release: said, and left to the default release (a
        # version it can read, a post or vendor build too, is taken and mapped later:
        # release_names.map_build)
        not_modelled += ((f"the image's release {release}",
                          f"{ENGINE_NAMES[cmd.engine]} {release} is not a release memprof "
                          "models; --engine-version picks one"),)
    elif release is not None:  # the image's release is the engine version it runs
        settings.setdefault("engine_version", release)
    return replace(cmd, settings=settings, not_modelled=not_modelled, image_release=release)


_LAUNCH = re.compile(r"vllm\s+serve|vllm\.entrypoints|sglang\.launch_server|sglang\s+serve")
_DOCKER_RUN = re.compile(r"\b(?:docker|podman|nerdctl)\s+(?:container\s+)?run\b")


def _parse_args(engine: str, args: list[str], where: str) -> ServeCommand:
    table = _TABLES[engine]
    settings: dict[str, Any] = {}
    ignored: list[str] = []
    not_modelled: list[tuple[str, str]] = []
    given: list[str] = []
    model: str | None = None
    cpu_loras: str | None = None
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or re.fullmatch(r"-[0-9.]+", tok):
            if engine in ENGINES and ENGINES[engine].positional_model and model is None:
                model = tok  # vllm serve MODEL
                continue
            raise BadInput(f"{where}: unexpected argument {tok[:60]!r}",
                           hint="every setting after the model is a --flag")
        name, eq, inline = tok.partition("=")
        name = _norm_flag(name)
        if re.fullmatch(r"-O[0-9]", name) and "-O" in table:  # vLLM's -O3: a compilation level
            if "-O" not in (n for n, _ in not_modelled):
                not_modelled.append(("-O", table["-O"][1].note if table["-O"][1] else ""))
            continue
        if name == "--config":
            raise BadInput(f"{where}: --config reads the flags from a YAML file, which memprof "
                           "does not open", hint="paste the flags that file sets instead")
        negated = False
        entry = table.get(name)
        if entry is None and name.startswith("--no-"):
            entry = table.get("--" + name[5:])
            negated = entry is not None
        if entry is None and _by_release(engine):
            name = _sglang_prefix(name, where) or name
            entry = table.get(name)
        if entry is None:
            raise _unknown(name, engine)
        given.append(name)
        fld, other = entry
        is_switch = (other.arity == "flag") if other is not None else fld in _BOOL_FIELDS
        if negated and not is_switch:
            raise _unknown(name, engine)
        if negated and _by_release(engine) and not sglang_no_flag("--" + name[5:]):
            # SGLang's argparse takes --no-X only for a BooleanOptionalAction switch
            raise BadInput(f"{where}: SGLang has no flag {name}: --{name[5:]} is a switch "
                           "without a --no- form (argparse gives one only to a "
                           "BooleanOptionalAction flag)",
                           hint=f"leave --{name[5:]} out for its default")
        values: list[str] = []
        if is_switch:
            if eq:
                values = [inline]
        elif eq:
            values = [inline]
        else:
            while i < len(args) and (not args[i].startswith("--") or not values) and (
                    not args[i].startswith("-") or re.fullmatch(r"-[0-9.]+", args[i])):
                values.append(args[i])
                i += 1
                if other is None or other.arity != "many":
                    break
            if not values and (other is None or other.arity != "optional"):
                raise BadInput(f"{where}: {name} needs a value", hint=f"e.g. {name} VALUE")
        if other is not None:
            if other.kind == "ignored":
                if name not in ignored:
                    ignored.append(name)
                if name == "--max-cpu-loras":  # no memory, but a bound vLLM checks
                    cpu_loras = values[-1]
            elif other.kind == "not_modelled":
                if name not in (n for n, _ in not_modelled):
                    not_modelled.append((name, other.note))
            else:
                model = _special(engine, other, name, values, negated, settings, not_modelled,
                                 model, where)
            continue
        if is_switch:
            value: Any = (not negated) if not values else coerce(fld, values[0], where=where)
        elif fld in HUMAN_READABLE:
            value = _human_int(values[0], name, where)
        elif fld == "dtype":
            value = _engine_dtype(engine, name, values[0], where)
        else:
            value = coerce(fld, values[0], where=f"{where}: {name}")
        if value is None and fld in _REQUIRED:
            # vLLM's argparse reads these with int()/a choice list: "None" is refused there too
            raise BadInput(f"{where}: bad value {values[0][:40]!r} for {name} (an integer "
                           "is needed)" if fld in ("tp", "pp", "dp") else
                           f"{where}: bad value {values[0][:40]!r} for {name}",
                           hint=f"give {name} a value, or leave the flag out for the "
                           "engine's default")
        settings[fld] = value
    language_model_only = bool(settings.pop(_LANGUAGE_MODEL_ONLY, False))
    if language_model_only:
        _language_model_only(model, settings, not_modelled)
    if cpu_loras is not None and settings.get("enable_lora"):
        _check_cpu_loras(cpu_loras, int(settings.get("max_loras") or 1), where)
    return ServeCommand(engine=engine, model=model, settings=settings, ignored=tuple(ignored),
                        not_modelled=tuple(not_modelled),
                        version=ENGINE_VERSION_ASSUMED[engine],
                        language_model_only=language_model_only,
                        flags=tuple(given))



def check_release(cmd: ServeCommand, release: str | None) -> None:
    """An SGLang command's flags at the release asked (``--engine-version``, or the image's
    tag): a flag that release's ServerArgs does not have (``serve_flags.sglang_flag_at``) is an
    error naming the releases that have it and the nearest flag of the release asked. No
    release asked: every flag of the releases read is taken."""
    if not _by_release(cmd.engine) or not release:
        return
    import difflib

    release = release.removeprefix("v")
    for flag in cmd.flags:
        if flag.startswith("--no-") and flag not in _SGLANG_SPELLED:
            have = [r for r in _sglang_releases() if sglang_no_flag("--" + flag[5:], r)]
            if have and release in _sglang_releases() and release not in have:
                read = [r for r in have if r in SGLANG_CLI["read"]] or have
                raise BadInput(f"SGLang {release} has no flag {flag} (of the releases read, "
                               f"{read[0]} - {read[-1]} register --{flag[5:]} as a "
                               "BooleanOptionalAction)",
                               hint=f"leave --{flag[5:]} out for its default, or give the "
                               "--engine-version the command was written for")
            continue
        if sglang_flag_at(flag, release) is not False:
            continue
        there = [f for f in _SGLANG_SPELLED if sglang_flag_at(f, release)]
        close = difflib.get_close_matches(flag, there, n=1, cutoff=0.6)
        hint = ((f"did you mean {close[0]}? " if close else "")
                + "or give the --engine-version the command was written for")
        if sglang_flag_refused(flag, release):
            said = sglang_refused_message(flag)
            raise BadInput(f"SGLang {release} refuses {flag}: its parser registers the flag "
                           "only to stop at it (deprecated)",
                           hint=f"SGLang says: {said}" if said else hint)
        have = [r for r in _sglang_releases() if sglang_flag_at(flag, r)]
        span = f"SGLang {have[0]} - {have[-1]} has" if have else "no release takes it"
        raise BadInput(f"SGLang {release} has no flag {flag} ({span})", hint=hint)


def _by_release(engine: str) -> bool:
    """Are the engine's flags read per release from its own flag table, prefixes too
    (``Engine.cli_flags_by_release``: SGLang)?"""
    row = ENGINES.get(engine)
    return row is not None and row.cli_flags_by_release


def _sglang_releases() -> list[str]:
    from memprof.probes.sglang_log import release_fields

    return list(release_fields())


def _check_cpu_loras(text: str, max_loras: int, where: str) -> None:
    """vLLM's LoRAConfig refuses a CPU adapter cache smaller than the batch's adapters
    (config/lora.py ``__post_init__``: "max_cpu_loras (N) must be >= max_loras (M)")."""
    try:
        cpu = int(text)
    except ValueError:
        raise BadInput(f"{where}: bad value {text[:40]!r} for --max-cpu-loras",
                       hint="an integer, at least --max-loras") from None
    if cpu < max_loras:
        raise BadInput(f"{where}: --max-cpu-loras {cpu} is below --max-loras {max_loras} (vLLM's "
                       f"LoRAConfig: 'max_cpu_loras ({cpu}) must be >= max_loras "
                       f"({max_loras})')",
                       hint=f"give --max-cpu-loras {max_loras} or more, or leave it out (it "
                       "defaults to --max-loras)")


# the key under which _special notes vLLM's --language-model-only until the model is known
_LANGUAGE_MODEL_ONLY = "--language-model-only"


def language_model_only_limits(model: str) -> str | None:
    """vLLM's ``--language-model-only`` as ``--limit-mm-per-prompt``: vllm/config/multimodal.py
    (0.17.0, 0.27.1, 0.28.0) ``MultiModalConfig.get_limit_per_prompt`` returns 0 for every modality
    under it ("Equivalent to setting --limit-mm-per-prompt to 0 for every modality"), so each
    of ``model``'s modalities at 0; None for a text-only model, where it changes nothing.
    :class:`BadInput` for a model memprof does not know."""
    from memprof.core.models.load import load_model

    vision = load_model(model).vision
    return None if vision is None else json.dumps(dict.fromkeys(vision.modalities, 0))


def _language_model_only(model: str | None, settings: dict[str, Any],
                         not_modelled: list[tuple[str, str]]) -> None:
    """A pasted ``--language-model-only`` applied: it wins over a ``--limit-mm-per-prompt``
    beside it, as in vLLM; listed as not modelled where memprof cannot read the model's
    modalities here (a model it does not know: the estimate says so itself)."""
    try:
        limits = language_model_only_limits(model) if model is not None else None
    except BadInput:
        not_modelled.append((_LANGUAGE_MODEL_ONLY, "the model's modalities at 0: give "
                             "--limit-mm-per-prompt with each of them at 0"))
        return
    if limits is not None:
        settings["limit_mm_per_prompt"] = limits


def _engine_dtype(engine: str, flag: str, text: str, where: str) -> str:
    """A pasted ``--dtype`` as the engine's argparse reads it: one of ``ENGINE_DTYPES``, else
    :class:`BadInput` (memprof's own ``bf16`` / ``fp16`` included, which no engine takes)."""
    if text in ENGINE_DTYPES:
        return text
    choices = f"{ENGINE_NAMES[engine]}'s argparse refuses (choices: {', '.join(ENGINE_DTYPES)})"
    if text in DTYPES:
        raise BadInput(f"{where}: {flag} {text} is memprof's own spelling, which {choices}",
                       hint=f"{flag} {FLAG_ALIASES[text]} in the command, or memprof's "
                       f"--dtype {text} before the --")
    raise BadInput(f"{where}: {flag} {text[:40]!r}, which {choices}",
                   hint=f"e.g. {flag} bfloat16 (or auto: the checkpoint's)")


# vLLM's ``human_readable_int`` (engine/arg_utils.py) reads these flags, by the release it
# arrived in for each: --max-model-len 0.8.4 (0.8.3 parses int()), --max-num-batched-tokens
# 0.9.2 (0.9.0: max_model_len only; 0.9.1 not read), --kv-cache-memory-bytes 0.10.2 (read as a
# size here). memprof reads them at the newest release's rules.
HUMAN_READABLE_SINCE = {"max_model_len": "0.8.4", "max_num_batched_tokens": "0.9.2"}


def _human_int(text: str, flag: str, where: str) -> int:
    """A ``human_readable_int`` flag's value, or :class:`BadInput` as vLLM's argparse refuses it.
    ``--max-model-len auto`` (or -1), vLLM's auto-fit to the KV cache (vllm-project/vllm#29431,
    ``human_readable_int_or_auto``), is -1 as vLLM reads it; the release check is the core's."""
    if flag == "--max-model-len" and text.strip().lower() in ("auto", "-1"):
        return AUTO_FIT  # vLLM's auto-fit (memprof/core/auto_fit.py checks the release)
    try:
        if len(text) > 40:
            raise ValueError(text)
        value = human_readable_int(text)
    except ValueError:
        raise BadInput(f"{where}: bad value {text[:40]!r} for {flag}",
                       hint="an integer, or 10k (10,000), 1m (10^6), 32K (32,768), 1M (2^20) "
                       "as vLLM's human_readable_int reads it (no decimals with K/M/G; no T)"
                       ) from None
    if value <= 0:
        raise BadInput(f"{where}: {flag} {text[:40]!r} is not a positive number",
                       hint=f"give {flag} a positive integer, e.g. 32768 or 32k")
    return value


_SPEC_HINT = ('e.g. --speculative-config \'{"method": "ngram", "num_speculative_tokens": 4}\' '
              'or \'{"method": "deepseek_mtp", "num_speculative_tokens": 1}\'')


def _check_speculative_config(conf: dict[str, Any]) -> None:
    """Refuse a ``--speculative-config`` object vLLM refuses at start-up (config/speculative.py
    ``SpeculativeConfig``), before memprof reads its method: no method and no draft model
    (``__post_init__``: "num_speculative_tokens was provided but without speculative model", or
    ``_verify_args``' "must be provided"); a draft token count that is no positive integer
    (``_verify_args``: "Expected num_speculative_tokens to be greater than zero"; the field is
    ``Field(gt=0)`` in current releases); none at all for the n-gram and MTP methods, which have
    no draft checkpoint whose ``n_predict`` could give it (``_verify_args``:
    "num_speculative_tokens must be provided with speculative model unless the draft model
    config contains an n_predict parameter"); an n-gram ``prompt_lookup_min`` above its
    ``prompt_lookup_max`` (``__post_init__``: "prompt_lookup_min=… must be <=
    prompt_lookup_max=…")."""
    method = vllm_method(conf)
    if not method:
        raise BadInput("--speculative-config names no method and no draft model (vLLM refuses "
                       "it at start-up)", hint=_SPEC_HINT)
    n = conf.get("num_speculative_tokens")
    if n is None:
        if method_of(method) is not None:
            raise BadInput(f"--speculative-config method {method[:40]!r} without "
                           "num_speculative_tokens (vLLM: 'num_speculative_tokens must be "
                           "provided')", hint=_SPEC_HINT)
        return
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise BadInput(f"--speculative-config num_speculative_tokens must be a positive "
                       f"integer, got {json.dumps(n)[:40]} (vLLM: 'Expected "
                       "num_speculative_tokens to be greater than zero')", hint=_SPEC_HINT)
    low, high = conf.get("prompt_lookup_min"), conf.get("prompt_lookup_max")
    if (method_of(method) in (NGRAM, NGRAM_GPU) and isinstance(low, int) and isinstance(high, int)
            and low > high):
        raise BadInput(f"--speculative-config prompt_lookup_min {low} is above "
                       f"prompt_lookup_max {high} (vLLM: 'prompt_lookup_min=... must be <= "
                       "prompt_lookup_max=...')",
                       hint="give a prompt_lookup_min at most prompt_lookup_max")


def _special(engine: str, sf: ServeFlag, name: str, values: list[str], negated: bool,
             settings: dict[str, Any], not_modelled: list[tuple[str, str]],
             model: str | None, where: str) -> str | None:
    if name in ("--model", "--model-path"):
        return values[0]
    if name in ("--enable-expert-parallel", "-ep", "--enable-ep-moe"):
        settings["enable_expert_parallel"] = not negated
        return model
    if name in ("--ep-size", "--ep", "--expert-parallel-size"):
        try:
            settings["enable_expert_parallel"] = int(values[0]) > 1
        except ValueError:
            raise BadInput(f"{where}: bad value {values[0][:40]!r} for {name}",
                           hint=f"e.g. {name} 8") from None
        return model
    if name == "--language-model-only":
        settings[_LANGUAGE_MODEL_ONLY] = not negated
        return model
    if name == "--is-embedding":
        if negated:
            return model
        raise BadInput(f"{where}: --is-embedding: SGLang's embedding server is not modelled",
                       hint="memprof models vLLM's pooling runner (--engine vllm --runner "
                       "pooling), or drop --is-embedding for a generation server")
    if name == "--speculative-config":
        try:
            conf = json.loads(values[0])
        except (ValueError, RecursionError, MemoryError):
            raise BadInput(f"{where}: --speculative-config is not JSON ({values[0][:40]!r})",
                           hint=_SPEC_HINT) from None
        if not isinstance(conf, dict):
            raise BadInput(f"{where}: --speculative-config is JSON but not an object "
                           f"({values[0][:40]!r})", hint=_SPEC_HINT)
        try:
            _check_speculative_config(conf)
            got, why = speculative_settings(conf)
        except BadInput as exc:
            raise BadInput(f"{where}: {exc.message}", hint=exc.hint) from None
        settings.update(got)
        if why is not None:
            not_modelled.append((name, why))
        return model
    raise _unknown(name, engine)  # pragma: no cover - every special flag is handled above


# --- files -----------------------------------------------------------------------------------


def parse_file(path: str) -> ServeCommand:
    """The serve command in a shell script, a docker-compose file or a Kubernetes manifest."""
    p = Path(path)
    text = read_capped_text(p, what="--from-file", cap=MAX_FILE_BYTES,
                            hint="--from-file takes a shell script, a docker-compose file or a "
                            "Kubernetes manifest (a text file of at most 1 MiB)")
    return parse_text(text, where=p.name, yaml_hint=p.suffix in (".yml", ".yaml"))


def parse_text(text: str, *, where: str = "the file", yaml_hint: bool = False) -> ServeCommand:
    if yaml_hint or re.search(r"^\s*(services|apiVersion|kind|spec|containers)\s*:", text,
                              flags=re.M):
        return _from_yaml(text, where)
    return _from_script(text, where)


def _from_script(text: str, where: str) -> ServeCommand:
    found: list[ServeCommand] = []
    joined = re.sub(r"\\\r?\n", " ", text)
    env: dict[str, str] = {}
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)", line)
        if m:
            env[m.group(1)] = _unquote(m.group(2))
            continue
        if not (_LAUNCH.search(line) or _DOCKER_RUN.search(line)):
            continue
        try:
            line = _expand(line, env, where)
            tokens = _split(line, where)
            if find_launcher(tokens) is None and docker_run(tokens) is None:
                continue
            cmd = parse_tokens(tokens, where=where, env=env)
        except BadInput:
            if not found:
                raise
            continue  # a line after the serve command that reads as none (an echo of one)
        if cmd not in found:  # the same command twice (a retry loop) is one
            found.append(cmd)
    return _one_command(found, where)


def _one_command(found: list[ServeCommand], where: str) -> ServeCommand:
    """The one serve command a file runs; two different ones are :class:`BadInput` (which one
    the user means is not in the file), none is too."""
    if len(found) > 1:
        served = ", ".join(f"{ENGINE_NAMES[c.engine]} {c.model or '(no model)'}"
                           for c in found[:4])
        raise BadInput(f"{where} runs {len(found)} different serve commands ({served}); "
                       "memprof estimates one deployment",
                       hint="keep the one to estimate in a copy of the file, or paste its "
                       "command after --")
    if found:
        return found[0]
    raise BadInput(f"{where} holds no serve command (vllm serve, python -m "
                   "vllm.entrypoints.openai.api_server, python -m sglang.launch_server, "
                   "sglang serve)",
                   hint="--from-file reads a shell script, a docker-compose file or a "
                   "Kubernetes manifest")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _expand(line: str, env: dict[str, str], where: str) -> str:
    """``${NAME}``, ``${NAME:-default}`` and ``$NAME`` from the script's own assignments."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        raise BadInput(f"{where}: the serve command uses ${name}, which is not set in the file",
                       hint=f"set {name}=… in the script, or write the value in the command")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)",
                  sub, line)


def _split(line: str, where: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError as exc:
        raise BadInput(f"{where}: cannot split the command line ({exc})",
                       hint="check its quotes") from None


def _from_yaml(text: str, where: str) -> ServeCommand:
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is a dependency
        from memprof.base.errors import EnvironmentProblem

        raise EnvironmentProblem("reading YAML needs PyYAML",
                                 hint="pip install pyyaml") from None
    try:
        docs = [d for d in yaml.load_all(text, Loader=_bounded_loader(yaml, where))
                if d is not None]
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        at = f" (line {line + 1})" if isinstance(line, int) else ""
        raise BadInput(f"{where} is not valid YAML{at}",
                       hint="pass a docker-compose file or a Kubernetes manifest") from None
    except (RecursionError, MemoryError):  # pragma: no cover - the loader stops these first
        raise BadInput(f"{where} nests too deeply or is too large to be a compose file or a "
                       "manifest", hint="pass a docker-compose file or a Kubernetes manifest"
                       ) from None
    candidates: list[Container] = []
    for doc in docs:
        _collect(doc, candidates, depth=0)
    found: list[ServeCommand] = []
    for tokens, image, env, kind in candidates:
        try:
            cmd = _from_container(tokens, image, where, env,
                                  partial(_interpolated, env=env, kind=kind, where=where))
        except _NotServe:
            continue
        if cmd not in found:  # replicas of one server are one
            found.append(cmd)
    if found:
        return _one_command(found, where)
    raise BadInput(f"{where} has no container or service that runs vLLM or SGLang",
                   hint="the serve command goes in a compose service's command: or a "
                   "container's command:/args:")


def _bounded_loader(yaml: Any, where: str) -> Any:
    """PyYAML's ``SafeLoader``, refusing YAML nested deeper than ``MAX_YAML_DEPTH`` or that
    expands (through aliases) to more than ``MAX_YAML_NODES`` nodes, as it composes the nodes
    (before the deep recursion, and before any object is built from them)."""
    hint = "pass a docker-compose file or a Kubernetes manifest"

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0
            self.sizes: dict[int, int] = {}  # id(node) → nodes it expands to

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.depth >= MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                line = f" (line {mark.line + 1})" if mark is not None else ""
                raise BadInput(f"{where} nests deeper than {MAX_YAML_DEPTH} levels{line}",
                               hint=hint)
            self.depth += 1
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
            if id(node) not in self.sizes:  # a new node (an alias returns a known one)
                if isinstance(node, yaml.SequenceNode):
                    size = 1 + sum(self.sizes.get(id(c), 1) for c in node.value)
                elif isinstance(node, yaml.MappingNode):
                    size = 1 + sum(self.sizes.get(id(k), 1) + self.sizes.get(id(v), 1)
                                   for k, v in node.value)
                else:
                    size = 1
                if size > MAX_YAML_NODES:
                    raise BadInput(f"{where} expands to more than {MAX_YAML_NODES:,} YAML "
                                   "nodes (through anchors and aliases)", hint=hint)
                self.sizes[id(node)] = size
            return node

    return Loader


class _NotServe(Exception):
    pass


def _as_tokens(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return _split(value, where)
    if isinstance(value, list):
        for k, v in enumerate(value):
            if not isinstance(v, str | int | float):
                after = f" after {str(value[k - 1])[:40]!r}" if k else ""
                raise BadInput(f"{where}: item {k + 1} of the list is {str(v)[:40]!r}{after}, "
                               "not a string", hint="quote it, or give the flag a value "
                               "(an integer for -tp/-pp/-dp)")
        return [str(v) for v in value]
    raise BadInput(f"{where}: a command or args entry is neither a string nor a list of them",
                   hint="write command: [\"vllm\", \"serve\", …]")


# a compose service or a Kubernetes container: entrypoint + command/args, image, the environment
# it sets, and which of the two it is ("compose" or "k8s": they fill variables differently)
Container = tuple[list[str], str | None, dict[str, str], str]


def _env_of(value: object) -> dict[str, str]:
    """The variables a compose service's ``environment:`` (a ``KEY=value`` list or a mapping)
    or a Kubernetes container's ``env:`` (``- name: K`` / ``value: v``; a ``valueFrom`` has no
    value here) sets."""
    out: dict[str, str] = {}
    if isinstance(value, dict):
        out = {str(k): str(v) for k, v in value.items()
               if v is not None and not isinstance(v, dict | list)}
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str) and "=" in item:
                k, _, v = item.partition("=")
                out[k.strip()] = v
            elif isinstance(item, dict) and isinstance(item.get("name"), str) \
                    and isinstance(item.get("value"), str | int | float):
                out[item["name"]] = str(item["value"])
    return out


_K8S_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")  # $$ is a literal $
_COMPOSE_REF = re.compile(r"\$(?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def _interpolated(tokens: list[str], env: dict[str, str], kind: str, where: str) -> list[str]:
    """A container's words as it runs them. Kubernetes expands ``$(NAME)`` from the container's
    own ``env`` (an unset one stays as written, which the engine then refuses): refused here
    with the name; ``$$`` is a literal ``$`` (Kubernetes' escape). Compose fills ``${NAME}`` /
    ``$NAME`` from the shell or ``.env`` of the ``docker compose up`` (never from the service's
    ``environment:``), which memprof cannot see: refused, with no guess at the default (``$$``
    is a literal ``$``)."""
    out = []
    for tok in tokens:
        if kind == "k8s":
            def sub(m: re.Match[str]) -> str:
                if m.group(1) is None:  # $$: a literal $ ($$(NAME) stays $(NAME))
                    return "$"
                if m.group(1) in env:
                    return env[m.group(1)]
                raise BadInput(f"{where}: the container's args use $({m.group(1)}), which its "
                               "env: gives no value: (valueFrom, envFrom or unset)",
                               hint=f"write the value in args:, or give {m.group(1)} a value: "
                               "in the container's env:")
            tok = _K8S_REF.sub(sub, tok)
        else:
            m = _COMPOSE_REF.search(tok.replace("$$", ""))
            if m is not None:
                raise BadInput(f"{where}: the service's command uses {m.group(0)[:40]}, which "
                               "docker compose fills from the shell or .env it runs in, not "
                               "from the file", hint="write the value in the command: memprof "
                               "cannot see that shell")
            tok = tok.replace("$$", "$")
        out.append(tok)
    return out


def _collect(node: object, out: list[Container], depth: int) -> None:
    """Every compose service and Kubernetes container, as (entrypoint + command/args, image,
    environment, kind)."""
    if depth > 64:
        return
    if isinstance(node, dict):
        image = node.get("image") if isinstance(node.get("image"), str) else None
        if "services" in node and isinstance(node["services"], dict):
            for svc in node["services"].values():
                if isinstance(svc, dict):
                    toks = (_as_tokens(svc.get("entrypoint"), "entrypoint")
                            + _as_tokens(svc.get("command"), "command"))
                    img = svc.get("image")
                    out.append((toks, img if isinstance(img, str) else None,
                                _env_of(svc.get("environment")), "compose"))
            return
        if image is not None and ("args" in node or "command" in node):
            toks = (_as_tokens(node.get("command"), "command")
                    + _as_tokens(node.get("args"), "args"))
            out.append((toks, image, _env_of(node.get("env")), "k8s"))
            return
        for v in node.values():
            _collect(v, out, depth + 1)
    elif isinstance(node, list):
        for v in node:
            _collect(v, out, depth + 1)


def _from_container(tokens: list[str], image: str | None, where: str,
                    env: dict[str, str] | None = None,
                    fill: Callable[[list[str]], list[str]] | None = None) -> ServeCommand:
    """The serve command of a compose service or a Kubernetes container, at the release its
    image's tag names (as ``docker run``'s), with the variables its environment sets (as
    ``docker run -e``); ``fill`` (``_interpolated``) fills its words' variables once it is
    known to run an engine, so another service's variables are never read."""
    return _with_image_release(_container_command(tokens, image, where, env, fill), image)


def _container_command(tokens: list[str], image: str | None, where: str,
                       env: dict[str, str] | None = None,
                       fill: Callable[[list[str]], list[str]] | None = None) -> ServeCommand:
    words = fill or (lambda ws: ws)
    if find_launcher(tokens) is not None:
        return parse_tokens(words(tokens), where=where, env=env)
    # sh -c "…": the launcher is inside one string
    for t in tokens:
        if _LAUNCH.search(t):
            return _from_script(words([t])[0], where)
    img = (image or "").lower()
    for e in ENGINES.values():  # an image named for its engine
        if e.name in img and (tokens or e.image_entrypoint_serves):
            return parse_tokens(words(tokens), engine=e.name, where=where, env=env)
    raise _NotServe

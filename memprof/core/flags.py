"""The one table of deployment settings: each ``Deployment`` field, the flags that set it in each
engine, and how a value given as text is read.

Everything that turns a name into a field reads this table: ``--compare KEY=VALUE``, gate
scenarios and budgets (snake_case keys), the engine check in ``deployment.validate`` (a field set
under an engine that has no such setting is refused, naming that engine's own flag), and the
serve-command parser that comes next.

Flag names are the engines' own: vLLM ``EngineArgs.add_cli_args`` (vllm/engine/arg_utils.py,
v0.11.0) and SGLang ``ServerArgs.add_cli_args`` (python/sglang/srt/server_args.py, SGL@d315eb7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memprof.base.errors import BadInput
from memprof.base.units import parse_size

Kind = Literal["int", "float", "bool", "str", "size"]
Engine = Literal["vllm", "sglang"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One deployment field and its flags. An empty flag tuple: the engine has no such setting."""

    field: str
    kind: Kind
    vllm: tuple[str, ...]
    sglang: tuple[str, ...]
    note: str = ""  # what the other engine does instead, for the refusal's hint

    def flags(self, engine: str) -> tuple[str, ...]:
        return self.vllm if engine == "vllm" else self.sglang


SETTINGS: tuple[Setting, ...] = (
    Setting(field="engine", kind="str", vllm=("--engine",), sglang=("--engine",)),
    Setting(field="engine_version", kind="str", vllm=("--engine-version",),
            sglang=("--engine-version",)),
    Setting(field="entrypoint", kind="str", vllm=("--entrypoint",), sglang=(),
            note="SGLang's defaults do not depend on the entry point"),
    Setting(field="tp", kind="int", vllm=("-tp", "--tensor-parallel-size"),
            sglang=("--tp", "--tp-size")),
    Setting(field="pp", kind="int", vllm=("-pp", "--pipeline-parallel-size"),
            sglang=("--pp-size",)),
    Setting(field="dp", kind="int", vllm=("-dp", "--data-parallel-size"),
            sglang=("--dp", "--dp-size")),
    Setting(field="enable_expert_parallel", kind="bool", vllm=("--enable-expert-parallel",),
            sglang=("--enable-expert-parallel",)),
    Setting(field="dtype", kind="str", vllm=("--dtype",), sglang=("--dtype",)),
    Setting(field="hf_overrides", kind="str", vllm=("--hf-overrides",),
            sglang=("--json-model-override-args",)),
    Setting(field="quantization", kind="str", vllm=("--quantization", "-q"),
            sglang=("--quantization",)),
    Setting(field="kv_cache_dtype", kind="str", vllm=("--kv-cache-dtype",),
            sglang=("--kv-cache-dtype",)),
    Setting(field="max_model_len", kind="int", vllm=("--max-model-len",),
            sglang=("--context-length",)),
    Setting(field="max_num_seqs", kind="int", vllm=("--max-num-seqs",),
            sglang=("--max-running-requests",)),
    Setting(field="max_num_batched_tokens", kind="int", vllm=("--max-num-batched-tokens",),
            sglang=(), note="SGLang's prefill chunk is --chunked-prefill-size"),
    Setting(field="gpu_memory_utilization", kind="float", vllm=("--gpu-memory-utilization",),
            sglang=(), note="SGLang's budget is --mem-fraction-static"),
    Setting(field="block_size", kind="int", vllm=("--block-size",), sglang=("--page-size",)),
    Setting(field="kv_cache_memory_bytes", kind="size",
            vllm=("--kv-cache-memory-bytes", "--kv-cache-memory"), sglang=(),
            note="SGLang sizes its KV pool from --mem-fraction-static"),
    Setting(field="enforce_eager", kind="bool", vllm=("--enforce-eager",),
            sglang=("--disable-cuda-graph",)),
    Setting(field="num_speculative_tokens", kind="int", vllm=("--num-speculative-tokens",),
            sglang=(), note="SGLang's speculative decoding is not modelled"),
    Setting(field="attention_backend", kind="str", vllm=("--attention-backend",), sglang=(),
            note="memprof's --attention-backend names vLLM backends; SGLang's are not modelled"),
    Setting(field="scratch", kind="str", vllm=("--scratch",), sglang=("--scratch",)),
    Setting(field="mem_fraction_static", kind="float", vllm=(),
            sglang=("--mem-fraction-static",),
            note="vLLM's budget is --gpu-memory-utilization"),
    Setting(field="enable_dp_attention", kind="bool", vllm=(),
            sglang=("--enable-dp-attention",),
            note="vLLM's data parallelism is -dp/--data-parallel-size"),
    Setting(field="chunked_prefill_size", kind="int", vllm=(),
            sglang=("--chunked-prefill-size",),
            note="vLLM's prefill chunk is --max-num-batched-tokens"),
    Setting(field="cuda_graph_max_bs", kind="int", vllm=(), sglang=("--cuda-graph-max-bs",),
            note="vLLM sizes its CUDA graphs from --max-num-seqs"),
)
BY_FIELD = {s.field: s for s in SETTINGS}


def _aliases() -> dict[str, str]:
    """Every way to name a field in a KEY=VALUE or a TOML key: the field, and each flag of
    either engine in snake_case without dashes (``tensor_parallel_size``, ``tp_size``, ...)."""
    out: dict[str, str] = {}
    for s in SETTINGS:
        out[s.field] = s.field
        for flag in (*s.vllm, *s.sglang):
            out.setdefault(flag.lstrip("-").replace("-", "_"), s.field)
    return out


ALIASES = _aliases()


def field_for(key: str) -> str | None:
    """The Deployment field a key names (``--tp-size``, ``tensor_parallel_size``, ``tp``)."""
    return ALIASES.get(key.strip().lstrip("-").replace("-", "_"))


def flag_name(field: str, engine: str = "vllm") -> str:
    """How a user of ``engine`` spells the field (its longest flag), or the field itself."""
    s = BY_FIELD.get(field)
    names = s.flags(engine) if s else ()
    return max(names, key=len) if names else field


def coerce(field: str, value: object, *, where: str) -> object:
    """A value given as text (``--compare``) or as a TOML/Python value, checked against the
    field's kind; :class:`BadInput` naming ``where`` and the key otherwise."""
    s = BY_FIELD[field]
    example = {"int": "8", "float": "0.9", "bool": "true", "str": "shared",
               "size": '"16GiB"'}[s.kind]
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("none", "default") and s.kind != "bool":
            return None
        try:
            if s.kind == "size":
                return parse_size(text, bare_bytes=True, vllm_letters=True)
            if s.kind == "bool":
                if text.lower() in ("1", "true", "yes", "on"):
                    return True
                if text.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(text)
            if s.kind == "int":
                if len(text) > 20:
                    raise ValueError(text)
                return int(text)
            if s.kind == "float":
                if len(text) > 32:
                    raise ValueError(text)
                return float(text)
            return text
        except ValueError:
            raise BadInput(f"{where}: bad value {value[:40]!r} for {field} ({s.kind})",
                           hint=f"e.g. {field}={example.strip(chr(34))}") from None
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, int | float) and not isinstance(value, bool),
          "bool": isinstance(value, bool),
          "str": isinstance(value, str),
          "size": isinstance(value, int) and not isinstance(value, bool)}[s.kind]
    if value is None:
        return None
    if not ok:
        raise BadInput(f"{where}: {field} must be {s.kind}, got {value!r} "
                       f"({type(value).__name__})", hint=f"e.g. {field} = {example}")
    if s.kind == "float":
        return float(value)  # type: ignore[arg-type]
    return value

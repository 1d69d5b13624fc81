"""Every flag of ``vllm serve`` and ``sglang.launch_server``, as data: what memprof does with
each when it reads a pasted command.

Three kinds of flag:

- **applied**: the flag sets a ``Deployment`` field (``memprof.core.flags.SETTINGS`` names the
  field for each engine flag); the value is read as the engine reads it;
- **not modelled**: the flag changes GPU memory, but memprof has no term for it
  (``--cpu-offload-gb``, ``--kv-transfer-config``, ``--max-prefill-tokens``): it is listed with a
  warning, never silently dropped;
- **ignored**: the flag does not change GPU memory (host, port, API key, logging, parsers).

A flag in none of the lists is an error that names the engine version the tables describe
(``ENGINE_VERSION_ASSUMED``), so a flag added by a newer release is not guessed at.

Sources: vLLM ``EngineArgs.add_cli_args`` (vllm/engine/arg_utils.py) and the OpenAI server's
``make_arg_parser`` (vllm/entrypoints/openai/cli_args.py), v0.11.0-v0.33.0; SGLang
``ServerArgs.add_cli_args`` (python/sglang/srt/server_args.py) in the releases
``configs/sglang_cli_flags.json`` lists as read, 0.4.3 - 0.5.23: every field of every release
in ``configs/sglang_server_args.json`` is read, ignored or not modelled there, and a flag is
refused at a release whose ServerArgs has none of the fields it spells (``sglang_flag_at``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from memprof.core.flags import SETTINGS

# The engine releases these tables describe. One constant per engine, so that ``--engine-version``
# can replace it where the versions branch is merged.
ENGINE_VERSION_ASSUMED = {"vllm": "0.33.0", "sglang": "0.4.3 - 0.5.23"}

# one value / a switch (also --no-X) / nargs="+" / nargs="?" (a value where one follows)
Arity = Literal["value", "flag", "many", "optional"]


@dataclass(frozen=True, slots=True)
class ServeFlag:
    """A flag of an engine's launcher that memprof does not apply as a Deployment setting."""

    names: tuple[str, ...]
    arity: Arity
    kind: Literal["ignored", "not_modelled", "special"]
    note: str = ""


def _ignored(arity: Arity, *names: str) -> list[ServeFlag]:
    return [ServeFlag((n,), arity, "ignored") for n in names]


# vLLM: flags with no effect on GPU memory (server, logging, tokenizer, scheduling policy, ...)
_VLLM_IGNORED = [
    *_ignored("value", "--host", "--port", "--uds", "--uvicorn-log-level", "--api-key",
              "--served-model-name", "--tokenizer", "--tokenizer-mode", "--tokenizer-revision",
              "--revision", "--code-revision", "--download-dir", "--load-format", "--config-format",
              "--chat-template", "--chat-template-content-format", "--response-role",
              "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--ssl-cert-reqs",
              "--root-path", "--tool-call-parser", "--tool-parser-plugin", "--reasoning-parser",
              "--seed", "--hf-config-path", "--hf-token", "--generation-config",
              "--override-generation-config", "--max-log-len", "--disable-log-stats-interval",
              "--scheduling-policy", "--distributed-executor-backend", "--worker-cls",
              "--worker-extension-cls", "--guided-decoding-backend", "--structured-outputs-config",
              "--logits-processor-pattern", "--model-impl", "--enable-log-outputs-level",
              "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-backend",
              "--data-parallel-start-rank", "--data-parallel-size-local", "--api-server-count",
              "--nnodes", "--node-rank", "--master-addr", "--master-port",
              "--prefix-caching-hash-algo", "--max-parallel-loading-workers",
              "--otlp-traces-endpoint", "--collect-detailed-traces", "--kv-events-config",
              "--ignore-patterns",
              "--allowed-local-media-path", "--allowed-media-domains", "--max-logprobs",
              "--logprobs-mode", "--tokenizer-pool-size", "--long-prefill-token-threshold",
              "--max-num-partial-prefills", "--max-long-partial-prefills",
              "--enable-prompt-tokens-details-level", "--log-config-file", "--chat-template-kwargs",
              "--default-chat-template-kwargs", "--tool-server", "--h11-max-incomplete-event-size",
              "--h11-max-header-count", "--scheduler-cls", "--async-scheduling-mode",
              "--mm-processor-cache-type", "--media-io-kwargs",
              "--expert-placement-strategy", "--eplb-config", "--dcp-kv-cache-interleave-size",
              "--reasoning-config", "--io-processor-plugin", "--numa-bind",
              "--max-cpu-loras", "--default-mm-loras"),
    *_ignored("many", "--allowed-origins", "--allowed-methods", "--allowed-headers",
              "--middleware", "--lora-modules", "--prompt-adapters"),
    *_ignored("flag", "--trust-remote-code", "--disable-log-stats", "--disable-log-requests",
              "--enable-log-requests", "--disable-frontend-multiprocessing",
              "--enable-auto-tool-choice", "--enable-chunked-prefill",
              "--skip-tokenizer-init", "--enable-request-id-headers",
              "--disable-fastapi-docs", "--enable-server-load-tracking",
              "--return-tokens-as-token-ids",
              "--enable-prompt-tokens-details", "--enable-force-include-usage",
              "--disable-uvicorn-access-log", "--headless", "--data-parallel-hybrid-lb",
              "--data-parallel-external-lb", "--async-scheduling", "--enable-sleep-mode",
              "--disable-sliding-window", "--disable-cascade-attn", "--enable-eplb",
              "--enable-dbo", "--enable-tokenizer-info-endpoint", "--enable-log-outputs",
              "--use-tqdm-on-load", "--disable-chunked-mm-input", "--enable-mfu-metrics",
              "--ray-workers-use-nsight", "--enable-layerwise-nvtx-tracing",
              "--include-stop-str-in-output", "--disable-hybrid-kv-cache-manager",
              "--exclude-tools-when-tool-choice-none",
              "--enable-multimodal-encoder-data-parallel", "--safetensors-load-strategy"),
]

_VLLM_NOT_MODELLED = [
    ServeFlag(("--cpu-offload-gb",), "value", "not_modelled",
              "weights offloaded to the CPU are still counted on the GPU"),
    ServeFlag(("--swap-space",), "value", "not_modelled", "CPU swap space (host memory)"),
    ServeFlag(("--pooler-config", "--override-pooler-config"), "value", "not_modelled",
              "the pooling type (MEAN / CLS pooling turns chunked prefill and prefix caching "
              "off for a pooling model; memprof assumes LAST)"),
    ServeFlag(("--kv-offloading-size",), "value", "not_modelled", "KV offload to the CPU"),
    ServeFlag(("--kv-offloading-backend",), "value", "not_modelled", "KV offload to the CPU"),
    ServeFlag(("--kv-transfer-config",), "value", "not_modelled",
              "the KV connector's buffers (LMCache, NIXL)"),
    ServeFlag(("--compilation-config", "-O"), "value", "not_modelled",
              "custom CUDA-graph sizes and modes, and the compilation mode (a mode that "
              "compiles nothing, -O0, has no cold compile's autotuning arguments: "
              "memprof/core/terms/cold_compile.py); memprof uses vLLM's defaults"),
    ServeFlag(("--cuda-graph-sizes",), "many", "not_modelled",
              "custom CUDA-graph sizes (memprof uses vLLM's defaults)"),
    ServeFlag(("--max-seq-len-to-capture",), "value", "not_modelled", "CUDA-graph capture"),
    # 0.17.0 – 0.33.0 engine/arg_utils.py: 'if self.performance_mode == "throughput"' doubles
    # the max_num_batched_tokens and max_num_seqs defaults left out
    ServeFlag(("--performance-mode",), "value", "not_modelled",
              "'throughput' doubles the max_num_batched_tokens and max_num_seqs defaults "
              "(pass both explicitly)"),
    ServeFlag(("--num-gpu-blocks-override",), "value", "not_modelled",
              "a fixed KV block count"),
    ServeFlag(("--decode-context-parallel-size", "-dcp"), "value", "not_modelled",
              "decode context parallelism"),
    ServeFlag(("--rope-scaling",), "value", "not_modelled", "RoPE scaling"),
    ServeFlag(("--max-num-seqs-per-dp-rank",), "value", "not_modelled", ""),
    ServeFlag(("--calculate-kv-scales",), "flag", "not_modelled", ""),
    ServeFlag(("--mamba-ssm-cache-dtype", "--mamba-cache-dtype"), "value", "not_modelled",
              "Mamba state caches"),
    ServeFlag(("--enable-expert-parallel-load-balancer",), "flag", "not_modelled", ""),
    ServeFlag(("--num-redundant-experts",), "value", "not_modelled", "redundant experts (EPLB)"),
    # 0.20.0 – 0.33.0 engine/arg_utils.py: ParallelConfig.use_batched_dp_moe (deepep_low_latency
    # or nixl_ep, with expert parallelism and DP > 1) defaults max_num_batched_tokens to 256
    ServeFlag(("--all2all-backend",), "value", "not_modelled",
              "all-to-all buffers (DeepEP); deepep_low_latency / nixl_ep with EP and DP > 1 "
              "also default max_num_batched_tokens to 256"),
]

_VLLM_NOT_MODELLED += [
    # engine/arg_utils.py's LoRA group (LoRAConfig.target_modules, enable_tower_connector_lora)
    ServeFlag(("--lora-target-modules",), "many", "not_modelled",
              "LoRA on these modules only: memprof sizes every module the model class supports"),
    ServeFlag(("--enable-tower-connector-lora",), "flag", "not_modelled",
              "LoRA on a multimodal model's vision tower and connector"),
]

_VLLM_SPECIAL = [
    ServeFlag(("--model",), "value", "special"),
    ServeFlag(("--speculative-config",), "value", "special",
              "JSON; num_speculative_tokens of an MTP, n-gram or EAGLE method (and an EAGLE "
              "head, its model) is applied"),
    ServeFlag(("--enable-expert-parallel", "-ep"), "flag", "special"),
    # vllm/config/multimodal.py MultiModalConfig.language_model_only (first in 0.17.0; read in
    # 0.27.1 and 0.28.0): every modality's limit 0, read as --limit-mm-per-prompt; refused at an
    # --engine-version before 0.17.0 (core/models/multimodal.py check_language_model_only)
    ServeFlag(("--language-model-only",), "flag", "special",
              "every modality's --limit-mm-per-prompt at 0: no vision tower"),
]

# SGLang: every ServerArgs flag of the releases read (configs/sglang_cli_flags.json, from
# ServerArgs.add_cli_args in each release's wheel) that memprof does not apply, ignored or not
# modelled as the table says
def _sglang_table() -> dict[str, Any]:
    from memprof.core.models import configs_dir

    data: dict[str, Any] = json.loads(
        (configs_dir() / "sglang_cli_flags.json").read_text(encoding="utf-8"))
    return data


SGLANG_CLI = _sglang_table()


def _sglang_other() -> list[ServeFlag]:
    out = []
    for entry in SGLANG_CLI["fields"].values():
        if entry["kind"] in ("ignored", "not_modelled") and entry["flags"]:
            out.append(ServeFlag(tuple(entry["flags"]), entry["arity"], entry["kind"],
                                 entry.get("note", "")))
    return out


_SGLANG_SPECIAL = [
    ServeFlag(("--model-path", "--model"), "value", "special"),
    ServeFlag(("--ep-size", "--ep", "--expert-parallel-size"), "value", "special",
              "expert parallel over the server's TP ranks when > 1"),
    ServeFlag(("--enable-ep-moe",), "flag", "special"),
    # is_embedding (0.4.3): SGLang's embedding server, refused as estimate's --runner pooling
    # is under --engine sglang
    ServeFlag(("--is-embedding",), "flag", "special"),
]

OTHER_FLAGS: dict[str, list[ServeFlag]] = {
    "vllm": [*_VLLM_IGNORED, *_VLLM_NOT_MODELLED, *_VLLM_SPECIAL],
    "sglang": [*_SGLANG_SPECIAL, *_sglang_other()],
}

# memprof-only settings that have no flag in the engine's launcher (memprof's own modelling
# choices): a pasted command never carries them. The rows say which (``Setting.memprof_only``).
MEMPROF_ONLY = frozenset(s.field for s in SETTINGS if s.memprof_only)

# vLLM's integer flags read as ``human_readable_int`` (32k = 32,000; 32K = 32,768).
HUMAN_READABLE = frozenset({"max_model_len", "max_num_batched_tokens"})


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split(".")[:3] if x.isdigit())


def sglang_flag_fields(flag: str) -> list[tuple[str, list[list[str]]]]:
    """The ServerArgs fields ``flag`` spells, each with the runs of consecutive releases read
    whose ``add_cli_args`` registers that spelling (first and last of each run)."""
    return [(name, entry["flags"][flag])
            for name, entry in SGLANG_CLI["fields"].items() if flag in entry["flags"]]


def sglang_flag_at(flag: str, release: str) -> bool | None:
    """Whether SGLang ``release`` (a post release: its numbered one) has ``flag``. A release
    read: its wheel registers the spelling. Another: a run of releases read that register it
    spans it, or it lies between such a run and the releases read on either side of it, and
    its ServerArgs (``configs/sglang_server_args.json``) has the field the flag sets. None
    where it cannot be told: a flag no release spells (memprof's own), or a release the table
    does not list (a source snapshot)."""
    from memprof.probes.sglang_log import release_fields

    spelled = sglang_flag_fields(flag)
    at = _version_key(release)
    fields = {_version_key(r): have for r, have in release_fields().items()}.get(at)
    if not spelled or fields is None:
        return None
    if sglang_flag_refused(flag, release):
        return False
    read = [_version_key(r) for r in SGLANG_CLI["read"]]
    for name, runs in spelled:
        for first_release, last_release in runs:
            first, last = _version_key(first_release), _version_key(last_release)
            if first <= at <= last:
                return True
            if at in read:
                continue
            lower = max((r for r in read if r < first), default=())
            upper = min((r for r in read if r > last), default=(1 << 30,))
            if lower < at < upper and name in fields:
                return True
    return False


def sglang_flag_refused(flag: str, release: str) -> bool:
    """Whether SGLang ``release`` registers ``flag`` only to stop at it: a run of releases read
    whose ``DeprecatedAction`` refuses it spans the release (0.5.3, 0.5.4 server_args.py:
    ``raise ValueError(self.help)`` for --enable-ep-moe and the other MoE switches; 0.5.19
    arg_groups/argparse_actions.py: ``parser.error`` where an ``error_message`` is given)."""
    at = _version_key(release)
    return any(_version_key(first) <= at <= _version_key(last)
               for entry in SGLANG_CLI["fields"].values()
               for first, last in entry.get("refused", {}).get(flag, ()))


def sglang_refused_message(flag: str) -> str | None:
    """What SGLang prints where its ``DeprecatedAction`` stops at ``flag`` (the table's
    ``refused_message``, quoted from the release read: the flag that replaces it), or None."""
    for entry in SGLANG_CLI["fields"].values():
        message = entry.get("refused_message")
        if message and flag in entry.get("refused", {}):
            return str(message)
    return None


def sglang_no_flag(flag: str, release: str | None = None) -> bool:
    """Whether SGLang's argparse takes ``--no-`` + ``flag`` (``flag`` spelled with its
    ``--``): only a switch registered with ``argparse.BooleanOptionalAction`` has that form
    (the table's ``no_flag`` runs of releases read; a ``store_true`` switch has none, and
    argparse refuses it). With ``release``: at that release, a release read inside a run or
    one not read lying between a run and the releases read on either side; without: at any."""
    runs = [run for _, entry in ((n, SGLANG_CLI["fields"][n]) for n, _ in
                                 sglang_flag_fields(flag)) for run in entry.get("no_flag", ())]
    if release is None or not runs:
        return bool(runs)
    at = _version_key(release)
    read = [_version_key(r) for r in SGLANG_CLI["read"]]
    for first_release, last_release in runs:
        first, last = _version_key(first_release), _version_key(last_release)
        if first <= at <= last:
            return True
        lower = max((r for r in read if r < first), default=())
        upper = min((r for r in read if r > last), default=(1 << 30,))
        if at not in read and lower < at < upper:
            return True
    return False

"""The one table of deployment settings: each ``Deployment`` field, the flags that set it in each
engine, and how a value given as text is read.

Everything that turns a name into a field reads this table: ``--compare KEY=VALUE``, gate
scenarios and budgets (snake_case keys), the engine check in ``deployment.validate`` (a field set
under an engine that has no such setting is refused, naming that engine's own flag), and the
serve-command parser that comes next.

The flag names are the engines' own, declared by each engine module (``Engine.flags`` in
``memprof/core/engines/``, each citing the argument parser it was read from); a new engine's
flags need no column here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memprof.base.errors import BadInput
from memprof.base.units import human_readable_int, parse_size
from memprof.core.auto_fit import AUTO_FIT
from memprof.core.engines import DEFAULT, ENGINES

Kind = Literal["int", "float", "bool", "str", "size", "tokens"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One deployment field; its flags are each engine's (``Engine.flags`` of the modules in
    ``memprof/core/engines/``): a field an engine does not list is no setting of that engine."""

    field: str
    kind: Kind
    note: str = ""  # what the other engine does instead, for the refusal's hint
    help: str = ""  # the flag's help in ``memprof estimate --help``
    choices_from: str = ""  # "module:NAME" of the closed set of values (read when help is shown)
    shown_default: str = ""  # the default as help shows it, where the field's default is None
    metavar: str = ""  # the value's name in help (default: the kind in capitals)
    memprof_only: bool = False  # a modelling choice of memprof's: no engine launcher has it
    example: str = ""  # a valid value for a refusal's hint, where the kind's own example is not one

    def flags(self, engine: str) -> tuple[str, ...]:
        """``engine``'s flags for the field (() where it has no such setting)."""
        found = ENGINES.get(engine)
        return found.flags.get(self.field, ()) if found is not None else ()

    def cli_flags(self) -> tuple[str, ...]:
        """Every name memprof's CLI accepts for the field: each engine's, in ``ENGINES`` order."""
        return tuple(dict.fromkeys(f for e in ENGINES.values() for f in self.flags(e.name)))

    def choices(self) -> tuple[str, ...]:
        """The closed set of values, read from the constant ``choices_from`` names (imported
        here, when help is built), or () for an open set."""
        if not self.choices_from:
            return ()
        import importlib

        module, _, name = self.choices_from.partition(":")
        return tuple(getattr(importlib.import_module(module), name))


# the pooling flags' note on SGLang (--runner, --convert, --task)
NO_SGLANG_POOLING = "SGLang's embedding server (--is-embedding) is not modelled"

SETTINGS: tuple[Setting, ...] = (
    Setting(field="engine", kind="str",
            help="The serving engine.", choices_from="memprof.core.deployment:ENGINES",
            memprof_only=True),
    Setting(field="engine_version", kind="str",
            help="The engine release to model (vLLM 0.6.0 to 0.33.0; memprof versions lists them).",
            shown_default="the newest modelled",
            metavar="VERSION"),
    Setting(field="entrypoint", kind="str",
            note="SGLang's defaults do not depend on the entry point",
            help="vLLM only: serve (vllm serve) or llm (the Python LLM class); vLLM's batch "
            "defaults differ by entry point.",
            choices_from="memprof.core.deployment:ENTRYPOINTS"),
    Setting(field="tp", kind="int",
            help="TP size (SGLang: --tp/--tp-size, the GPUs of one server)."),
    Setting(field="pp", kind="int",
            help="PP size (SGLang: --pp-size)."),
    Setting(field="dp", kind="int",
            help="DP size (SGLang: --dp/--dp-size)."),
    Setting(field="enable_expert_parallel", kind="bool",
            help="Experts split over TP x DP ranks (expert parallelism)."),
    Setting(field="dtype", kind="str",
            help="The weights' dtype.", choices_from="memprof.core.deployment:DTYPES"),
    Setting(field="hf_overrides", kind="str",
            help="JSON merged into the model's config.json before it is sized, as vLLM's "
            "--hf-overrides (SGLang: --json-model-override-args), e.g. "
            "'{\"num_hidden_layers\": 4}'.",
            metavar="JSON"),
    Setting(field="assume_architecture", kind="str",
            help="Read a config whose architecture memprof does not know as this generic "
            "family (the estimate states the assumption); unknown ones are refused otherwise.",
            choices_from="memprof.core.models.families:ASSUMABLE_NAMES", memprof_only=True),
    Setting(field="limit_mm_per_prompt", kind="str",
            note="SGLang's multimodal encoder is not modelled",
            help="vLLM only: a multimodal model's items per prompt, as vLLM reads it, e.g. "
            "'{\"image\": 2, \"video\": 0}' (all 0: no vision tower, no encoder profile).",
            metavar="JSON"),
    Setting(field="mm_processor_kwargs", kind="str",
            note="SGLang's multimodal encoder is not modelled",
            help="vLLM only: the processor's image-size limits, e.g. "
            "'{\"max_pixels\": 1003520}' (max_pixels, min_pixels or size are modelled).",
            metavar="JSON"),
    Setting(field="mm_encoder_tp_mode", kind="str",
            note="SGLang's multimodal encoder is not modelled",
            help="vLLM only: the vision tower's weights split over TP (weights) or whole on "
            "every rank, the images split over the ranks instead (data).",
            choices_from="memprof.core.models.multimodal:ENCODER_TP_MODES"),
    Setting(field="runner", kind="str",
            note=NO_SGLANG_POOLING,
            help="vLLM 0.10.1 on: generate, or pooling for an embedding, classification or "
            "reranker model (no sampler in the profile run, no untied lm_head, PIECEWISE CUDA "
            "graphs only; modelled from 0.11.0 on). A *ForSequenceClassification checkpoint "
            "gets pooling without it, as vLLM's auto.",
            choices_from="memprof.core.engines.vllm_pooling:RUNNERS"),
    Setting(field="convert", kind="str",
            note=NO_SGLANG_POOLING,
            help="vLLM 0.10.1 on, with --runner pooling: the head put on a *ForCausalLM "
            "(embed and classify are modelled, classify with a score head from the config or "
            "from classifier_from_token + method in --hf-overrides; reward is refused).",
            shown_default="auto: embed under --runner pooling",
            choices_from="memprof.core.engines.vllm_pooling:CONVERTS"),
    Setting(field="task", kind="str",
            note=NO_SGLANG_POOLING,
            help="vLLM before 0.13.0 only: the older spelling (embed / embedding / score: "
            "--runner pooling --convert embed, score and classify of a "
            "*ForSequenceClassification: --convert classify; generate).",
            choices_from="memprof.core.engines.vllm_pooling:TASKS"),
    Setting(field="quantization", kind="str",
            help="fp8, mxfp4, modelopt_fp4 (nvfp4), awq, gptq.",
            shown_default="the config's quantization_config"),
    Setting(field="kv_cache_dtype", kind="str",
            help="The KV cache's dtype.", choices_from="memprof.core.deployment:KV_CACHE_DTYPES"),
    Setting(field="max_model_len", kind="tokens",
            help="32768, 32k (32,000) or 32K (32,768), as vLLM reads it; auto (or -1, vLLM "
            "0.14.0 on): the longest that fits the KV cache, fitted after profiling at the "
            "derived length. SGLang: --context-length.",
            shown_default="the model's max_position_embeddings"),
    Setting(field="max_num_seqs", kind="int",
            help="SGLang: --max-running-requests.", shown_default="the engine's for the GPU"),
    Setting(field="max_num_batched_tokens", kind="tokens",
            note="SGLang's prefill chunk is --chunked-prefill-size",
            help="vLLM only; 8192 or 8K as vLLM reads it.",
            shown_default="the engine's for the GPU"),
    Setting(field="gpu_memory_utilization", kind="float",
            note="SGLang's budget is --mem-fraction-static",
            help="vLLM only.", shown_default="0.92 (0.9 before 0.20.0)"),
    Setting(field="block_size", kind="int",
            help="SGLang: --page-size.",
            shown_default="what the engine picks for the attention backend"),
    Setting(field="kv_cache_memory_bytes", kind="size",
            note="SGLang sizes its KV pool from --mem-fraction-static",
            help="vLLM only: the KV cache size, as vLLM reads it (bytes, 16G binary, 16g decimal, "
            "or 16GiB); overrides --gpu-memory-utilization."),
    Setting(field="gpu_memory_in_use", kind="size",
            help="Memory other processes hold on each GPU before the engine starts (a desktop's "
            "display, another server), e.g. 800MiB: the engine finds that much less free. "
            "memprof explain reads it from the log's free memory before load.",
            shown_default="0", metavar="SIZE", memprof_only=True),
    Setting(field="enforce_eager", kind="bool",
            help="No CUDA graphs (SGLang: --disable-cuda-graph)."),
    Setting(field="disable_custom_all_reduce", kind="bool",
            help="Use NCCL for the TP all-reduce instead of the engine's custom all-reduce."),
    Setting(field="no_gpu_peer_access", kind="bool",
            help="The host's GPUs have no peer-to-peer access (vLLM logs 'Custom allreduce is "
            "disabled because your platform lacks GPU P2P capability'): NCCL over host shared "
            "memory and no custom all-reduce, as on a card the catalog marks so.",
            memprof_only=True),
    Setting(field="nnodes", kind="int",
            help="Hosts (or pods: a node is one shared-memory system) the ranks run on, the "
            "same number on each, in rank order (vLLM --nnodes, 0.11.1 on; with Ray, the nodes "
            "the workers land on). A group spanning nodes gets NCCL over NET and no custom "
            "all-reduce (vLLM logs 'Custom allreduce is disabled because this process group "
            "spans across nodes').", shown_default="1"),
    Setting(field="disable_hybrid_kv_cache_manager", kind="bool",
            note="SGLang sizes sliding-window and Mamba pools itself",
            help="vLLM only: one KV cache group; sliding-window and chunked-local layers "
            "cached as full attention."),
    Setting(field="enable_prefix_caching", kind="bool",
            note="SGLang's radix cache does not change its pools",
            help="vLLM only: prefix caching on (--no-enable-prefix-caching: off); for a hybrid "
            "model it sets the state pages a request holds (mamba_cache_mode).",
            shown_default="the release's (off for hybrid models before 0.26.0)"),
    Setting(field="mamba_cache_mode", kind="str",
            note="SGLang sizes its Mamba pool itself",
            help="vLLM 0.15.0 on, with prefix caching: 'align' (2 state pages a request, 3 "
            "with a prefill checkpoint), 'all' (to 0.31.x, Mamba-2 models: a state page per "
            "block of context), 'none'.",
            choices_from="memprof.core.hybrid_state:MAMBA_CACHE_MODES",
            shown_default="what vLLM derives from prefix caching", metavar="MODE"),
    Setting(field="num_speculative_tokens", kind="int",
            note="SGLang's speculative decoding is not modelled",
            help="vLLM only: draft tokens a step (speculative decoding; with "
            "--speculative-method mtp it adds the MTP layer the checkpoint declares: "
            "DeepSeek-style or Qwen3.5/3.6).",
            memprof_only=True),
    Setting(field="speculative_method", kind="str",
            note="SGLang's speculative decoding is not modelled",
            help="vLLM only, with --num-speculative-tokens: --speculative-config's method: "
            "'mtp' (the checkpoint's MTP layer drafts), 'ngram' (prompt lookup: no draft "
            "weights or KV; on the CPU in the V1 runner before vLLM 0.32.0, from 0.32.0 on "
            "the GPU in Model Runner V2), 'ngram_gpu' (from vLLM 0.32.0 the same drafter as "
            "'ngram'; refused before: the V1 runner's compiled GPU drafter is not sized), "
            "'eagle' / 'eagle3' (a draft head, --speculative-model).",
            choices_from="memprof.core.speculative:SPECULATIVE_METHODS", shown_default="mtp",
            metavar="METHOD", memprof_only=True),
    Setting(field="speculative_model", kind="str",
            note="SGLang's speculative decoding is not modelled",
            help="vLLM only, with --speculative-method eagle / eagle3: the draft head "
            "(--speculative-config's model): its config.json, a folder holding it or a bundled "
            "name; its weights, its layer's KV and the proposer's buffers join the rank.",
            metavar="HEAD", memprof_only=True),
    Setting(field="vllm_use_v1", kind="int",
            note="SGLang has one engine",
            help="vLLM 0.8.0 to 0.10.2 only: VLLM_USE_V1 (0: the V0 engine; 1: V1, refused "
            "where vLLM refuses it).", shown_default="unset: V1, or V0 where the release "
            "falls back"),
    Setting(field="vllm_use_flashinfer_sampler", kind="int",
            note="SGLang's sampler is not modelled",
            help="vLLM 0.8.0 to 0.11.0: VLLM_USE_FLASHINFER_SAMPLER (1: FlashInfer is "
            "installed and samples the profile run's warm-up, as in vLLM's Docker image; 0: "
            "the torch top-k/top-p sort); from 0.33.0, 0 sends Model Runner V2's warm-up pass "
            "to the Triton top-k/top-p kernel instead of FlashInfer's sampler.",
            shown_default="unset: the PyPI wheel, no FlashInfer before 0.33.0; FlashInfer's "
            "sampler where the card takes it from 0.33.0",
            metavar="N"),
    Setting(field="vllm_rocm_use_aiter", kind="int",
            note="SGLang's aiter switch (SGLANG_USE_AITER) is not this flag",
            help="vLLM on ROCm only: VLLM_ROCM_USE_AITER (1: AITER kernels, the fused MoE "
            "among them; 0: off).", shown_default="unset: vLLM's default, off", metavar="N"),
    Setting(field="nccl_nvls_enable", kind="int",
            note="SGLang's launcher sets NCCL_NVLS_ENABLE from its own --enable-nccl-nvls",
            help="vLLM only: NCCL_NVLS_ENABLE (0: no NVLink SHARP buffers on a multicast "
            "NVSwitch host; 1 or 2: NCCL's default test).", shown_default="unset: NCCL's "
            "default, NVLS where the GPUs support it", metavar="N"),
    Setting(field="vllm_allreduce_use_symm_mem", kind="int",
            note="SGLang's symmetric memory (--enable-symm-mem) is not this switch",
            help="vLLM only: VLLM_ALLREDUCE_USE_SYMM_MEM (1: the TP group's torch "
            "symmetric-memory all-reduce buffer on 9.0 / 10.x cards, 0.10.2 on; 0: none; any "
            "other integer is on, as vLLM reads it with bool(int(...))).",
            shown_default="unset: vLLM's default, 1 from 0.11.0 (0 before)", metavar="N",
            example="1"),
    Setting(field="nvidia_driver", kind="str",
            help="The NVIDIA driver the GPUs run, as nvidia-smi prints it (e.g. 580.82.07): "
            "R580 or later takes the node costs measured under R580, an older one NVIDIA's "
            "published ~10 KiB a CUDA-graph kernel node; before R550 the output warns that "
            "graph memory is likely higher than memprof's figure.",
            shown_default="unset: the driver of the release's wheel (CUDA 12.x or 13) is "
            "assumed, and the output says so", metavar="VERSION", memprof_only=True),
    Setting(field="pytorch_cuda_alloc_conf", kind="str",
            note="SGLang's model load is not replayed",
            help="vLLM only: PYTORCH_CUDA_ALLOC_CONF as the launch sets it; memprof reads "
            "expandable_segments for the model load's allocator rounding (e.g. "
            "expandable_segments:True).", shown_default="unset: PyTorch's defaults",
            metavar="CONF"),
    Setting(field="enable_lora", kind="bool",
            note="SGLang's LoRA (--lora-paths) is not modelled",
            help="vLLM only: LoRA adapters on; adds their stacked buffers to the model load "
            "(memprof models the families whose vLLM LoRA layers it has read)."),
    Setting(field="max_loras", kind="int",
            note="SGLang's LoRA (--max-loras-per-batch) is not modelled",
            help="vLLM only, with --enable-lora: adapters in one batch (the stacked slots).",
            shown_default="1"),
    Setting(field="max_lora_rank", kind="int",
            note="SGLang's LoRA is not modelled",
            help="vLLM only, with --enable-lora: the largest adapter rank.", shown_default="16"),
    Setting(field="lora_extra_vocab_size", kind="int",
            note="SGLang's LoRA is not modelled",
            help="vLLM before 0.12.0 only, with --enable-lora: extra vocabulary rows per "
            "adapter (256 or 512).", shown_default="256"),
    Setting(field="lora_dtype", kind="str",
            note="SGLang's LoRA is not modelled",
            help="vLLM only, with --enable-lora: the adapters' dtype (auto: the model's).",
            choices_from="memprof.core.lora:LORA_DTYPES"),
    Setting(field="fully_sharded_loras", kind="bool",
            note="SGLang's LoRA is not modelled",
            help="vLLM only, with --enable-lora: the LoRA A rank and row-parallel B split "
            "over TP too."),
    Setting(field="enable_lora_bias", kind="bool",
            note="SGLang's LoRA is not modelled",
            help="vLLM before 0.12.0 only, with --enable-lora: a bias slot beside each LoRA "
            "B."),
    Setting(field="specialize_active_lora", kind="bool",
            note="SGLang's LoRA is not modelled",
            help="vLLM 0.16.0 on, with --enable-lora: CUDA graphs captured per active-LoRA "
            "count (powers of 2 up to --max-loras, and --max-loras + 1)."),
    Setting(field="compile_cache", kind="str",
            note="SGLang compiles the model only with --enable-torch-compile, which memprof "
            "does not model",
            help="vLLM only: the torch.compile cache at start-up. cold: a first start, which "
            "compiles inside the profile run; warm: a restart on the cache a first start of the "
            "same deployment saved (the log's 'torch.compile took' is a second or two). Where "
            "Model Runner V2 runs (0.21.0-0.28.x) a warm start's budget holds V2's own profile "
            "terms.",
            choices_from="memprof.core.deployment:COMPILE_CACHE_STATES", shown_default="cold",
            memprof_only=True),
    Setting(field="attention_backend", kind="str",
            help="vLLM: one of the backends listed. SGLang: its own --attention-backend names "
            "(flashinfer, fa3, triton, trtllm_mha, ...), which decide its decode CUDA graphs' "
            "capture state.",
            choices_from="memprof.core.scratch.backends:BACKENDS",
            shown_default="what the engine picks for the model, GPU and KV dtype",
            metavar="BACKEND"),
    Setting(field="scratch", kind="str",
            help="Per-layer or shared decode scratch.",
            choices_from="memprof.core.deployment:SCRATCH_POLICIES",
            shown_default="what current engine releases do", memprof_only=True),
    Setting(field="mem_fraction_static", kind="float",
            note="vLLM's budget is --gpu-memory-utilization",
            help="SGLang only.", shown_default="SGLang's heuristic"),
    Setting(field="enable_dp_attention", kind="bool",
            note="vLLM's data parallelism is -dp/--data-parallel-size",
            help="SGLang only: DP attention (attention TP = tp / dp)."),
    Setting(field="chunked_prefill_size", kind="int",
            note="vLLM's prefill chunk is --max-num-batched-tokens",
            help="SGLang only; -1 turns chunked prefill off."),
    Setting(field="cuda_graph_max_bs", kind="int",
            note="vLLM sizes its CUDA graphs from --max-num-seqs",
            help="SGLang only."),
    Setting(field="max_total_tokens", kind="int",
            note="vLLM sizes its KV cache from --gpu-memory-utilization or "
            "--kv-cache-memory-bytes",
            help="SGLang only: a cap on the KV pool's tokens (the pool is the smaller of this "
            "and what mem_fraction_static leaves).", shown_default="no cap"),
)
BY_FIELD = {s.field: s for s in SETTINGS}


def _aliases() -> dict[str, str]:
    """Every way to name a field in a KEY=VALUE or a TOML key: the field, and each flag of
    either engine in snake_case without dashes (``tensor_parallel_size``, ``tp_size``, ...)."""
    out: dict[str, str] = {}
    for s in SETTINGS:
        out[s.field] = s.field
        for flag in s.cli_flags():
            out.setdefault(flag.lstrip("-").replace("-", "_"), s.field)
    return out


ALIASES = _aliases()


def field_for(key: str) -> str | None:
    """The Deployment field a key names (``--tp-size``, ``tensor_parallel_size``, ``tp``)."""
    return ALIASES.get(key.strip().lstrip("-").replace("-", "_"))


def flag_name(field: str, engine: str = DEFAULT) -> str:
    """How a user of ``engine`` spells the field (its longest flag), or the field itself."""
    s = BY_FIELD.get(field)
    names = s.flags(engine) if s else ()
    return max(names, key=len) if names else field


def coerce(field: str, value: object, *, where: str) -> object:
    """A value given as text (``--compare``) or as a TOML/Python value, checked against the
    field's kind; :class:`BadInput` naming ``where`` and the key otherwise."""
    s = BY_FIELD[field]
    example = s.example or {"int": "8", "float": "0.9", "bool": "true", "str": "shared",
                            "size": '"16GiB"', "tokens": "32768"}[s.kind]
    if isinstance(value, str):
        text = value.strip()
        # unset, but where "none" is one of the choices (--convert, --mamba-cache-mode): that
        if (text.lower() in ("none", "default") and s.kind != "bool"
                and text not in s.choices()):
            return None
        try:
            if s.kind == "size":
                return parse_size(text, bare_bytes=True, vllm_letters=True, zero_ok=True)
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
            if s.kind == "tokens":  # 32k = 32,000, 32K = 32,768, as vLLM reads --max-model-len
                if len(text) > 20:
                    raise ValueError(text)
                if text.lower() == "auto":  # vLLM's auto-fit: -1 (memprof/core/auto_fit.py)
                    return AUTO_FIT
                return human_readable_int(text)
            if s.kind == "float":
                if len(text) > 32:
                    raise ValueError(text)
                return float(text)
            return text
        except ValueError:
            raise BadInput(f"{where}: bad value {value[:40]!r} for {field} ({s.kind})",
                           hint=f"e.g. {field}={example.strip(chr(34))}") from None
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "tokens": isinstance(value, int) and not isinstance(value, bool),
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

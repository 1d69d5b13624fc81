"""The interface every engine module implements (``Engine``), and what it reads.

An engine (vLLM, SGLang, ...) is one module in ``memprof/core/engines/`` holding one ``Engine``
subclass: its rank layout, its defaults, its budget line (how much of the GPU it hands the KV
cache), its CUDA-graph reserve, the flags it takes and refuses, and its notes. Everything outside
this package asks the engine object (``engines.engine_of(dep)``) instead of branching on the
engine's name.

The package sits below ``deployment.py`` (whose layout properties ask the engine), so it reads a
deployment and its components through the read-only protocols below, never by importing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from memprof.core.gpus import GPU


class AttentionFacts(NamedTuple):
    """What an engine reads of the model's attention (its first attention layer): the query
    heads, and the head counts per TP rank for which SGLang on ROCm runs aiter (the kind's
    ``hip_aiter_heads``: () any, None not read)."""

    num_heads: int
    hip_aiter_heads: tuple[int, ...] | None


class DeploymentView(Protocol):
    """The fields of ``memprof.core.deployment.Deployment`` an engine reads."""

    @property
    def engine(self) -> str: ...
    @property
    def engine_version(self) -> str | None: ...
    @property
    def entrypoint(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def enable_expert_parallel(self) -> bool: ...
    @property
    def enable_dp_attention(self) -> bool: ...
    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def quantization(self) -> str | None: ...
    @property
    def block_size(self) -> int | None: ...
    @property
    def kv_cache_memory_bytes(self) -> int | None: ...
    @property
    def gpu_memory_utilization(self) -> float | None: ...
    @property
    def mem_fraction_static(self) -> float | None: ...
    @property
    def chunked_prefill_size(self) -> int | None: ...
    @property
    def cuda_graph_max_bs(self) -> int | None: ...
    @property
    def max_num_batched_tokens(self) -> int | None: ...
    @property
    def max_num_seqs(self) -> int | None: ...
    @property
    def max_total_tokens(self) -> int | None: ...
    @property
    def max_model_len(self) -> int | None: ...
    @property
    def attention_backend(self) -> str | None: ...
    @property
    def compile_cache(self) -> str: ...
    @property
    def attn_tp(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def num_speculative_tokens(self) -> int: ...
    @property
    def speculative_method(self) -> str: ...
    @property
    def speculative_mtp(self) -> bool: ...
    @property
    def enforce_eager(self) -> bool: ...
    @property
    def vllm_use_v1(self) -> int | None: ...
    @property
    def enable_lora(self) -> bool: ...


class ComponentView(Protocol):
    """The fields of ``memprof.core.components.Component`` a budget line reads."""

    @property
    def name(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def where(self) -> str: ...


C = TypeVar("C", bound=ComponentView)


@dataclass(frozen=True, slots=True)
class RankCoord:
    """Where a rank sits. Global rank order is vLLM's: DP outermost, then PP, TP fastest."""

    rank: int
    tp_rank: int
    pp_stage: int
    dp_rank: int
    ep_rank: int | None
    # the hash of the compared fields, computed once (as ``ModelSpec`` keeps its own): a rank is
    # part of the value keys a sweep looks up several times a deployment (memprof/batch)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # (the compared fields in order, as the dataclass hashes)
        object.__setattr__(self, "_hash", hash(
            (self.rank, self.tp_rank, self.pp_stage, self.dp_rank, self.ep_rank)))

    def __hash__(self) -> int:
        return self._hash


# the categories of what is allocated while loading the model (inside the budget)
LOADED_CATEGORIES = ("weights", "scratch")


def loaded_at_start(c: ComponentView) -> bool:
    """Allocated while loading the model (weights, buffers registered at construction)."""
    return c.where == "budget" and c.category in LOADED_CATEGORIES


class Budget(NamedTuple):
    """What an engine hands the KV cache of one rank class: ``available`` KV bytes and the
    ``envelope`` it reserves for itself (vLLM: requested; SGLang: mfs × free before load)."""

    available: int
    envelope: int


class Engine:
    """One engine. Subclasses set the class attributes and override the methods they change;
    the defaults here are neutral (no refusal, no note, nothing reserved)."""

    name: ClassVar[str]  # the --engine value
    display: ClassVar[str]  # the name in messages ("vLLM")
    # the variable that lets max_model_len exceed the model's derived maximum
    long_context_env: ClassVar[str]
    overrides_flag: ClassVar[str]  # the flag that merges JSON into config.json
    # the budget is gpu_memory_utilization × total (vLLM's flag; remedies and explain vary it)
    budget_by_utilization: ClassVar[bool] = False
    # max_num_seqs defaults by GPU tier (explain offers the small tier as an alternative)
    tiered_max_num_seqs: ClassVar[bool] = False
    # CUDA-graph estimate subtracted from the budget per the release rows (terms/cudagraph.py
    # CUDAGRAPH_ESTIMATE); False: the graph pool is always the engine's own reserve
    graph_estimate_by_release: ClassVar[bool] = False
    # the model-load allocations are replayed for the allocator's rounding (terms/load_rounding)
    replays_model_load: ClassVar[bool] = False
    # --quantization gptq / awq read per release (models/quant_config.py GPTQ_FLAG_FORCES_PLAIN,
    # AWQ_FLAG_FORCES_PLAIN); False: the plain name keeps the plain kernels at every release
    quant_flag_by_release: ClassVar[bool] = False
    # a pasted command's flags checked against the release's own flag table
    # (configs/sglang_cli_flags.json), and a unique prefix of a flag read as the flag (argparse's
    # allow_abbrev: memprof.probes.serve_command)
    cli_flags_by_release: ClassVar[bool] = False
    # the load figure is the drop in free memory, each reading after empty_cache: it holds the
    # load's segments whole, beyond their tensors (terms/load_segments.py), and the reserved
    # blocks a post-load rewrite leaves that empty_cache cannot return (terms/post_load_requant.py)
    load_is_free_memory_drop: ClassVar[bool] = False
    # runs vLLM's attention-backend selection (block-size forcing, per-backend scratch); False:
    # --page-size is taken as given and only the engine's own scratch applies
    selects_attention_backend: ClassVar[bool] = False
    # the budget lines of the start-up log are modelled (core/engine_log.py)
    logs_budget_lines: ClassVar[bool] = False
    # the engine has vLLM's two entry points (``vllm serve`` / the Python ``LLM`` class); False:
    # one server, ``entrypoint`` is not its setting (reports show none)
    has_entrypoint: ClassVar[bool] = False
    # ``--dp`` starts that many identical engines, each on its own GPUs (plan tries DP sizes and
    # counts engines by it); False: ``--dp`` splits one server's GPUs for attention
    dp_replicates: ClassVar[bool] = False
    # the model classes register their init-time buffers as vLLM's do (the attention kind's
    # buffers of terms/init_buffers.py); False: none are modelled for this engine
    registers_model_init_buffers: ClassVar[bool] = False
    # the RoPE caches are the attention kind's engine-specific rotary buffers
    # (``AttentionKind.sglang_rope_buffers``) instead of vLLM's ``get_rope`` caches
    own_rope_buffers: ClassVar[bool] = False
    # the engine refuses to start when one request of max_model_len does not fit its KV cache
    # (vLLM: V1 check_enough_kv_cache_memory, V0 "max seq len is larger than the maximum number
    # of tokens"); an engine that caps the request length at its pool instead starts
    refuses_request_over_kv: ClassVar[bool] = True
    # the max-model-len flag takes ``auto`` (-1): the length fitted to the KV cache after
    # profiling, from the release memprof/core/auto_fit.py names
    takes_max_model_len_auto: ClassVar[bool] = False
    # the engine had vLLM's V0 generation (a V0 start-up log names no release)
    has_v0_generation: ClassVar[bool] = False
    # the per-request state of hybrid models' recurrent layers (``Attention.mixer``: Mamba-2,
    # Gated DeltaNet, KDA) is modelled for this engine (vLLM's hybrid KV-cache manager,
    # core/hybrid_state.py); False: such a model is refused, never estimated as attention
    models_state_mixers: ClassVar[bool] = False
    # the start-up profile runs a multimodal model's vision tower (vLLM V1's encoder cache and
    # forward: memprof/core/terms/encoder.py); False: the engine profiles no encoder
    profiles_encoder: ClassVar[bool] = True
    # it allocates a table beside its KV pool, sized by the pool (``request_table``)
    has_request_table: ClassVar[bool] = False
    # its flag spellings: Deployment field → the flags that set it (memprof/core/flags.py's
    # SETTINGS rows read them; a field not listed is no setting of this engine)
    flags: ClassVar[dict[str, tuple[str, ...]]] = {}
    # further spellings the launcher accepts for a field (flag → field), read from a pasted
    # command but never written in messages (those use ``flags``' longest)
    flag_aliases: ClassVar[dict[str, str]] = {}
    # --- how its command lines look (memprof/probes/serve_command.py, startup_log.py) ---
    # the console script and subcommand that start a server (("vllm", "serve")); None: only
    # ``python -m`` (``launches``)
    cli_launcher: ClassVar[tuple[str, str] | None] = None
    # the flag the console launcher turns a first positional word into (``sglang serve MODEL``
    # is ``--model-path MODEL``); None: the launcher's own rule (``positional_model``)
    cli_model_flag: ClassVar[str | None] = None
    launcher_prefix: ClassVar[str]  # what a serve command starts with, before the flags
    positional_model: ClassVar[bool] = False  # the model is the first positional argument
    # the engine's container image runs the server as its entrypoint (bare flags serve)
    image_entrypoint_serves: ClassVar[bool] = False

    # --- rank layout ------------------------------------------------------------------------------

    def world_size(self, dep: DeploymentView) -> int:
        raise NotImplementedError

    def attn_tp(self, dep: DeploymentView) -> int:
        """TP degree of attention."""
        return dep.tp

    def nccl_groups(self, dep: DeploymentView) -> list[tuple[str, int]] | None:
        """The process groups that get an NCCL communicator on a rank, (name, size), in the
        order the engine makes them; None: vLLM's (``memprof/core/terms/non_torch.py``
        ``nccl_groups``)."""
        return None

    def copies(self, dep: DeploymentView) -> int:
        """Full copies of the non-expert weights in the deployment."""
        raise NotImplementedError

    def ep_size(self, dep: DeploymentView) -> int:
        raise NotImplementedError

    def moe_tp_size(self, dep: DeploymentView) -> int:
        raise NotImplementedError

    def rank_coords(self, dep: DeploymentView) -> list[RankCoord]:
        raise NotImplementedError

    def identical_engines(self, dep: DeploymentView) -> int:
        """How many identical engines the deployment runs, of which the estimate computes the
        first and shifts the others (1: every rank is estimated)."""
        return 1

    # --- defaults ---------------------------------------------------------------------------------

    def batch_defaults(self, gpu: GPU, version: str | None, entrypoint: str,
                       max_model_len: int, v0_chunked_prefill: bool = True,
                       given: tuple[int | None, int | None] = (None, None),
                       model_facts: frozenset[str] = frozenset()) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) when the flags are left out (``given``: the
        two as the flags set them, None where left out, for defaults bounded by the other;
        ``model_facts``: ``engine_defaults.model_facts``)."""
        raise NotImplementedError

    def batch_default_notes(self, asked: DeploymentView, dep: DeploymentView,
                            gpu: GPU) -> list[str]:
        """What the output states about the batch defaults applied to ``asked`` (resolved:
        ``dep``) on ``gpu``, where the engine's rule reads more of the device than its memory."""
        return []

    def default_utilization(self, dep: DeploymentView, version: str) -> float | None:
        """``gpu_memory_utilization`` after defaults (None: the engine has no such setting)."""
        return None

    def prepared(self, dep: DeploymentView, gpu: GPU) -> dict[str, object]:
        """Settings the engine derives before the common defaults (field → value)."""
        return {}

    def model_settings(self, dep: DeploymentView, gpu: GPU,
                       has_indexer: bool, spec: Any = None) -> dict[str, object]:
        """Settings the engine derives from the model after ``prepared`` (field → value):
        ``has_indexer``, its MLA layers carry DeepSeek's lightning indexer; ``spec``: the
        model (``ModelSpec``)."""
        return {}

    def model_settings_notes(self, dep: DeploymentView, asked: DeploymentView,
                             has_indexer: bool) -> list[str]:
        """What ``model_settings`` changed from what was asked, as notes."""
        return []

    def sized_block_bytes(self, dep: DeploymentView, layers: tuple[Any, ...]) -> int:
        """The bytes of one KV block the engine divides its budget by, from the rank's layer
        specs (``KVLayerSpec``), where that is not what a block stores; 0: what it stores."""
        return 0

    def pool_tensors(self, dep: DeploymentView,
                     layers: tuple[Any, ...]) -> tuple[tuple[int, int], ...]:
        """The tensors the engine's KV pool is made of, from the rank's layer specs
        (``KVLayerSpec``), each as (bytes per block, bytes beyond the blocks), where they are
        not one tensor per layer cache (``memprof.core.kvcache.kv_tensor_sizes``); (): those."""
        return ()

    def mem_fraction(self, dep: DeploymentView, gpu: GPU,
                     attention: AttentionFacts | None = None, spec: Any = None) -> float:
        """The static memory fraction the budget line reads (0.0: none); ``attention``: the
        model's (first layer's) attention, ``spec``: the model (``ModelSpec``), where the
        engine's choice depends on them."""
        return 0.0

    # --- the model dtype --------------------------------------------------------------------------

    def served_dtype(self, dep: DeploymentView, family: str, checkpoint: str, asked: str,
                     arch: str) -> str | None:
        """The dtype the engine serves a ``checkpoint``-dtype model of ``family`` in on a
        card of architecture ``arch`` under ``--dtype asked`` (aliases resolved) by its own
        reading; None (the default): vLLM's, ``memprof/core/auto_dtype.py``."""
        return None

    def check_card(self, dep: DeploymentView, arch: str, gpu_name: str) -> None:
        """Refuse a card the engine does not start on whatever the dtype (``BadInput``); nothing
        by default (vLLM's dtype refusals are ``auto_dtype.check_served_dtype``'s)."""

    def dtype_notes(self, dep: DeploymentView, family: str, checkpoint: str, asked: str,
                    arch: str) -> list[str] | None:
        """What the estimate says of the dtype the engine's own reading serves; None (the
        default): vLLM's notes (``auto_dtype.served_dtype_notes``)."""
        return None

    # --- a vision-language model ------------------------------------------------------------------

    def models_vision(self, dep: DeploymentView, spec: Any) -> bool:
        """Does memprof model this engine's vision path of ``spec`` (a ``ModelSpec`` with a
        ``vision`` tower) at the deployment's release? False: refused as not modelled
        (``memprof/core/models/multimodal.py`` ``check_multimodal``); a layout the engine's
        rules do not cover raises ``BadInput`` itself. By default: where the engine takes
        ``--limit-mm-per-prompt`` (vLLM)."""
        return bool(self.flags.get("limit_mm_per_prompt"))

    def vision_tower(self, dep: DeploymentView, spec: Any) -> Any:
        """The vision tower (``VisionTower``) as this engine builds it for ``spec`` at the
        deployment's release, None when it builds none; by default the model's own
        (``spec.vision``: vLLM's tower)."""
        return spec.vision

    def vision_notes(self, dep: DeploymentView, spec: Any) -> list[str]:
        """What the estimate says of this engine's vision path of ``spec`` (none by default:
        vLLM's encoder terms name themselves)."""
        return []

    # --- budget line ------------------------------------------------------------------------------

    def budget(self, dep: DeploymentView, gpu: GPU, *, requested: int, budgeted: int,
               baseline: int, loaded: int, mfs: float) -> Budget:
        raise NotImplementedError

    def load_figure(self, dep: DeploymentView, loaded: int, first_kernel: int) -> int:
        """What the engine counts as its model load (its budget line's ``loaded`` and the load
        figure its log prints), from the bytes allocated while loading (``loaded``: weights and
        buffers built with the model) and the one-time non-torch memory of the process's first
        kernel when it runs inside the load (``first_kernel``; 0 when a communicator's warm-up
        ran it before). Default: the allocations alone (a torch-memory figure)."""
        return loaded

    def first_kernel_before_load(self, dep: DeploymentView) -> str | None:
        """What runs the process's first kernel before the model load and the free-memory
        reading before it, on a rank with no NCCL communicator (a phrase for the component's
        formula: ``memprof.core.terms.non_torch.first_kernel_in_load``), or None: the load (or
        the profile run) runs it. Default: None."""
        return None

    def blocks(self, available: int, block_bytes: int, block_size: int, layout: str) -> int:
        """KV blocks the budget buys."""
        return available // block_bytes if available > 0 else 0

    def capped_blocks(self, dep: DeploymentView, blocks: int, block_size: int,
                      layout: str) -> int:
        """The blocks after a cap the engine's flags put on its pool (none by default)."""
        return blocks

    def used(self, comps: Sequence[C], base: int, envelope: int) -> tuple[int, list[C]]:
        """(bytes in use at run time, the components outside the engine's envelope)."""
        raise NotImplementedError

    def request_table(self, dep: DeploymentView, gpu: GPU,
                      pool_tokens: int) -> tuple[int, str] | None:
        """A table the engine allocates beside its KV pool of ``pool_tokens`` tokens, after the
        pool is sized and outside its budget: (bytes, formula); None: none (the default; an
        engine that has one sets ``has_request_table``)."""
        return None

    def decode_graph_sizes(self, dep: DeploymentView, gpu: GPU) -> list[int] | None:
        """The batch sizes of the engine's own decode CUDA graphs, in capture order, one graph of
        the whole forward each; None (the default): vLLM's capture sizes and graph modes by
        release (``memprof.core.terms.cudagraph.graph_modes``)."""
        return None

    def graph_kept_logits(self, dep: DeploymentView, sizes: list[int],
                          vocab: int) -> tuple[tuple[int, ...], int, str] | None:
        """What the engine's graph capture keeps of the logits: (tensors kept in the graph pool,
        in capture order; bytes of a buffer allocated before capturing; the formula's words);
        None (the default): nothing beyond the live sets (vLLM keeps weak references)."""
        return None

    def graph_stage_outputs(self, dep: DeploymentView, sizes: list[int], hidden: int,
                            act_bytes: int) -> tuple[tuple[tuple[int, ...], ...], str] | None:
        """What the engine's graph capture keeps on a pipeline stage that is not the last: (per
        graph, in capture order, the tensors its output holds in the pool; the formula's
        words); None (the default): nothing beyond the live sets."""
        return None

    def graph_input_buffers(self, dep: DeploymentView, max_bs: int, hidden: int,
                            model_dtype: str) -> tuple[tuple[int, ...], str]:
        """The input buffers the engine's own graph runner allocates outside the graph pool,
        on the stream it is built on, after the attention backend's capture state: (the bytes
        of those that take segments, in allocation order; the formula's words); nothing by
        default (vLLM's input buffers are made before its graph window)."""
        return (), ""

    def graph_lm_head_stages(self, dep: DeploymentView, vocab: int, hidden: int, bs: int,
                             act_bytes: int) -> tuple[tuple[tuple[int, ...], ...], str]:
        """The decode live sets the engine's own graph capture adds after the last layer (its
        logits processor, where the captured forward holds it), as block sizes, and the
        formula's words; ``((), "")`` (the default): none."""
        return (), ""

    def graph_after_earlier_capture(self, dep: DeploymentView, gpu: GPU,
                                    spec: Any) -> tuple[bool, bool, str] | None:
        """Where the engine's own decode graphs are captured after other graphs into the same
        pool, whose freed blocks hold their live sets: (the logits buffer was allocated by the
        earlier capture too, so was the capture stream's cuBLAS workspace, the formula's
        words); None (the default): captured first."""
        return None

    def stream_pool_before_graphs(self, dep: DeploymentView, gpu: GPU,
                                  spec: Any) -> tuple[str, bool] | None:
        """What makes torch's CUDA stream pool before the rank's graph capture where no NCCL
        communicator did (``memprof/core/terms/stream_pool.py``), in the formula's words, and
        whether it is made before the model loads (then in the free memory the engine reads
        before the load); None (the default): nothing of the engine's own (vLLM's cases are
        ``stream_pool.pool_before_graphs``'), so the capture stream makes it."""
        return None

    def prefill_graph_tokens(self, dep: DeploymentView, gpu: GPU,
                             spec: Any) -> list[int] | None:
        """The token counts of the engine's own prefill CUDA graphs (captured piecewise, a
        component of their own: ``cudagraph.prefill_graph_terms``); None (the default): none
        (vLLM's piecewise graphs are its capture sizes)."""
        return None

    def prefill_graph_logits(self, dep: DeploymentView) -> bool:
        """Whether the prefill graphs allocate the logits buffer the decode graphs share."""
        return False

    def graph_capture_state(self, dep: DeploymentView, gpu: GPU, spec: Any,
                            sizes: list[int]) -> tuple[int, str] | None:
        """What the attention backend allocates for the engine's own decode graphs outside the
        graph pool while the graphs are built: (bytes, the formula's words, naming the backend
        assumed); None (the default): nothing of the engine's own (vLLM's backends' capture
        buffers are terms of their own)."""
        return None

    def graph_capture_reserved(self, dep: DeploymentView, gpu: GPU, spec: Any, sizes: list[int],
                               after_state: tuple[int, ...],
                               capture_first: tuple[int, ...]) -> int | None:
        """What the caching allocator reserves outside the graph pool while the engine's own
        decode graphs are built: ``graph_capture_state``'s buffers on the streams they are
        allocated on, with ``after_state`` (allocated after the state on the runner's stream:
        the runner's input buffers and the logits buffer) and ``capture_first`` (made by the
        first size's capture on the capture stream: its cuBLAS workspace, the generator's graph
        state) sharing those streams' segments; None (the default): each part's own segments
        added."""
        return None

    def startup_budget_refusal(self, dep: DeploymentView, base: int, envelope: int,
                               total: int) -> bool:
        """Whether the engine refuses to start because its envelope exceeds the free memory."""
        return False

    def derived_max_model_len(self, cfg: dict[str, Any]) -> tuple[int, str] | None:
        """The longest ``max_model_len`` the engine accepts from ``config.json`` without its
        ``long_context_env`` variable, and how it was derived (``None``: the config states no
        length)."""
        raise NotImplementedError

    def block_size_choices(self, version: str | None) -> tuple[int, ...] | None:
        """The block sizes the engine's CLI takes (None: any)."""
        return None

    def held_before_kv(self, c: ComponentView) -> bool:
        """Whether a component is named as taking the memory the KV cache would have had."""
        return c.where == "budget"

    # --- flags and notes --------------------------------------------------------------------------

    def scratch_keys(self, dep: DeploymentView) -> tuple[str, ...]:
        """Catalog keys of the engine's own scratch buffers (besides the attention backend's,
        when it selects vLLM's backends)."""
        return ()

    def launches(self, module: str) -> bool:
        """Whether ``python -m module`` starts this engine's server."""
        return False

    def check_layout(self, dep: DeploymentView) -> None:
        """The engine's refusals of a parallel layout (after the settings checks)."""

    def check_architecture(self, release: str, architecture: str, model: str) -> None:
        """:class:`BadInput` where the engine at ``release`` cannot load a checkpoint of
        ``architecture`` (its model registry, read from each release's wheel)."""

    def notes(self, dep: DeploymentView, mfs: float, gpu: GPU | None = None) -> list[str]:
        return []

    def rules_release(self, dep: DeploymentView, arch: str | None, version: str,
                      quant_method: str | None = None) -> str:
        """The release name the version rules read for this deployment at ``version`` (vLLM:
        ``"0.8.5+v0"`` where the V0 engine runs, ``versions.split_generation``); refusals of a
        setting the release cannot run are :class:`BadInput`. ``quant_method``: the model's
        quantisation method as memprof sizes it, where the caller has the model."""
        return version

    def release_notes(self, dep: DeploymentView, arch: str | None,
                      quant_method: str | None = None) -> list[str]:
        """What the output states about the engine release the deployment is modelled at (which
        engine generation runs, and why)."""
        return []

    def runner_notes(self, dep: DeploymentView, *, architecture: str, moe: bool,
                     hybrid: bool, quantised: bool = False, vocab: int = 0,
                     logits_itemsize: int = 2, runner_listed: Sequence[Any] = ()) -> list[str]:
        """What the output states where the engine runs this model (its ``architecture``;
        ``moe``: routed experts; ``hybrid``: state mixers beside attention; ``quantised``: a
        quantised checkpoint or flag; ``vocab`` and ``logits_itemsize``: the logits' width and
        bytes per element; ``runner_listed``: its family's ``Family.v2_runner_listed`` rows) with
        a model runner whose profile run memprof does not model."""
        return []

    def runs_runner_v2(self, dep: DeploymentView, *, architecture: str, moe: bool,
                       hybrid: bool, quantised: bool = False,
                       runner_listed: Sequence[Any] = ()) -> bool:
        """Whether the engine runs this model (arguments as ``runner_notes``) with a second model
        runner whose CUDA-graph capture differs from the one memprof models
        (``memprof.core.graph_log``); False where the engine has one runner."""
        return False

    def serve_command(self, model: str, *, tp: int, pp: int, dp: int, ep: bool,
                      max_model_len: int | None, max_num_seqs: int) -> list[str]:
        """The words of the command line that starts this layout (``model`` shell-quoted
        already; ``plan`` appends the KV dtype)."""
        raise NotImplementedError

"""The row every model family fills in (``Family``) and the config readers the families share:
GQA attention from the config, ``head_dim`` as HF defaults it, per-layer sliding windows,
experts per token, a multimodal wrapper's language model (``lift_text_config``) and its
``vision_config`` integers (``vision_int``), and the error for a missing field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.spec import MLP, Attention, Layer
from memprof.core.versions import Rule

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower

Built = tuple[list[Layer], list[Layer]]  # (layers, MTP layers)
LayerBuilder = Callable[[ConfigFields, int, int], Built]
ConfigView = Callable[[dict[str, Any]], dict[str, Any]]


class LoraSupport(NamedTuple):
    """What a family's vLLM model class does under ``--enable-lora`` at a release (the value of
    its ``Family.lora`` rows; memprof/core/terms/lora.py sizes the buffers from it)."""

    # embed_tokens holds ``lora_extra_vocab_size × max_loras`` more rows and lm_head
    # ``lora_extra_vocab_size`` more, padded to ``lora_vocab_padding_size`` (256)
    extra_vocab: bool
    # embed_tokens and lm_head are LoRA modules (the class's ``embedding_modules``)
    embeddings: bool
    # the routed experts carry LoRA (``FusedMoEWithLoRA``, vLLM 0.12.0 on); memprof refuses
    # these until it models them
    experts: bool = False
    # a tied lm_head is the embed_tokens module itself (``self.lm_head =
    # self.model.embed_tokens``), so the LoRA model manager, walking ``named_modules(
    # remove_duplicate=False)``, meets it again as ``lm_head`` and wraps it a second time as a
    # ``VocabParallelEmbeddingWithLoRA`` (another A [L, V, r] and B [L, 1, H, r]) beside the
    # ``LogitsProcessorWithLoRA``; only where the model ties its embeddings
    tied_head_embedding: bool = False
    # the checkpoint stores qkv_proj and gate_up_proj fused, so the class's
    # ``packed_modules_mapping`` maps each to itself (Phi-3: ``{"qkv_proj": ["qkv_proj"],
    # "gate_up_proj": ["gate_up_proj"]}``) and vLLM wraps them as one-slice LoRA linears
    # (``QKVParallelLinearWithLoRA`` / ``ColumnParallelLinearWithLoRA``: one A [L, 1, r, H] and one
    # B over the whole output) instead of 3 and 2 slices
    fused_slices: bool = False
    # the MoE router is a LoRA linear (a ``ReplicatedLinear``); False where the class builds it as
    # a plain ``nn.Linear``, which ``get_supported_lora_modules`` (LinearBase only) leaves out
    router: bool = True
    # what of the class's LoRA layers memprof does not size (refused, with this reason); empty:
    # every LoRA layer is sized
    unmodelled: str = ""
    # architectures of the family whose own vLLM class has no embedding modules
    # (``embedding_modules = {}``): embed_tokens and lm_head carry no LoRA for them
    no_embeddings: tuple[str, ...] = ()

    def __str__(self) -> str:  # as ``memprof versions`` prints the row
        if self.unmodelled:
            return f"LoRA on {self.unmodelled} (refused)"
        said = [("embed_tokens / lm_head LoRA" if self.embeddings else "no embedding LoRA")]
        said += [text for flag, text in (
            (self.extra_vocab, "extra vocabulary rows"), (self.experts, "expert LoRA (refused)"),
            (self.tied_head_embedding, "tied lm_head wrapped again"),
            (self.fused_slices, "fused qkv_proj / gate_up_proj one slice each"),
            (not self.router, "no router LoRA")) if flag]
        if self.no_embeddings:
            said.append(f"none on the embeddings of {', '.join(self.no_embeddings)}")
        return "; ".join(said)


class PostLoadRequant(NamedTuple):
    """What an engine's model file does to a block-fp8 checkpoint's weights after loading them,
    in order (the value of a family's ``post_load_requant`` rows; memprof/core/terms/
    post_load_requant.py replays it on the allocator). Names are parameter-name suffixes of the
    rank's weights (``memprof.core.weights.rank.weights_in_order_params``) within a layer."""

    # parameters the engine builds as one tensor (a fused projection), in the order listed
    fused: tuple[tuple[str, ...], ...]
    # (module whose weight is dequantised to the model dtype, the parameter made from it after
    # the load, the number of equal contiguous copies it is made of), for every layer first
    split: tuple[str, str, int]
    # modules whose fp8 weight and scale are requantised one after another in each layer (the
    # first of a ``fused`` group names the group); absent ones are skipped
    requant: tuple[str, ...]
    # compute-capability majors on which the requantisation runs
    cc_majors: tuple[int, ...]

    def __str__(self) -> str:
        short = [m.split(".", 1)[-1] for m in self.requant]
        ccs = "/".join(f"{c}.x" for c in self.cc_majors)
        return (f"{self.split[0].rsplit('.', 1)[-1]} split, then {', '.join(short)} "
                f"requantised on compute capability {ccs}")


class EngineTower(NamedTuple):
    """How an engine other than vLLM builds a family's vision tower at a release: the ``value``
    of a ``Family.sglang_tower`` row, read by ``memprof/core/engines/sglang_vlm.py``.

    ``build``: "absent" (the release has no model file for the architecture: refused),
    "skipped" (the wrapper builds the language model alone and skips the tower's checkpoint
    tensors), "sharded" (the tower's linears split over the TP ranks as vLLM's are:
    ``memprof/core/weights/vision.py``), "whole" (transformers' own modules, plain
    ``nn.Linear``: all of it on every rank), "flag" (built only under a server flag memprof does
    not take, so not by default); ``mlp_multiple``: the MLP width rounded up to this multiple;
    ``multimodal``: whether the engine treats the architecture as multimodal by default (its
    mem_fraction_static reduction reads it)."""

    build: str
    mlp_multiple: int = 1
    multimodal: bool = True

    def __str__(self) -> str:  # as ``memprof versions`` prints the row
        width = f", MLP width rounded up to {self.mlp_multiple}" if self.mlp_multiple > 1 else ""
        return (f"{self.build}{width}; "
                f"{'multimodal' if self.multimodal else 'not multimodal'} by default")


class Family(NamedTuple):
    """One model family: what names it in a config.json, how its config becomes layers, and
    the facts generic modules ask of it instead of naming it.

    ``build(config, hidden_size, num_layers)`` returns (layers, MTP layers) and refuses a
    config that lacks a field it needs (``ConfigError``, never a guess); ``attention`` is the
    ``memprof.core.attention`` kind its layers use; ``modules`` are the family's own modules
    outside ``memprof/core/models/families/`` (repo paths), the only other places allowed to
    name it (``tests/test_family_axes.py``)."""

    name: str
    model_types: tuple[str, ...]
    architectures: tuple[str, ...]
    build: LayerBuilder
    attention: str
    # bare decoders (a checkpoint saved without its lm_head, named ``*Model``) that vLLM's
    # registry builds with this family's class as embedding models (registry.py
    # _EMBEDDING_MODELS): sized on the pooling runner only (families.is_bare_decoder)
    bare_architectures: tuple[str, ...] = ()
    moe: bool = False  # routed experts in (some of) its layers
    # its config may declare MTP layers (num_nextn_predict_layers; Qwen3.5: mtp_num_hidden_layers)
    mtp: bool = False
    rope_fp32: bool = False  # builds its RoPE cos/sin cache in fp32, not the model dtype
    # its MTP block is e_proj + h_proj + a hyper-connection head (False: DeepSeekMTP's unquantised
    # eh_proj(2H → H)); read by memprof/core/weights/rank.py
    mtp_hc_block: bool = False
    # its MTP drafter is Qwen3.5's predictor: one ``fc`` (ColumnParallelLinear(2H → H), quantised
    # as the checkpoint says) and three norms (``pre_fc_norm_embedding``, ``pre_fc_norm_hidden``,
    # ``norm``) for the whole block, beside its decoder layers (``mtp_num_hidden_layers``); read
    # by memprof/core/weights/rank.py
    mtp_fc_block: bool = False
    # its vLLM class built lm_head on every PP stage while the release rows
    # LM_HEAD_EVERY_STAGE of memprof/core/weights/rank.py hold
    lm_head_every_pp_stage: bool = False
    # routed experts stored MXFP4 (group 32) unless the checkpoint's quantization says another
    # expert dtype, with the loader's rows of memprof/core/weights/mlp.py
    mxfp4_experts: bool = False
    # architectures whose one shared expert SGLang can fuse into the routed experts (appended to
    # them as copies: SGLANG_SHARED_EXPERTS_FUSION in memprof/core/weights/mlp.py)
    fusable_shared_experts: tuple[str, ...] = ()
    # how its SGLang model file splits embed_tokens under DP attention, by release
    # (``sglang_embed_rows``; read by memprof/core/weights/rank.py); none: over the TP ranks
    dp_attention_embed: tuple[Rule, ...] = ()
    # what an engine's model file does to a block-fp8 checkpoint after the load, by release
    # (value: ``PostLoadRequant``; memprof/core/terms/post_load_requant.py); none: nothing
    post_load_requant: tuple[Rule, ...] = ()
    # how its SGLang model file builds its vision tower, by release (value: ``EngineTower``;
    # read by memprof/core/engines/sglang_vlm.py); none:
    # SGLang's vision path of the family is not modelled (refused)
    sglang_tower: tuple[Rule, ...] = ()
    spec_extras: Callable[[ConfigFields], dict[str, int]] | None = None  # extra ModelSpec fields
    # the checkpoint's module-name prefixes and the names memprof's modules carry for them (the
    # model file's ``hf_to_vllm_mapper`` ``orig_to_new_prefix``, which vLLM applies to the
    # quantization exclusion list too: ``apply_vllm_mapper``); none: the names are the same
    weight_prefixes: tuple[tuple[str, str], ...] = ()
    # the config the builder and every generic module read, made from the config.json: a
    # multimodal wrapper's language-model config (``text_config``) lifted to the top level, the
    # HF config class's defaults for what the checkpoint leaves out (None: the config as is)
    config_view: ConfigView | None = None
    # per-layer norms (hidden size) beyond input_layernorm / post_attention_layernorm
    layer_norms: tuple[str, ...] = ()
    note: str = ""  # what the estimate of such a model leaves out, stated in its notes
    # the EAGLE-3 draft class vLLM builds for a speculators-format head whose
    # transformer_layer_config has this family's model_type ((model_type, class) pairs;
    # transformers_utils/configs/speculators/algos.py update_eagle3's eagle3_arch_map, read in
    # the 0.30.0 and 0.33.0 wheels; memprof/core/models/draft_head.py); none: vLLM has none
    eagle3_speculators: tuple[tuple[str, str], ...] = ()
    # a vision-language wrapper: reads its vision tower (a ``VisionTower``: the weights, the
    # tokens an image becomes, the profile run's encoder forward) from the whole config.json
    # and the language model's hidden size; None for a config of the architecture without one
    # (memprof/core/models/multimodal.py). Its ``config_view`` reads the language model.
    vision: Callable[[dict[str, Any], int], VisionTower | None] | None = None
    # vLLM's LoRA support of its model class, by release (value: ``LoraSupport``); none: memprof
    # has not read it and refuses --enable-lora for the family (memprof/core/terms/lora.py)
    lora: tuple[Rule, ...] = ()
    # how its vLLM MLP's forward names the gate_up output, by release (value "kept" / "rebound":
    # ``v0_gate_up_rows``); read only for V0's eager profile run
    # (memprof/core/terms/v0_eager_forward.py); none: "kept" is assumed there, as the stage says
    v0_mlp_gate_up: tuple[Rule, ...] = ()
    # the input projection of its vLLM MTP drafter's predictor (``--speculative-method mtp``):
    # ("eh_proj" or "fc", the model file read), which sizes the drafter's forward in the profile
    # run (memprof/core/terms/mtp_drafter.py); None: not read, no stage beyond the MTP layer's
    mtp_predictor_input: tuple[str, str] | None = None
    # whether vLLM compiles its MTP drafter's class (``@support_torch_compile``), by release
    # (``value`` True / False; ``mtp_compiled_rows``), so that the V1 runner captures the
    # drafter's pieces (memprof/core/terms/drafter_graphs.py); none: not read
    mtp_compiled: tuple[Rule, ...] = ()
    # the family's own release rows (``memprof versions`` lists them: version_diff.py)
    release_rules: Callable[[], tuple[tuple[Rule, ...], ...]] | None = None
    # the releases whose ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (vLLM config/vllm.py) list the
    # family's architectures: rows whose ``value`` is the tuple listed
    # (memprof/core/engines/vllm_runner.py reads them)
    v2_runner_listed: tuple[Rule, ...] = ()
    # the largest CUDA-graph capture size the family's vLLM config sets itself, by release
    # (``value``: the size; memprof/core/terms/cudagraph.py ``model_max_capture`` reads them)
    max_capture: tuple[Rule, ...] = ()
    # the SGLang releases whose ``is_fa3_default_architecture`` (utils.py) lists the family's
    # architectures, which then run FlashAttention 3 by default on Hopper: rows whose ``value``
    # is the tuple listed (memprof/core/engines/sglang_attention.py reads them)
    sglang_fa3_listed: tuple[Rule, ...] = ()
    # how vLLM's ``--dtype auto`` treats the family's model type, by release (value
    # "bf16_for_fp32": a float32 checkpoint in bfloat16 instead of float16, _get_and_verify_dtype
    # before 0.9.1; "no_float16": _FLOAT16_NOT_SUPPORTED_MODELS from 0.9.1; read by
    # memprof/core/auto_dtype.py); none: the release's reading for every model
    vllm_auto_dtype: tuple[Rule, ...] = ()
    # how SGLang's ``--dtype auto`` treats the family's model type, by release (value
    # "bf16_for_fp32": a float32 checkpoint in bfloat16 instead of float16, ModelConfig's
    # _get_and_verify_dtype; read by memprof/core/engines/sglang_dtype.py); none: float16
    sglang_auto_dtype: tuple[Rule, ...] = ()
    modules: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # short names code uses for it in identifiers (e.g. dsv4)
    source: str = ""  # the engine / HF source the builder follows


def mtp_compiled_rows(family: str, cls: str, spans: tuple[tuple[str, str | None, bool], ...],
                      read_in: str) -> tuple[Rule, ...]:
    """Rows of ``Family.mtp_compiled``: over each (since, until, compiled) span vLLM's MTP
    drafter class ``cls`` is (``compiled``) or is not a ``@support_torch_compile`` class (read
    in the wheels ``read_in``)."""
    return tuple(Rule(name=f"{family}_mtp_compiled", changes="the MTP drafter's CUDA graphs: "
                      "its class compiled", since=since, until=until, value=compiled,
                      applies_to=family, introduced_by=f"read in {read_in}",
                      source=f"model_executor/models/{cls}"
                      + (" (@support_torch_compile)" if compiled else
                         " (no @support_torch_compile: the drafter runs eagerly)")
                      + f", read in {read_in}")
                 for since, until, compiled in spans)


def lora_refused(family: str, cls: str, since: str, read_in: str, *, introduced_by: str,
                 unmodelled: str = "", experts_from: str | None = None) -> tuple[Rule, ...]:
    """``Family.lora`` rows of a vLLM class whose LoRA memprof refuses: ``cls`` has
    ``SupportsLoRA`` from ``since`` (``introduced_by`` says how that is known; read in the
    ``read_in`` wheels), with LoRA on ``unmodelled`` layers memprof does not size and, from
    ``experts_from``, on the routed experts too (``FusedMoEWithLoRA``, first released in 0.11.1).
    Only the refusal is read from them; a release before ``since`` is refused naming it."""
    rows: list[Rule] = []
    moe_since = experts_from if experts_from is not None else None
    if unmodelled and since != moe_since:
        rows.append(Rule(
            name=f"{family}_lora", changes="LoRA: modules", since=since, until=moe_since,
            value=LoraSupport(extra_vocab=False, embeddings=False, unmodelled=unmodelled),
            introduced_by=introduced_by,
            removed_by=(f"FusedMoEWithLoRA (first released in {moe_since})" if moe_since
                        else ""),
            source=f"{read_in} model_executor/models: {cls} (SupportsLoRA); lora/utils.py "
            "get_supported_lora_modules (every LinearBase)", applies_to=family))
    if moe_since is not None:
        what = f"{unmodelled} and the experts" if unmodelled else ""
        rows.append(Rule(
            name=f"{family}_lora", changes="LoRA: modules", since=moe_since, until=None,
            value=LoraSupport(extra_vocab=False, embeddings=False, experts=True,
                              unmodelled=what),
            introduced_by=(introduced_by if not rows
                           else f"FusedMoEWithLoRA (first released in {moe_since})"),
            source=f"{read_in} model_executor/models: {cls} (SupportsLoRA); lora/layers/"
            "fused_moe.py FusedMoEWithLoRA (0.11.1 on)", applies_to=family))
    return tuple(rows)


def v2_listed(family: str, since: str, until: str, architectures: tuple[str, ...],
              read_in: str) -> Rule:
    """A ``Family.v2_runner_listed`` row of ``family``: vLLM ``since`` up to ``until`` lists
    ``architectures`` in config/vllm.py ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (read in the
    ``read_in`` wheels)."""
    return Rule(name="model_runner_v2_listed", changes="model runner of the profile run (noted)",
                since=since, until=until, value=architectures, applies_to=family,
                introduced_by=f"listed by vLLM {since}", removed_by=f"not listed in {until}",
                source=f"{read_in} config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES")


def sglang_fa3_listed(family: str, since: str, until: str,
                      architectures: tuple[str, ...]) -> Rule:
    """A ``Family.sglang_fa3_listed`` row of ``family``: SGLang ``since`` up to ``until`` lists
    ``architectures`` in ``is_fa3_default_architecture`` (read in the wheels of 0.4.6 – 0.5.7;
    0.5.8 dropped the list and runs FA3 for every MHA model on Hopper)."""
    return Rule(name="sglang_fa3_default_architecture", changes="CUDA graphs: attention backend",
                since=since, until=until, value=architectures, applies_to=family,
                engine="sglang", introduced_by=f"listed by SGLang {since}",
                removed_by=f"not listed in {until}",
                source="sglang utils.py (0.5.4 on utils/common.py) is_fa3_default_architecture, "
                f"read in the {since} and later wheels before {until}")


def head_dim(c: ConfigFields, hidden: int, heads: int, default: int | None = None) -> int:
    """``head_dim`` as stated (Qwen3: 128, not hidden/heads); when absent, the family's HF
    config-class default (``default``), else derived as HF derives it (hidden // heads)."""
    if c.cfg.get("head_dim") is not None:
        return c.size("head_dim")
    if default is not None:
        return default
    if hidden % heads:
        raise ConfigError(
            f"config.json has no head_dim and hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads}",
            hint="add head_dim to the config",
        )
    return hidden // heads


def gqa(c: ConfigFields, hidden: int, *, bias: bool, qk_norm: bool, window: int | None = None,
        sinks: bool = False, o_bias: bool = False, head_dim_default: int | None = None,
        kv_heads_required: bool = False) -> Attention:
    """A GQA layer from the config; ``num_key_value_heads`` absent means MHA (LlamaConfig /
    Qwen2Config / Qwen3Config: None → num_attention_heads) unless ``kv_heads_required``."""
    heads = c.size("num_attention_heads")
    kv = c.size("num_key_value_heads", None if kv_heads_required else heads)
    if heads % kv:
        raise ConfigError(
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}",
            hint="fix the config.json",
        )
    hd = head_dim(c, hidden, heads, head_dim_default)
    return Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=hd, v_head_dim=hd,
                     qkv_bias=bias, o_bias=o_bias, qk_norm=qk_norm, sliding_window=window,
                     sinks=sinks)


# Keys of a wrapper's top-level config that describe the wrapper, not its language model: the
# text config's values replace the rest (transformers' composite configs keep the language
# model's fields there; vLLM builds the language model from ``get_text_config()``).
WRAPPER_KEYS = ("architectures", "model_type", "torch_dtype", "dtype", "vision_config",
                "quantization_config", "_source", "_hf_ids")


def lift_text_config(cfg: dict[str, Any], key: str = "text_config") -> dict[str, Any]:
    """A multimodal wrapper's config read as its language model's: the fields of ``cfg[key]``
    over the top level's, except the wrapper's own (``WRAPPER_KEYS``: architecture,
    ``model_type``, dtype, quantisation, ``vision_config``), as vLLM reads the dtype and the
    quantisation from the top-level config and the sizes from ``hf_text_config``; the text
    config's dtype when the top level states none. A config without ``key`` is returned as a
    copy (Qwen2.5-VL's flat layout); a ``key`` that is no object is a ``ConfigError``."""
    text = cfg.get(key)
    if text is None:
        return dict(cfg)
    if not isinstance(text, dict):
        raise ConfigError(f"config.json field {key!r} must be an object",
                          hint=f"fix {key!r} in the config.json")
    out = {k: v for k, v in cfg.items() if k != key}
    out.update({k: v for k, v in text.items() if k not in WRAPPER_KEYS})
    if out.get("torch_dtype") is None and out.get("dtype") is None:
        dtype = text.get("torch_dtype") or text.get("dtype")
        if dtype is not None:
            out["torch_dtype"] = dtype
    return out


def missing(c: ConfigFields, key: str, why: str) -> ConfigError:
    return ConfigError(f"config.json of this {c.family} model has no {key!r} ({why})",
                       hint=f"add {key!r} to the config.json: memprof does not guess it")


def linear_full_layer_types(c: ConfigFields, n_layers: int) -> list[str]:
    """A hybrid linear-attention model's ``layer_types`` (``linear_attention`` /
    ``full_attention``) as stated, else derived from ``full_attention_interval`` (full attention
    where ``(i + 1) % interval == 0``, as vLLM's Qwen3-Next and Qwen3.5 configs derive it); a config
    stating neither is refused."""
    types = c.cfg.get("layer_types")
    if isinstance(types, list):
        if len(types) < n_layers:
            raise ConfigError(f"layer_types lists {len(types)} layers but num_hidden_layers is "
                              f"{n_layers}", hint="fix the config.json")
        bad = next((t for t in types[:n_layers]
                    if t not in ("linear_attention", "full_attention")), None)
        if bad is not None:
            raise ConfigError(f"unknown layer type {str(bad)[:40]!r} in layer_types",
                              hint="linear_attention or full_attention")
        return [str(t) for t in types[:n_layers]]
    if c.cfg.get("full_attention_interval") is None:
        raise missing(c, "full_attention_interval", "it places the full-attention layers")
    every = c.size("full_attention_interval")
    return ["full_attention" if (i + 1) % every == 0 else "linear_attention"
            for i in range(n_layers)]


def layer_types_windows(c: ConfigFields, n_layers: int) -> list[int | None] | None:
    """Per-layer sliding window from ``layer_types`` (``sliding_attention`` /
    ``full_attention``), or None when the config has no ``layer_types`` (a ``sliding_window``
    of the wrong type is refused either way)."""
    types = c.cfg.get("layer_types")
    window = c.opt_int("sliding_window")
    if not isinstance(types, list):
        return None
    if len(types) < n_layers:
        raise ConfigError(
            f"layer_types lists {len(types)} layers but num_hidden_layers is {n_layers}",
            hint="fix the config.json",
        )
    out: list[int | None] = []
    for t in types[:n_layers]:
        if t == "sliding_attention":
            if not window:
                raise ConfigError(
                    "layer_types has sliding_attention but sliding_window is missing or 0",
                    hint="add sliding_window to the config",
                )
            out.append(window)
        elif t == "full_attention":
            out.append(None)
        else:
            raise ConfigError(f"unknown layer type {t[:40]!r} in layer_types",
                              hint="sliding_attention or full_attention")
    return out


def swa_from_max_window_layers(c: ConfigFields, n_layers: int) -> list[int | None]:
    """Qwen2/Qwen3 ``use_sliding_window``: layers >= ``max_window_layers`` use SWA (HF
    Qwen2Config.layer_types); else full attention."""
    if c.flag("use_sliding_window", False):
        window = c.opt_int("sliding_window")
        if not window:
            raise missing(c, "sliding_window", "use_sliding_window is true")
        if c.cfg.get("max_window_layers") is None:
            raise missing(c, "max_window_layers", "use_sliding_window is true")
        first = c.num("max_window_layers")
        return [window if i >= first else None for i in range(n_layers)]
    return [None] * n_layers


def top_k(c: ConfigFields, experts: int, *keys: str) -> int:
    """Experts per token: the first of ``keys`` the config states, in [1, experts]."""
    key = next((k for k in keys if c.cfg.get(k) is not None), keys[0])
    k = c.size(key)
    if k > experts:
        raise ConfigError(f"config.json field {key!r} is {k}, more than the {experts} experts",
                          hint=f"fix {key!r} in the config.json")
    return k


def dense_layers(c: ConfigFields, hidden: int, n_layers: int, *, windows: list[int | None],
                 bias: bool, qk_norm: bool, head_dim_default: int | None = None) -> Built:
    """Every layer: GQA (sliding window per layer from ``windows``) and one dense MLP
    (``intermediate_size``, ``mlp_bias``, ``hidden_act``)."""
    mlp = MLP(kind="dense", intermediate_size=c.size("intermediate_size"),
              mlp_bias=c.flag("mlp_bias", False), activation=str(c.cfg.get("hidden_act", "silu")))
    attn = {w: gqa(c, hidden, bias=bias, qk_norm=qk_norm, window=w,
                   head_dim_default=head_dim_default) for w in set(windows)}
    layers = [Layer(index=i, attention=attn[windows[i]], mlp=mlp) for i in range(n_layers)]
    return layers, []


def every_layer_windows(c: ConfigFields, n_layers: int) -> list[int | None]:
    """Per-layer windows from ``layer_types``; without it a non-null ``sliding_window`` applies
    to every layer (vLLM passes the model-level ``cache_config.sliding_window`` to each
    ``Attention``)."""
    out = layer_types_windows(c, n_layers)
    if out is not None:
        return out
    window = c.opt_int("sliding_window")
    return [c.size("sliding_window") if window is not None else None] * n_layers


def plain_dense_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """Llama-layout dense layers: GQA attention (q/k/v biases per ``attention_bias``, no q/k
    norms), a gated dense MLP, the windows of ``every_layer_windows``."""
    return dense_layers(c, hidden, n_layers, windows=every_layer_windows(c, n_layers),
                        bias=c.flag("attention_bias", False), qk_norm=False)


def vision_int(vc: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    """A positive integer of a multimodal config's ``vision_config``: the first of ``keys`` it
    states, else ``default`` (the HF config class's, where it has one); a missing one without a
    default, or a value that is no positive integer, is a ``ConfigError`` naming the key."""
    for key in keys:
        v = vc.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(f"config.json field 'vision_config.{key}' must be a positive "
                              f"integer, got {str(v)[:40]!r}",
                              hint=f"fix vision_config.{key} in the config.json")
        return v
    if default is not None:
        return default
    raise ConfigError(f"config.json has no 'vision_config.{keys[0]}' (the vision tower's size)",
                      hint=f"add 'vision_config.{keys[0]}' to the config.json: memprof does not "
                      "guess it")


def sglang_embed_rows(family: str, model_file: str,
                      spans: tuple[tuple[str | None, str | None, str, str], ...]
                      ) -> tuple[Rule, ...]:
    """A family's ``dp_attention_embed`` rows: how SGLang's ``model_file`` builds
    ``embed_tokens`` under DP attention, one span ``(since, until, value, releases read)`` per
    change. value: "replicated" (``VocabParallelEmbedding(..., enable_tp=not
    enable_dp_attention)``: every rank holds the whole table), "attention_tp"
    (``use_attn_tp_group``: split over the rank's attention-TP group, tp / dp ways) or "tp"
    (split over every TP rank, DP attention or not); layers/vocab_parallel_embedding.py gives
    ``enable_tp=False`` a tp_size of 1 and ``use_attn_tp_group`` get_attention_tp_size()."""
    how = {"replicated": "VocabParallelEmbedding(..., enable_tp=not enable_dp_attention)",
           "attention_tp": "VocabParallelEmbedding(..., use_attn_tp_group=...)",
           "tp": "VocabParallelEmbedding split over the TP group"}
    return tuple(
        Rule(name=f"sglang_dp_attention_embed ({family})",
             changes="weights: embed_tokens (DP attention)", since=since, until=until,
             value=value, engine="sglang", applies_to=family,
             introduced_by=f"read in the sglang {since or '0.4.3'} wheel",
             removed_by=f"read in the sglang {until} wheel" if until else "",
             source=f"sglang {read} models/{model_file}: {how[value]}")
        for since, until, value, read in spans)


V0_MLP_KEPT = "kept"
V0_MLP_REBOUND = "rebound"


def v0_gate_up_rows(family: str, model_file: str, mlp_class: str,
                    spans: tuple[tuple[str | None, str | None, str, str], ...]
                    ) -> tuple[Rule, ...]:
    """A family's ``v0_mlp_gate_up`` rows: how its vLLM ``model_file``'s ``mlp_class.forward``
    names the gate_up output, one span ``(since, until, value, releases read)`` per change.
    ``V0_MLP_KEPT``: ``gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up)`` holds
    gate_up [T, 2I] through down_proj; ``V0_MLP_REBOUND``: ``x, _ = self.gate_up_proj(x);
    x = self.act_fn(x)`` frees it once act_fn has made its output. It matters only where the
    forward runs eagerly: V0's profile run (memprof/core/terms/v0_eager_forward.py)."""
    how = {V0_MLP_KEPT: "gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up)",
           V0_MLP_REBOUND: "x, _ = self.gate_up_proj(x); x = self.act_fn(x)"}
    return tuple(
        Rule(name=f"v0_mlp_gate_up ({family})", changes="activation peak: dense MLP stage",
             since=since, until=until, value=value, applies_to=family, generation="v0",
             introduced_by=f"read in the {read.split(',')[0]} wheel",
             removed_by=f"read in the {until} wheel" if until else "",
             source=f"{read} model_executor/models/{model_file} {mlp_class}.forward: "
             f"{how[value]}")
        for since, until, value, read in spans)

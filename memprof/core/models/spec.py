"""A model as memprof sees it: every layer's attention and MLP sizes, the quantisation, the
dtype. Result classes of ``memprof.core.models``; sizes are element counts, not bytes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower


@dataclass(frozen=True, slots=True, kw_only=True)
class StateMixer:
    """A recurrent token mixer in place of attention (a layer of a hybrid model): its kind
    (``gdn`` Gated DeltaNet, ``mamba2``, ``kda`` Kimi Delta Attention; ``none`` for a layer with
    no token mixer at all, Nemotron-H's MLP-only layers), the sizes its weights
    and its per-request state need, and the state dtypes (``""``: the model dtype). The answers
    of each kind are in ``memprof.core.attention.state``."""

    kind: str
    num_heads: int  # value heads (GDN / KDA), SSM heads (Mamba-2)
    num_k_heads: int  # key heads (GDN), B/C groups (Mamba-2), heads (KDA)
    head_k_dim: int  # key head size (GDN / KDA), SSM state size (Mamba-2)
    head_v_dim: int  # value head size (GDN / KDA), SSM head size (Mamba-2)
    conv_kernel: int
    intermediate_size: int = 0  # Mamba-2 d_inner (heads × head size)
    conv_bias: bool = False
    proj_bias: bool = False
    conv_dtype: str = ""
    state_dtype: str = ""
    # the SSM-state dtype vLLM takes from config.json from the releases of
    # ``memprof.core.attention.state.SSM_DTYPE_FROM_CONFIG`` on ("": the family has none)
    config_ssm_dtype: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Attention:
    """One layer's attention, with every size the weights and the KV cache need.

    ``kind`` is ``gqa`` (MHA/GQA/MQA with per-head K and V), ``mla`` (DeepSeek V2/V3 latent) or
    ``dsv4`` (DeepSeek-V4 compressed sparse attention): a key of ``memprof.core.attention.KINDS``,
    whose module answers the kind's questions.
    """

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int  # query/key head size (GQA); MLA: qk_nope + qk_rope; DSv4: 512
    v_head_dim: int
    sliding_window: int | None = None
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    qk_norm_across_heads: bool = False  # one norm over all heads, split by TP
    sinks: bool = False
    # the layer's rotary: "" the config's (rope_theta, rope_scaling), "plain" unscaled RoPE
    # on its own base ``rope_theta`` (Gemma 3's sliding layers: rope_local_base_freq), "none"
    # no rotary at all (Llama 4's NoPE layers; Nemotron-H, Granite-4.0-H and Kimi-Linear's
    # attention); a rank holds one cache per distinct rotary
    rope: str = ""
    rope_theta: float = 0.0
    # chunked local attention (Llama 4 ``attention_chunk_size``): the layer attends within
    # chunks of this many tokens; 0: none
    chunk_size: int = 0
    # MLA
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    # DeepSeek-V3.2 / V4 lightning indexer
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    indexer: bool = False  # the layer has one (V3.2 sparse MLA; DeepSeek-V4 C4 layers)
    # DeepSeek-V4
    compress_ratio: int = 0  # 0 = SWA-only, 4 = C4 (CSA, with indexer), 128 = C128 (HCA)
    o_groups: int = 0
    o_lora_rank: int = 0
    # Qwen3-Next gated attention: q_proj also emits a sigmoid gate per head (``attn_output_gate``)
    output_gate: bool = False
    # a hybrid model's recurrent layer: its mixer replaces attention in this layer, while the
    # fields above still describe the model's attention layers (``memprof.core.attention``'s
    # ``kind_of`` answers for the mixer, and for the model's attention where a question is
    # about the model as a whole)
    mixer: StateMixer | None = None

    @property
    def has_indexer(self) -> bool:
        """Does the layer run a lightning indexer (set by its family's builder)?"""
        return self.indexer


@dataclass(frozen=True, slots=True, kw_only=True)
class MLP:
    """One layer's feed-forward block: ``dense``, ``moe`` or ``none`` (a hybrid model's layer that
    is only a token mixer)."""

    kind: str
    intermediate_size: int = 0  # dense MLP
    num_experts: int = 0
    top_k: int = 0
    moe_intermediate_size: int = 0
    shared_intermediate_size: int = 0  # 0 = no shared expert
    shared_expert_gate: bool = False  # Qwen2-MoE style sigmoid gate on the shared expert
    router_bias: bool = False
    expert_bias: bool = False  # gpt-oss: biases on w13 / w2
    e_score_correction_bias: bool = False  # DeepSeek noaux_tc
    renormalize: bool = False  # the top-k weights renormalised to sum to 1 (norm_topk_prob)
    router_fp32: bool = False  # the gate is an fp32 nn.Linear, not the model dtype
    hash_routed: bool = False  # DeepSeek-V4 hash layers: tid2eid table, no gate bias
    mlp_bias: bool = False
    activation: str = "silu"
    gated: bool = True  # gate and up projections (SwiGLU); False: up only (Nemotron-H relu2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One decoder layer: its index, attention and MLP (``is_mtp``: a speculative MTP layer)."""

    index: int
    attention: Attention
    mlp: MLP
    is_mtp: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantConfig:
    """What the checkpoint's ``quantization_config`` (or ``--quantization``) says."""

    method: str  # fp8, mxfp4, nvfp4, awq, gptq, fp8_per_channel, none
    block: tuple[int, int] | None = None  # fp8 block (128, 128)
    group_size: int = 0  # awq / gptq / nvfp4 / mxfp4 group
    bits: int = 0
    exclude: tuple[str, ...] = ()  # HF module-name patterns left unquantised
    expert_dtype: str | None = None  # DeepSeek-V4: "fp4" experts under an fp8 config
    desc_act: bool = False
    # config | flag | forced (a checkpoint's own method forced off Marlin by its flag: awq)
    source: str = "config"
    # compressed-tensors details (memprof.core.models.quant_config): the declaring format, a
    # static (calibrated) input scale, asymmetric input quantisation, weight zero points, the
    # scale strategy (tensor / channel / group / block) and the scheme's name for reports
    # "" (quant_method is the method) | "compressed-tensors" | "modelopt"
    checkpoint_format: str = ""
    static_input: bool = False
    input_symmetric: bool = True
    zero_point: bool = False
    strategy: str = ""
    scheme: str = ""
    # GPTQ: the checkpoint passes vLLM's gptq_marlin compatibility check (sym and desc_act
    # stated, (bits, sym) in its type map, a Marlin group size); whether Marlin runs also needs
    # a CUDA sm80+ GPU (memprof.core.weights.formats.gptq)
    marlin: bool = False
    double_quant: bool = False  # bitsandbytes 4-bit bnb_4bit_use_double_quant
    # GGUF: (tensor kind or "*", GGML type) pairs (memprof.core.weights.gguf); ``scheme`` then
    # holds the type of the one module a weight builder asked about
    gguf_types: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftHead:
    """An EAGLE / EAGLE-3 draft head as vLLM builds it from the head's own ``config.json``
    (``memprof.core.models.draft_head`` reads it; the weights, KV layers and proposer buffers it
    adds are ``memprof.core.terms.draft_head``'s). Sizes are element counts."""

    name: str
    source: str
    method: str  # "eagle" | "eagle3" (vLLM's SpeculativeConfig.method)
    architecture: str  # the vLLM class that builds it (EagleLlamaForCausalLM, ...)
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int  # the head's config vocab_size (its embed_tokens)
    draft_vocab_size: int  # its lm_head's rows (EAGLE-3; the vocabulary for EAGLE)
    target_hidden_size: int  # the width of each target hidden state the fc reads
    fc_inputs: int  # target hidden states concatenated into the fc (EAGLE-3; 0: none)
    norm_before_fc: bool = False  # EAGLE-3 input_norm over the fc's input
    # EAGLE-3 layers: the hidden state's norm is the residual (llama_eagle3.py
    # _norm_before_residual), not the input (speculators configs default to True)
    norm_before_residual: bool = False
    fc_norm: bool = False  # EAGLE-3 one RMSNorm per target hidden state
    qk_norm: bool = False  # Qwen3 layers: q_norm / k_norm of head_dim
    attention_bias: bool = False

    def kv_layers(self, first_index: int) -> tuple[Layer, ...]:
        """The head's decoder layers as the KV cache sees them (their attention joins the
        pool; named after the target's last layer, ``start_layer_id``)."""
        attn = Attention(kind="gqa", num_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
                         head_dim=self.head_dim, v_head_dim=self.head_dim,
                         qkv_bias=self.attention_bias, qk_norm=self.qk_norm)
        mlp = MLP(kind="dense", intermediate_size=self.intermediate_size)
        return tuple(Layer(index=first_index + i, attention=attn, mlp=mlp, is_mtp=True)
                     for i in range(self.num_layers))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A model: sizes from config.json (element counts, not bytes), every layer, the checkpoint
    dtype and quantisation, and where the config came from."""

    name: str
    family: str  # the name of its row in memprof.core.models.families.ROWS
    architecture: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype: str  # torch_dtype of the checkpoint: bfloat16 / float16 / float32
    max_position_embeddings: int | None  # None: the config states none (--max-model-len needed)
    layers: tuple[Layer, ...]
    mtp_layers: tuple[Layer, ...] = ()
    quant: QuantConfig | None = None
    hc_mult: int = 0  # DeepSeek-V4 hyper-connections
    num_hash_layers: int = 0
    vision: VisionTower | None = None  # a multimodal model's vision tower (models/multimodal.py)
    # an EAGLE / EAGLE-3 draft head the deployment names (--speculative-model; set by the
    # estimate from the deployment, memprof.core.models.draft_head)
    draft_head: DraftHead | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the hash of the compared fields, computed once: a spec is part of the value keys of the
    # estimator's caches (memprof.core.kvcache, weights.rank, terms.load_rounding), and hashing
    # every layer again at each lookup cost more than the work those caches save
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    # ``is_moe`` and ``has_state_mixer``, read from the layers once (every estimate asks both)
    _moe: bool = field(default=False, init=False, repr=False, compare=False)
    _state_mixer: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(
            getattr(self, f.name) for f in fields(self) if f.compare)))
        object.__setattr__(self, "_moe", any(x.mlp.kind == "moe" for x in self.layers))
        object.__setattr__(self, "_state_mixer", any(
            x.attention.mixer and x.attention.mixer.kind != "none" for x in self.layers))

    def __hash__(self) -> int:
        return self._hash

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def is_moe(self) -> bool:
        """Whether a layer routes to experts."""
        return self._moe

    @property
    def has_state_mixer(self) -> bool:
        """Whether a layer has a state mixer (Mamba, linear attention …) beside attention."""
        return self._state_mixer

    @property
    def num_experts(self) -> int:
        return max((layer.mlp.num_experts for layer in self.layers), default=0)


def layer_kinds(layers: tuple[Layer, ...] | list[Layer]) -> list[tuple[Layer, int]]:
    """Layers grouped by kind (attention, MLP, MTP role): (first layer of the kind, count), in
    order of first appearance. Work that depends only on a layer's kind loops over these, so it
    grows with the kinds, not the count (builders share one Attention/MLP object per kind, so
    the identity check answers almost every layer without hashing the dataclasses)."""
    by_id: dict[tuple[int, int, bool], list[object]] = {}
    kinds: dict[tuple[object, ...], list[object]] = {}
    for layer in layers:
        ik = (id(layer.attention), id(layer.mlp), layer.is_mtp)
        entry = by_id.get(ik)
        if entry is None:
            key = (layer.attention, layer.mlp, layer.is_mtp)
            entry = kinds.get(key)
            if entry is None:
                entry = kinds[key] = [layer, 0]
            by_id[ik] = entry
        entry[1] += 1  # type: ignore[operator]
    return [(e[0], e[1]) for e in kinds.values()]  # type: ignore[misc]

"""Nemotron-H (``NemotronHForCausalLM``, ``model_type`` ``nemotron_h``; Nemotron-H-8B/47B/56B,
NVIDIA-Nemotron-Nano-9B/12B-v2, NVIDIA-Nemotron-3-Nano-30B-A3B): one block per layer, chosen by
``hybrid_override_pattern`` — ``M`` a Mamba-2 mixer, ``*`` GQA attention without rotary
embedding, ``-`` a non-gated squared-ReLU MLP, ``E`` a non-gated squared-ReLU MoE — each with a
single RMSNorm. The latent MoE (``moe_latent_size``) is refused (not modelled).

Source: vLLM ``vllm/model_executor/models/nemotron_h.py`` (v0.11.0): ``NemotronHModel``
builds ``ALL_DECODER_LAYER_TYPES[config.hybrid_override_pattern[layer_idx]]``;
``NemotronHMambaDecoderLayer`` — ``MambaMixer2(ssm_state_size, conv_kernel_size=conv_kernel,
intermediate_size=mamba_num_heads × mamba_head_dim, use_conv_bias, use_bias, n_groups,
num_heads=mamba_num_heads, head_dim=mamba_head_dim)`` and one ``norm``;
``NemotronHAttention`` — ``QKVParallelLinear(bias=False)`` of ``head_dim`` (or
``hidden // heads``), ``o_proj`` without bias, no ``rotary_emb``; ``NemotronHMLP`` —
``up_proj`` (column) and ``down_proj`` (row) of ``intermediate_size`` (the ``mlp_index``-th
entry when it is a list), ``bias=mlp_bias``, ``ReLUSquaredActivation``; ``NemotronHMoE``
(v0.11.2) — ``gate = ReplicatedLinear(hidden, n_routed_experts, params_dtype=torch.float32,
quant_config=None)`` with an fp32 ``e_score_correction_bias``, ``SharedFusedMoE`` of
``moe_intermediate_size`` with ``is_act_and_mul=False`` (up and down projections only), shared
experts a ``NemotronHMLP`` of ``moe_shared_expert_intermediate_size × n_shared_experts``. The
state shapes are
``mamba2_state_shape`` of those sizes; the SSM-state dtype follows the config's
``mamba_ssm_cache_dtype`` from vLLM 0.13.0 (``memprof.core.attention.state``).
"""

from __future__ import annotations

from dataclasses import replace

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import Built, Family, gqa, lora_refused, missing, top_k
from memprof.core.models.spec import MLP, Layer, StateMixer

_KNOWN = {"M": "Mamba-2", "*": "attention", "-": "MLP", "E": "MoE"}


def _pattern(c: ConfigFields, n_layers: int) -> str:
    pattern = c.cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str):
        raise missing(c, "hybrid_override_pattern", "it says which block each layer is")
    if len(pattern) != n_layers:
        raise ConfigError(f"hybrid_override_pattern has {len(pattern)} blocks but "
                          f"num_hidden_layers is {n_layers}", hint="fix the config.json")
    bad = sorted(set(pattern) - set(_KNOWN))
    if bad:
        raise ConfigError(
            f"hybrid_override_pattern has blocks memprof does not model ({', '.join(bad)})",
            hint="memprof reads M (Mamba-2), * (attention), - (MLP) and E (MoE) blocks")
    return pattern


def _moe(c: ConfigFields) -> MLP:
    """The ``E`` blocks' MoE (``NemotronHMoE``)."""
    if c.cfg.get("moe_latent_size") is not None:
        raise ConfigError("moe_latent_size: Nemotron's latent MoE is not modelled",
                          hint="memprof reads the MoE of NVIDIA-Nemotron-3-Nano (no latent size)")
    for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                "n_shared_experts", "moe_shared_expert_intermediate_size"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "the pattern has MoE (E) blocks")
    n_exp = c.size("n_routed_experts")
    return MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
               moe_intermediate_size=c.size("moe_intermediate_size"),
               shared_intermediate_size=(c.num("moe_shared_expert_intermediate_size")
                                         * c.num("n_shared_experts")),
               e_score_correction_bias=True, router_fp32=True, gated=False,
               activation="relu2")


def _nemotron_h_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    pattern = _pattern(c, n_layers)
    attn = replace(gqa(c, hidden, bias=False, qk_norm=False, kv_heads_required=True), rope="none")
    for key in ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size",
                "conv_kernel"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it sizes the Mamba-2 layers and their state")
    heads, head = c.size("mamba_num_heads"), c.size("mamba_head_dim")
    ssm_dtype = str(c.cfg.get("mamba_ssm_cache_dtype") or "float16")
    if ssm_dtype not in ("float16", "bfloat16", "float32"):
        raise ConfigError(f"mamba_ssm_cache_dtype {ssm_dtype[:40]!r} is not known",
                          hint="float16, bfloat16 or float32")
    mamba = replace(attn, mixer=StateMixer(
        kind="mamba2", num_heads=heads, num_k_heads=c.size("n_groups"),
        head_k_dim=c.size("ssm_state_size"), head_v_dim=head, conv_kernel=c.size("conv_kernel"),
        intermediate_size=heads * head, conv_bias=c.flag("use_conv_bias", True),
        proj_bias=c.flag("use_bias", False), config_ssm_dtype=ssm_dtype))
    mlp_only = replace(attn, mixer=StateMixer(kind="none", num_heads=0, num_k_heads=0,
                                              head_k_dim=0, head_v_dim=0, conv_kernel=0))
    sizes = c.cfg.get("intermediate_size")
    if not isinstance(sizes, list):
        sizes = [c.size("intermediate_size")]
    if not sizes or not all(isinstance(i, int) and i > 0 for i in sizes):
        raise ConfigError("intermediate_size must be a positive integer or a list of them",
                          hint="fix the config.json")
    mlps = {i: MLP(kind="dense", intermediate_size=i, gated=False, activation="relu2",
                   mlp_bias=c.flag("mlp_bias", False)) for i in sizes}
    none = MLP(kind="none")
    moe = _moe(c) if "E" in pattern else none
    layers, mlp_index = [], -1
    for i, block in enumerate(pattern):
        if block == "M":
            layers.append(Layer(index=i, attention=mamba, mlp=none))
        elif block == "*":
            layers.append(Layer(index=i, attention=attn, mlp=none))
        elif block == "E":
            layers.append(Layer(index=i, attention=mlp_only, mlp=moe))
        else:
            mlp_index += 1
            size = sizes[0] if len(sizes) == 1 else sizes[min(mlp_index, len(sizes) - 1)]
            layers.append(Layer(index=i, attention=mlp_only, mlp=mlps[size]))
    return layers, []


# vLLM's LoRA support of NemotronHForCausalLM: SupportsLoRA in every release read (0.9.2 on), with
# LoRA on the Mamba-2 mixers' in_proj / out_proj (LinearBase): refused until memprof models them
LORA = lora_refused("nemotron_h", "NemotronHForCausalLM", "0.9.2",
                    "0.9.2 / 0.10.2 / 0.12.0 / 0.20.0 / 0.33.0 nemotron_h.py",
                    introduced_by="read first in 0.9.2 (0.9.0 and 0.9.1 not read)",
                    unmodelled="Mamba-2 mixers (in_proj, out_proj)")

FAMILY = Family(
    lora=LORA,
    name="nemotron_h", model_types=("nemotron_h",), architectures=("NemotronHForCausalLM",),
    build=_nemotron_h_layers, attention="gqa", moe=True,
    source="vLLM model_executor/models/nemotron_h.py (v0.11.0; MoE blocks v0.11.2)",
)

"""Mixtral (``MixtralForCausalLM``): GQA (no biases, no q/k norms) and a top-k MoE on every
layer, no shared expert, no router bias.

Sources: vLLM ``vllm/model_executor/models/mixtral.py`` (vllm-project/vllm, read at commit
005df92d): ``MixtralAttention`` — ``QKVParallelLinear(bias=False)``, ``RowParallelLinear``
o_proj, ``head_dim = hidden_size // num_heads``, ``get_rope(rotary_dim=head_dim)``, the config's
``sliding_window`` on every layer; ``MixtralMoE`` — ``ReplicatedLinear(hidden_size,
num_local_experts, bias=False)`` gate, experts ``ws [E, 2·I/tp, H]`` and ``w2s [E, H, I/tp]``
with ``I = intermediate_size``, ``top_k = num_experts_per_tok``, ``renormalize=True`` (0.10.2
mixtral.py ``FusedMoE``). transformers
``models/mixtral/configuration_mixtral.py``: ``MixtralConfig`` defaults ``num_key_value_heads=8``
(not heads, so the field is required here) and ``sliding_window=None``.
"""

from __future__ import annotations

from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    LoraSupport,
    gqa,
    layer_types_windows,
    top_k,
)
from memprof.core.models.spec import MLP, Layer
from memprof.core.versions import Rule

# vLLM's LoRA support of MixtralForCausalLM: embed_tokens and lm_head are LoRA modules and the
# router (``gate``, a ReplicatedLinear) is a LoRA linear; the experts (FusedMoE, no LinearBase)
# carry none until FusedMoEWithLoRA (lora/layers/fused_moe.py, first released in 0.11.1: 0.11.0
# has no such file); 0.12.0 drops lora_extra_vocab_size
LORA: tuple[Rule, ...] = (
    Rule(name="mixtral_lora", changes="LoRA: extra vocabulary rows, expert LoRA",
         since="0.7.0", until="0.11.1", value=LoraSupport(extra_vocab=True, embeddings=True),
         introduced_by="before 0.7.0",
         removed_by="MoE LoRA (FusedMoEWithLoRA, first released in 0.11.1)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.8.2 / 0.11.0 model_executor/models/mixtral.py MixtralModel.__init__, "
         "MixtralForCausalLM (embedding_modules); lora/utils.py get_supported_lora_modules "
         "(LinearBase only)", applies_to="mixtral"),
    Rule(name="mixtral_lora", changes="LoRA: extra vocabulary rows, expert LoRA",
         since="0.11.1", until="0.12.0",
         value=LoraSupport(extra_vocab=True, embeddings=True, experts=True),
         introduced_by="MoE LoRA (FusedMoEWithLoRA, first released in 0.11.1)",
         removed_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         source="0.11.1 lora/layers/fused_moe.py FusedMoEWithLoRA.can_replace_layer "
         "(isinstance FusedMoE), lora/utils.py get_supported_lora_modules (FusedMoE)",
         applies_to="mixtral"),
    Rule(name="mixtral_lora", changes="LoRA: extra vocabulary rows, expert LoRA",
         since="0.12.0", until=None,
         value=LoraSupport(extra_vocab=False, embeddings=True, experts=True),
         introduced_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         source="0.12.0 / 0.33.0 lora/layers/fused_moe.py, lora/utils.py _all_lora_classes",
         applies_to="mixtral"),
)


def _mixtral_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    windows = layer_types_windows(c, n_layers)
    if windows is None:  # MixtralConfig: sliding_window (None by default) on every layer
        window = c.opt_int("sliding_window")
        windows = [c.size("sliding_window") if window is not None else None] * n_layers
    attn = {w: gqa(c, hidden, bias=False, qk_norm=False, window=w, kv_heads_required=True)
            for w in set(windows)}
    n_exp = c.size("num_local_experts")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=c.size("intermediate_size"),
              activation=str(c.cfg.get("hidden_act", "silu")), renormalize=True)
    return [Layer(index=i, attention=attn[windows[i]], mlp=moe) for i in range(n_layers)], []


FAMILY = Family(name="mixtral", model_types=("mixtral",), architectures=("MixtralForCausalLM",),
                build=_mixtral_layers, attention="gqa", moe=True, lora=LORA,
                source="vLLM model_executor/models/mixtral.py (read at 005df92d)")

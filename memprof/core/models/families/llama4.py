"""Llama 4 (``Llama4ForConditionalGeneration``: Scout 17B-16E, Maverick 17B-128E; text-only
``Llama4ForCausalLM`` checkpoints as the ``llama4_text`` row, without the tower): GQA with
chunked local attention on the RoPE layers and full attention on the NoPE layers, MoE with one
shared expert on every ``interleave_moe_layer_step``-th layer (dense MLPs of
``intermediate_size_mlp`` between), untied ``lm_head``, and the Llama 4 vision tower with its
pixel-shuffle adapter and projector.

Sources, vLLM 0.12.0 (read in the wheel):

- ``model_executor/models/llama4.py``: ``Llama4Attention`` (``nope = no_rope_layers[i] == 0``:
  no ``rotary_emb`` and plain ``Attention``; a RoPE layer runs ``ChunkedLocalAttention`` with
  ``attention_chunk_size``; ``qk_norm`` is an ``RMSNorm(head_dim, has_weight=False)``, no
  parameters), ``Llama4DecoderLayer`` (MoE when ``(i + 1) % interleave_moe_layer_step == 0``,
  else ``LlamaMLP(intermediate_size_mlp)``), ``Llama4MoE`` (``router``: ``ReplicatedLinear``,
  no bias, unquantised; ``shared_expert``: ``LlamaMLP(intermediate_size)``; ``SharedFusedMoE``
  of ``num_local_experts`` experts of ``intermediate_size``).
- ``mllama4.py``: ``Llama4ForConditionalGeneration.__init__`` builds ``Llama4VisionModel`` and
  ``Llama4MultiModalProjector`` with ``quant_config=None`` on every rank (when the image limit
  is not 0): ``Llama4UnfoldConvolution`` (``ColumnParallelLinear(C·P², H)``, no bias),
  ``class_embedding`` [H], ``positional_embedding_vlm`` [(S/P)² + 1, H], ``layernorm_pre`` /
  ``layernorm_post``; per encoder layer ``QKVParallelLinear`` and ``RowParallelLinear``
  ``o_proj`` with biases, ``Llama4VisionMLP`` fc1 (column) / fc2 (row) with biases, two
  ``nn.LayerNorm``; ``vision_adapter`` (``Llama4VisionPixelShuffleMLP``: fc1
  ``intermediate_size → projector_input_dim``, fc2 ``projector_input_dim →
  projector_output_dim``, biases per ``multi_modal_projector_bias``); projector ``linear_1``
  (``ColumnParallelLinear(vision_output_dim, text hidden)``, no bias). Default
  ``mm_encoder_tp_mode`` shards them by TP.
- Fields a checkpoint leaves out take transformers 4.51 ``Llama4TextConfig``'s defaults:
  ``no_rope_layers`` empty → ``[int((i + 1) % no_rope_layer_interval != 0)]`` with interval 4
  (every 4th layer NoPE), ``interleave_moe_layer_step`` 1, ``attention_chunk_size`` 8192,
  ``head_dim`` 128.

Not modelled: the multimodal profile run (dummy images, the encoder cache), the vision
encoder's own 2-D rotary buffer (``Llama4VisionRotaryEmbedding``, a few hundred KiB), and the
tower's absence under ``--limit-mm-per-prompt image=0``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    Family,
    TowerSink,
    gqa,
    lift_text_config,
    top_k,
    vision_int,
)
from memprof.core.models.spec import MLP, Layer

# transformers 4.51 Llama4TextConfig.__init__ defaults for what memprof reads
NO_ROPE_LAYER_INTERVAL = 4
LLAMA4_DEFAULTS: dict[str, Any] = {
    "interleave_moe_layer_step": 1, "attention_chunk_size": 8192, "head_dim": 128,
    "no_rope_layer_interval": NO_ROPE_LAYER_INTERVAL,
}
MULTIMODAL_NOTE = ("vision tower + projector weights counted (omitted by vLLM under "
                   "--limit-mm-per-prompt image=0); the multimodal profile run (dummy images, "
                   "encoder cache) is not modelled")


def _view(cfg: dict[str, Any]) -> dict[str, Any]:
    out = lift_text_config(cfg)
    for key, value in LLAMA4_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    if not out.get("no_rope_layers"):  # HF fills an empty list from the interval
        n, every = out.get("num_hidden_layers"), out.get("no_rope_layer_interval")
        if isinstance(n, int) and isinstance(every, int) and every > 0:
            out["no_rope_layers"] = [int((i + 1) % every != 0) for i in range(n)]
    return out


def _llama4_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    nope = c.cfg.get("no_rope_layers")
    if (not isinstance(nope, list) or len(nope) < n_layers
            or any(x not in (0, 1) or isinstance(x, bool) for x in nope[:n_layers])):
        raise ConfigError("config.json no_rope_layers must list 0 or 1 for each of the "
                          f"{n_layers} layers", hint="fix no_rope_layers in the config.json")
    chunk = c.size("attention_chunk_size")
    step = c.size("interleave_moe_layer_step")
    base = gqa(c, hidden, bias=c.flag("attention_bias", False), qk_norm=False)
    rope_attn = replace(base, chunk_size=chunk)
    nope_attn = replace(base, rope="none")
    n_exp = c.size("num_local_experts")
    inter = c.size("intermediate_size")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=inter, shared_intermediate_size=inter)
    dense = MLP(kind="dense", intermediate_size=c.size("intermediate_size_mlp"))
    layers = [Layer(index=i, attention=nope_attn if nope[i] == 0 else rope_attn,
                    mlp=moe if (i + 1) % step == 0 else dense) for i in range(n_layers)]
    return layers, []


def vision_tower(w: TowerSink, raw: dict[str, Any]) -> None:
    """The Llama 4 vision tower, adapter and projector as vLLM builds them on each rank
    (unquantised, TP-sharded; module docstring): per encoder layer ``3H·H + 3H`` +
    ``H·H + H`` + ``I·H + I`` + ``H·I + H`` + ``4H``; patch ``C·P²·H``, class ``H``, positions
    ``((S/P)² + 1)·H``, two LayerNorms ``4H``; adapter ``I·D_in + D_in·D_out``; projector
    ``D_vis·D_text``."""
    vc = raw.get("vision_config")
    if not isinstance(vc, dict):
        raise ConfigError("config.json of this Llama 4 model has no vision_config",
                          hint="pass the model's full config.json")
    h, inter = vision_int(vc, "hidden_size"), vision_int(vc, "intermediate_size")
    n_layers, heads = vision_int(vc, "num_hidden_layers"), vision_int(vc, "num_attention_heads")
    patch, image = vision_int(vc, "patch_size"), vision_int(vc, "image_size")
    channels = vision_int(vc, "num_channels", default=3)  # Llama4VisionConfig's default
    d_in, d_out = vision_int(vc, "projector_input_dim"), vision_int(vc, "projector_output_dim")
    d_vis = vision_int(vc, "vision_output_dim")
    mm_bias = bool(vc.get("multi_modal_projector_bias", False))
    if heads % w.tp:
        raise ConfigError(f"the vision tower's {heads} heads do not split over TP {w.tp}",
                          hint="vLLM divides them evenly; use a TP size that divides them")
    g = "vision tower"
    p = "vision_model."
    w.linear(p + "patch_embedding.linear", g, h, channels * patch * patch, shard="col",
             quantise=False)
    w.vector(p + "class_embedding", g, h)
    w.linear(p + "positional_embedding_vlm", g, (image // patch) ** 2 + 1, h, shard="rep",
             quantise=False)
    for norm in ("layernorm_pre", "layernorm_post"):
        w.vector(p + norm, g, h)
        w.vector(p + norm + ".bias", g, h)
    for i in range(n_layers):
        q = f"{p}model.layers.{i}."
        w.linear(q + "self_attn.qkv_proj", g, 3 * h, h, shard="col", bias=True, quantise=False)
        w.linear(q + "self_attn.o_proj", g, h, h, shard="row", bias=True, quantise=False)
        w.linear(q + "mlp.fc1", g, inter, h, shard="col", bias=True, quantise=False)
        w.linear(q + "mlp.fc2", g, h, inter, shard="row", bias=True, quantise=False)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            w.vector(q + norm, g, h)
            w.vector(q + norm + ".bias", g, h)
    a = p + "vision_adapter.mlp."
    w.linear(a + "fc1", g, d_in, inter, shard="col", bias=mm_bias, quantise=False)
    w.linear(a + "fc2", g, d_out, d_in, shard="row", bias=mm_bias, quantise=False)
    w.linear("multi_modal_projector.linear_1", "mm projector", vision_int(raw, "hidden_size"),
             d_vis, shard="col", quantise=False)


TEXT = Family(
    name="llama4_text", model_types=("llama4_text",), architectures=("Llama4ForCausalLM",),
    build=_llama4_layers, attention="gqa", moe=True, config_view=_view,
    source="vLLM model_executor/models/llama4.py Llama4ForCausalLM (0.12.0)",
)
FAMILY = Family(
    name="llama4", model_types=("llama4",),
    architectures=("Llama4ForConditionalGeneration",),
    build=_llama4_layers, attention="gqa", moe=True, config_view=_view, towers=vision_tower,
    note=MULTIMODAL_NOTE,
    source="vLLM model_executor/models/llama4.py + mllama4.py (0.12.0)",
)

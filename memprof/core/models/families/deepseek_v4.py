"""DeepSeek-V4 (``DeepseekV4ForCausalLM``): compressed sparse attention (the ``dsv4`` kind:
SWA-only, C4 with its indexer, C128), hash-routed then scored MoE, hyper-connections
(``hc_mult``), one MTP block.

Family code outside ``memprof.core.models`` (its row's ``modules``): the attention kind
(``memprof/core/attention/dsv4.py``), the sparse-attention scratch
(``memprof/core/scratch/dsv4.py``), the decode kernel and its validation
(``memprof/kernels/dsv4_decode.py``, ``memprof/validation/dsv4.py`` and its row and result
``memprof/validation/dsv4_result.py``): they need the deployment or a GPU, which a
config-to-spec module below them cannot import. Its init buffers are the
generic term ``memprof/core/terms/init_buffers.py``, which the ``dsv4`` kind turns on.

Sources: HF deepseek-ai/DeepSeek-V4 config.json; the DeepSeek-V4 checkpoint's tensors
(model.safetensors.index.json) (checkpoint-verified); vLLM deepseek_v4.py @023da1fc.
"""

from __future__ import annotations

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import Built, Family, missing, top_k, v2_listed
from memprof.core.models.spec import MLP, Attention, Layer


def _deepseek_v4_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """DeepSeek-V4: per-layer ``compress_ratios`` (L+1 entries, the last for the MTP block).

    Layer types and sizes follow HF deepseek-ai/DeepSeek-V4 config.json; the DeepSeek-V4
    checkpoint's tensors (model.safetensors.index.json) (checkpoint-verified).
    """
    ratios = c.cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n_layers:
        raise ConfigError(
            "DeepSeek-V4 config needs compress_ratios with one entry per layer",
            hint="use the model's original config.json",
        )
    for key in ("o_groups", "o_lora_rank", "q_lora_rank", "index_n_heads", "index_head_dim",
                "sliding_window", "head_dim", "qk_rope_head_dim", "index_topk"):
        c.size(key)
    c.num("hc_mult")
    if c.cfg.get("n_shared_experts") is None:
        raise missing(c, "n_shared_experts", "it sizes the shared experts")
    heads = c.size("num_attention_heads")
    n_exp = c.size("n_routed_experts")
    k = top_k(c, n_exp, "num_experts_per_tok")
    n_hash = c.num("num_hash_layers", 0)

    def attn(ratio: int) -> Attention:
        if ratio not in (0, 1, 4, 128):
            raise ConfigError(f"unknown DeepSeek-V4 compress ratio {ratio}", hint="0, 4 or 128")
        return Attention(
            kind="dsv4", num_heads=heads, num_kv_heads=1, head_dim=c.num("head_dim"),
            v_head_dim=c.num("head_dim"), q_lora_rank=c.num("q_lora_rank"),
            qk_rope_head_dim=c.num("qk_rope_head_dim"), sliding_window=c.num("sliding_window"),
            compress_ratio=0 if ratio <= 1 else ratio, o_groups=c.num("o_groups"),
            o_lora_rank=c.num("o_lora_rank"), sinks=True,
            index_n_heads=c.num("index_n_heads"), index_head_dim=c.num("index_head_dim"),
            index_topk=c.num("index_topk"),
            indexer=ratio == 4 and c.num("index_n_heads") > 0,
        )

    moe_i = c.size("moe_intermediate_size")

    def mlp(hash_routed: bool) -> MLP:
        return MLP(kind="moe", num_experts=n_exp,
                   top_k=k, moe_intermediate_size=moe_i,
                   shared_intermediate_size=moe_i * c.num("n_shared_experts"),
                   e_score_correction_bias=not hash_routed, hash_routed=hash_routed)

    attns = {r: attn(int(r)) for r in set(ratios[:n_layers])}
    mlps = {h: mlp(h) for h in (True, False)}
    layers = [Layer(index=i, attention=attns[ratios[i]], mlp=mlps[i < n_hash])
              for i in range(n_layers)]
    mtp = [Layer(index=n_layers + k, attention=attn(0), mlp=mlp(False), is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp


def _spec_extras(c: ConfigFields) -> dict[str, int]:
    """Hyper-connections and hash-routed layers (``ModelSpec.hc_mult``, ``num_hash_layers``)."""
    return {"hc_mult": c.num("hc_mult", 0), "num_hash_layers": c.num("num_hash_layers", 0)}


FAMILY = Family(
    name="deepseek_v4", model_types=("deepseek_v4",), architectures=("DeepseekV4ForCausalLM",),
    build=_deepseek_v4_layers, attention="dsv4", moe=True, mtp=True, spec_extras=_spec_extras,
    mtp_hc_block=True, mxfp4_experts=True,
    v2_runner_listed=(v2_listed("deepseek_v4", "0.28.0", "0.29.0", ("DeepseekV4ForCausalLM",),
                                "0.28.0"),),
    modules=("memprof/core/attention/dsv4.py", "memprof/core/scratch/dsv4.py",
             "memprof/kernels/dsv4_decode.py", "memprof/validation/dsv4.py",
             "memprof/validation/dsv4_result.py"),
    aliases=("dsv4",),
    source="vLLM model_executor/models/deepseek_v4.py @023da1fc")

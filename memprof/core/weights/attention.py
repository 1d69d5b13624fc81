"""Attention weights of one layer, sharded as vLLM shards them: each attention kind lists its
tensors (``memprof.core.attention``, ``AttentionKind.weights``) into this builder, which runs
them with ``dep.attn_tp`` ranks and holds MLA's absorbed decode matrices."""

from __future__ import annotations

from memprof.core.attention import kind_of
from memprof.core.models import Attention, Layer
from memprof.core.weights.formats import Param
from memprof.core.weights.mla_absorption import absorbed_params
from memprof.core.weights.shard import Shard


class AttentionWeights(Shard):
    """The attention block of a layer."""

    def attention(self, layer: Layer, p: str) -> None:
        """Attention runs with ``dep.attn_tp`` ranks (SGLang DP attention: tp / dp), each shard
        held by ``tp / attn_tp`` DP groups."""
        saved = (self.tp, self.copies)
        self.tp = self.dep.attn_tp
        self.copies = saved[1] * (saved[0] // self.tp)
        try:
            self._attention(layer, p)
        finally:
            self.tp, self.copies = saved

    def _attention(self, layer: Layer, p: str) -> None:
        kind_of(layer.attention).weights(self, layer, p)

    def absorbed_latent(self, a: Attention, p: str, group: str) -> None:
        """The MLA backend's absorbed decode matrices: vLLM 0.7.x's matrix absorption
        (``absorbed_params``), or later ``W_UK_T`` / ``W_UV`` — views of one kv_b_proj copy
        dequantised to the model dtype, free when kv_b_proj is already bf16
        (``MLACommonImpl.process_weights_after_loading``)."""
        heads_local = a.num_heads // self.tp
        h = self.spec.hidden_size
        kvb_quant = self.quantised(p + "self_attn.kv_b_proj")
        absorbed_07 = absorbed_params(a, heads_local, h, kvb_quant, self.dtype,
                                      self.dep.engine_version)
        if absorbed_07 is not None:
            self.add(p + "self_attn.mla_attn.absorbed", group, absorbed_07, replicas=self.copies,
                     formula=" + ".join(f"{x.name} {'×'.join(map(str, x.shape))} {x.dtype}"
                                        for x in absorbed_07)
                     + f" (vLLM {self.dep.engine_version} matrix absorption)")
        elif kvb_quant is not None:
            absorbed = (Param("W_UK_T+W_UV", (heads_local, a.kv_lora_rank,
                                              a.qk_nope_head_dim + a.v_head_dim), self.dtype),)
            self.add(p + "self_attn.mla_attn.W_UK_T+W_UV", group, absorbed,
                     replicas=self.copies,
                     formula=f"{heads_local}×{a.kv_lora_rank}×({a.qk_nope_head_dim}+"
                     f"{a.v_head_dim})×{self.b}B (kv_b_proj dequantised for absorbed decode)")

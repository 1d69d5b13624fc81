"""A multimodal model's vision tower on one rank, as vLLM shards it: one writer for every
vision-language family, reading the ``VisionTower`` its row's reader returns
(``memprof/core/models/multimodal.py``; the family's module cites its vLLM file).

vLLM builds the tower on every rank of the deployment — on each PP stage too: the wrapper
model's ``__init__`` builds it with no pipeline check — unless a row of the tower's ``skipped``
(``TOWER_SKIPPED`` for the wrappers that test ``--limit-mm-per-prompt`` themselves: vLLM 0.11.0
``qwen2_5_vl.py`` / ``qwen3_vl.py`` / ``mllama4.py`` ``__init__``) leaves it out: when every
modality is limited to 0, and from 0.33.0 on the PP stages after the first. Its linears shard
over TP as the language model's do (``QKVParallelLinear`` / ``MergedColumnParallelLinear`` /
``ColumnParallelLinear`` split the output, ``RowParallelLinear`` the input, its bias kept
whole); the norms and the replicated embeddings stay whole. With ``--mm-encoder-tp-mode data``
(0.10.2+, the families that honour it) every tower linear is built with ``disable_tp``: the
whole tower on every rank. Stored in the model dtype unless the tower says its linears follow
the checkpoint's quantisation (an fp8/AWQ ``--quantization`` of another tower is not modelled:
it is charged at the model dtype). Another engine's reading of the tower goes through the same
writer: ``Engine.vision_tower`` gives the tower as that engine builds it (SGLang's, by release:
``memprof/core/engines/sglang_vlm.py``), ``memprof/core/weights/rank.py`` writes it.
"""

from __future__ import annotations

from dataclasses import replace

from memprof.base.errors import LayoutError
from memprof.core.models.multimodal import DEFAULT_LIMIT, TOWER_SKIPPED, VisionTower, mm_limits
from memprof.core.versions import value_at
from memprof.core.weights.formats import Param
from memprof.core.weights.shard import Shard

GROUP = "vision tower"
__all__ = ["GROUP", "TOWER_SKIPPED", "first_stage_only", "tower_built", "tower_params",
           "vision_tower"]


def tower_built(tower: VisionTower, limit_text: str | None, version: str | None = None,
                pp_stage: int = 0) -> bool:
    """Does vLLM build the tower on this PP stage at ``version`` (its ``skipped`` rows)?"""
    skipped = value_at(tower.skipped, version, ())
    assert isinstance(skipped, tuple)
    if "later stages" in skipped and pp_stage > 0:
        return False
    if "no modality" not in skipped:
        return True
    limits = mm_limits(limit_text, tower.modalities)
    return any(limits.get(m, DEFAULT_LIMIT) > 0 for m in tower.modalities)


def first_stage_only(tower: VisionTower, version: str | None) -> bool:
    """Is the tower on the first PP stage only at ``version``?"""
    skipped = value_at(tower.skipped, version, ())
    return isinstance(skipped, tuple) and "later stages" in skipped


def _check_divisible(t: VisionTower, tp: int) -> None:
    for what, n in (("num_heads", t.heads), ("intermediate_size", t.intermediate),
                    ("hidden_size", t.hidden)):
        if n % tp:
            raise LayoutError(
                f"the vision tower's {what} ({n}) is not divisible by tensor parallel size {tp}",
                hint="vLLM's parallel linears assert it (dist_utils.divide); use a TP size "
                "that divides it")


def vision_tower(sh: Shard, t: VisionTower, *, in_order: bool = False) -> None:
    """Append the tower's tensors on this rank to ``sh.out`` (``in_order``: one tensor per
    block, in construction order, instead of the first block's tensors counted ``depth``
    times)."""
    # disable_tp (or a tower of plain nn.Linear layers): whole on every rank
    data = (sh.dep.mm_encoder_tp_mode == "data" and t.data_mode) or t.whole
    tp = sh.tp
    if not data:
        _check_divisible(t, tp)
    pp = 1 if first_stage_only(t, sh.dep.engine_version) else sh.dep.pp  # copies over stages
    h = t.hidden
    n = t.names
    p = n.prefix
    replicated = sh.copies * tp * pp

    def norm(module: str, width: int) -> None:
        names = ("weight", "bias") if t.norm_bias else ("weight",)
        sh.add(module, GROUP, tuple(Param(x, (width,), sh.dtype) for x in names),
               replicas=replicated,
               formula=f"{len(names)}×{width}×{sh.b}B {'LayerNorm' if t.norm_bias else 'RMSNorm'}")

    def shard(how: str) -> str:
        return "rep" if data else how

    if t.patch_shard == "rep":
        conv = [Param("weight", (h, t.patch_inputs), sh.dtype)]
        if t.patch_bias:
            conv.append(Param("bias", (h,), sh.dtype))
        sh.add(p + n.patch, GROUP, tuple(conv), replicas=replicated,
               formula=f"Conv{3 if t.temporal_patch > 1 else 2}d {t.patch_inputs}→{h}×{sh.b}B"
               + (" + bias" if t.patch_bias else ""))
    else:  # an unfolding convolution as a parallel linear
        sh.linear(p + n.patch, GROUP, h, t.patch_inputs, shard=shard(t.patch_shard),
                  bias=t.patch_bias, quantise=False, replicas_extra=pp)
    if t.class_embedding:
        sh.add(p + "class_embedding", GROUP, (Param("weight", (h,), sh.dtype),),
               replicas=replicated, formula=f"{h}×{sh.b}B")
    if t.position_embeddings:
        rows = -(-t.position_embeddings // t.position_pad) * t.position_pad
        if t.position_shard == "rep" or data:
            sh.add(p + n.position, GROUP, (Param("weight", (rows, h), sh.dtype),),
                   replicas=replicated, formula=f"{rows}×{h}×{sh.b}B")
        else:
            sh.linear(p + n.position, GROUP, rows, h, shard=t.position_shard, quantise=False,
                      replicas_extra=pp)
    for name in t.outer_norms:
        norm(p + name, h)
    for blk in range(t.depth if in_order else 1):
        start = len(sh.out)
        _block(sh, t, p + n.block.format(i=blk), pp, data)
        if not in_order and t.depth != 1:  # the other blocks are the first one's tensors
            sh.out[start:] = [replace(x, count=x.count * t.depth) for x in sh.out[start:]]
    for part in t.head:
        if part.inn == 0:
            if part.norm:
                norm(part.module, part.out)
            else:
                sh.add(part.module, part.group, (Param("weight", (part.out,), sh.dtype),),
                       replicas=replicated, formula=f"{part.out}×{sh.b}B")
            continue
        sh.linear(part.module, part.group, part.out, part.inn,
                  shard=part.data_shard if data else part.shard, bias=part.bias,
                  quantise=False, replicas_extra=pp)


def _block(sh: Shard, t: VisionTower, b: str, pp: int, data: bool) -> None:
    """One block: two norms, qkv + proj, the MLP (all replicated in data mode)."""
    h, i = t.hidden, t.intermediate
    n = t.names
    col, row = ("rep", "rep") if data else ("col", "row")
    names = ("weight", "bias") if t.norm_bias else ("weight",)
    for norm in (n.norm1, n.norm2):
        sh.add(b + norm, GROUP, tuple(Param(x, (h,), sh.dtype) for x in names),
               replicas=sh.copies * sh.tp * pp, formula=f"{len(names)}×{h}×{sh.b}B")
    sh.linear(b + n.qkv, GROUP, 3 * h, h, shard=col, bias=t.qkv_bias, quantise=t.quantised,
              replicas_extra=pp)
    sh.linear(b + n.proj, GROUP, h, h, shard=row, bias=t.proj_bias, quantise=t.quantised,
              replicas_extra=pp)
    up = n.up or ("mlp.gate_up_proj" if t.gated else "mlp.linear_fc1")
    down = n.down or ("mlp.down_proj" if t.gated else "mlp.linear_fc2")
    m = t.mlp_quant_multiple
    mlp_quant = t.quantised and (not m or (h % m == 0 and i % m == 0))
    sh.linear(b + up, GROUP, (2 if t.gated else 1) * i, h, shard=col, bias=t.mlp_bias,
              quantise=mlp_quant, replicas_extra=pp)
    sh.linear(b + down, GROUP, h, i, shard=row, bias=t.mlp_bias, quantise=mlp_quant,
              replicas_extra=pp)


def tower_params(t: VisionTower) -> int:
    """Parameters of the whole tower and its head (a hand-checkable total: the tests compare it
    with the checkpoint's tower tensors)."""
    h, i = t.hidden, t.intermediate
    nb = 2 if t.norm_bias else 1
    block = (2 * nb * h + (3 * h * h + (3 * h if t.qkv_bias else 0))
             + (h * h + (h if t.proj_bias else 0)))
    mlp_b = 1 if t.mlp_bias else 0
    block += ((2 * i * h + 2 * i * mlp_b + h * i + h * mlp_b) if t.gated
              else (i * h + i * mlp_b + h * i + h * mlp_b))
    head = sum((nb if p.norm else 1) * p.out if p.inn == 0
               else p.out * p.inn + (p.out if p.bias else 0) for p in t.head)
    patch = h * t.patch_inputs + (h if t.patch_bias else 0)
    rows = -(-t.position_embeddings // t.position_pad) * t.position_pad
    extra = (h if t.class_embedding else 0) + nb * h * len(t.outer_norms)
    return t.depth * block + head + patch + rows * h + extra

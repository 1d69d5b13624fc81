"""A multimodal model's vision tower on one rank, as vLLM shards it
(``memprof/core/models/multimodal.py`` describes the tower; the family's module cites its file).

vLLM (``qwen2_5_vl.py`` / ``qwen3_vl.py``, read in 0.11.0) builds the tower on every rank of the
deployment — on each PP stage too: the wrapper model's ``__init__`` builds ``visual`` with no
pipeline check — and only when ``--limit-mm-per-prompt`` leaves an image or a video
(``get_limit_per_prompt("image") or …("video")``; otherwise ``self.visual = None``); from 0.33.0
on the first PP stage only (``TOWER_SKIPPED``). Its linears
shard over TP as the language model's do (``QKVParallelLinear`` / ``MergedColumnParallelLinear`` /
``ColumnParallelLinear`` split the output, ``RowParallelLinear`` the input, its bias kept whole);
the norms, the ``Conv3d`` patch embedding and the learnt position table are replicated. With
``--mm-encoder-tp-mode data`` (0.10.2+) every linear is built with ``disable_tp``: the whole
tower on every rank. Stored in
the model dtype: the checkpoints keep the tower unquantised (an fp8/AWQ ``--quantization`` of the
tower is not modelled: the tower is charged at the model dtype).
"""

from __future__ import annotations

from dataclasses import replace

from memprof.base.errors import LayoutError
from memprof.core.models.multimodal import DEFAULT_LIMIT, VisionTower, mm_limits
from memprof.core.versions import Rule, value_at
from memprof.core.weights.formats import Param
from memprof.core.weights.shard import Shard

GROUP = "vision tower"


# When vLLM leaves the tower out. ``value``: "no modality" (every modality limited to 0),
# "later stages" (PP stages after the first, Model Runner V2: ``_mark_tower_model``).
TOWER_SKIPPED: tuple[Rule, ...] = (
    Rule(name="mm_tower_skipped", changes="weights: vision tower", since="0.10.1", until="0.33.0",
         value=("no modality",),
         introduced_by="first seen in 0.10.1 (0.9.2 / 0.10.0 build the tower whatever the "
         "limits)", removed_by="0.33.0 adds the PP case",
         source="0.10.1 / 0.10.2 / 0.11.0 models/qwen2_5_vl.py, 0.11.0 qwen3_vl.py __init__: "
         "self.visual = None unless get_limit_per_prompt('image') or ('video')",
         applies_to="multimodal"),
    Rule(name="mm_tower_skipped", changes="weights: vision tower", since="0.33.0", until=None,
         value=("no modality", "later stages"),
         introduced_by="first seen in 0.33.0 (0.29.0 - 0.32.0 build it on every PP stage)",
         source="0.33.0 models/interfaces.py SupportsMultiModal._mark_tower_model "
         "(StageMissingLayer when every limit is 0, or under Model Runner V2 — the default "
         "(memprof/core/kvcache.py SWA_IN_FLIGHT_BATCHES) — on a stage after the first)",
         applies_to="multimodal"),
)


def tower_built(tower: VisionTower, limit_text: str | None, version: str | None = None,
                pp_stage: int = 0) -> bool:
    """Does vLLM build the tower on this PP stage at ``version`` (``TOWER_SKIPPED``)?"""
    skipped = value_at(TOWER_SKIPPED, version, ())
    assert isinstance(skipped, tuple)
    if "later stages" in skipped and pp_stage > 0:
        return False
    if "no modality" not in skipped:
        return True
    limits = mm_limits(limit_text, tower.modalities)
    return any(limits.get(m, DEFAULT_LIMIT) > 0 for m in tower.modalities)


def first_stage_only(version: str | None) -> bool:
    """Is the tower on the first PP stage only at ``version``?"""
    skipped = value_at(TOWER_SKIPPED, version, ())
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
    data = sh.dep.mm_encoder_tp_mode == "data"  # disable_tp: every linear whole on every rank
    tp = sh.tp
    if not data:
        _check_divisible(t, tp)
    pp = 1 if first_stage_only(sh.dep.engine_version) else sh.dep.pp  # copies over stages
    h, m2 = t.hidden, t.merge * t.merge
    p = "visual."
    replicated = sh.copies * tp * pp

    def norm(module: str, n: int) -> None:
        names = ("weight", "bias") if t.norm_bias else ("weight",)
        sh.add(module, GROUP, tuple(Param(x, (n,), sh.dtype) for x in names),
               replicas=replicated,
               formula=f"{len(names)}×{n}×{sh.b}B {'LayerNorm' if t.norm_bias else 'RMSNorm'}")

    conv = [Param("weight", (h, t.patch_inputs), sh.dtype)]
    if t.patch_bias:
        conv.append(Param("bias", (h,), sh.dtype))
    sh.add(p + "patch_embed.proj", GROUP, tuple(conv), replicas=replicated,
           formula=f"Conv3d {t.patch_inputs}→{h}×{sh.b}B" + (" + bias" if t.patch_bias else ""))
    if t.position_embeddings:
        sh.add(p + "pos_embed", GROUP, (Param("weight", (t.position_embeddings, h), sh.dtype),),
               replicas=replicated, formula=f"{t.position_embeddings}×{h}×{sh.b}B")
    for blk in range(t.depth if in_order else 1):
        start = len(sh.out)
        _block(sh, t, f"{p}blocks.{blk}.", pp)
        if not in_order and t.depth != 1:  # the other blocks are the first one's tensors
            sh.out[start:] = [replace(x, count=x.count * t.depth) for x in sh.out[start:]]
    for k in range(1 + t.deepstack_levels):
        mp = p + ("merger." if k == 0 else f"deepstack_merger_list.{k - 1}.")
        norm(mp + "norm", h if k == 0 else h * m2)
        sh.linear(mp + "linear_fc1", GROUP, h * m2, h * m2, shard="rep" if data else "col",
                  bias=True, quantise=False, replicas_extra=pp)
        sh.linear(mp + "linear_fc2", GROUP, t.out_hidden, h * m2,
                  shard="rep" if data else "row", bias=True, quantise=False, replicas_extra=pp)


def _block(sh: Shard, t: VisionTower, b: str, pp: int) -> None:
    """One block: two norms, qkv + proj, the MLP (all replicated in data mode)."""
    h, i = t.hidden, t.intermediate
    data = sh.dep.mm_encoder_tp_mode == "data"
    col, row = ("rep", "rep") if data else ("col", "row")
    names = ("weight", "bias") if t.norm_bias else ("weight",)
    for n in ("norm1", "norm2"):
        sh.add(b + n, GROUP, tuple(Param(x, (h,), sh.dtype) for x in names),
               replicas=sh.copies * sh.tp * pp, formula=f"{len(names)}×{h}×{sh.b}B")
    sh.linear(b + "attn.qkv", GROUP, 3 * h, h, shard=col, bias=True, quantise=False,
              replicas_extra=pp)
    sh.linear(b + "attn.proj", GROUP, h, h, shard=row, bias=t.proj_bias, quantise=False,
              replicas_extra=pp)
    up, down = ("mlp.gate_up_proj", "mlp.down_proj") if t.gated else ("mlp.linear_fc1",
                                                                       "mlp.linear_fc2")
    sh.linear(b + up, GROUP, (2 if t.gated else 1) * i, h, shard=col, bias=t.mlp_bias,
              quantise=False, replicas_extra=pp)
    sh.linear(b + down, GROUP, h, i, shard=row, bias=t.mlp_bias, quantise=False,
              replicas_extra=pp)


def tower_params(t: VisionTower) -> int:
    """Parameters of the whole tower (a hand-checkable total: the tests compare it with the
    checkpoint's ``model.visual.`` tensors)."""
    h, i, m2 = t.hidden, t.intermediate, t.merge * t.merge
    nb = 2 if t.norm_bias else 1
    block = 2 * nb * h + (3 * h * h + 3 * h) + (h * h + (h if t.proj_bias else 0))
    mlp_b = 1 if t.mlp_bias else 0
    block += ((2 * i * h + 2 * i * mlp_b + h * i + h * mlp_b) if t.gated
              else (i * h + i * mlp_b + h * i + h * mlp_b))
    mergers = sum(nb * (h if k == 0 else h * m2) + (h * m2) ** 2 + h * m2
                  + t.out_hidden * h * m2 + t.out_hidden for k in range(1 + t.deepstack_levels))
    patch = h * t.patch_inputs + (h if t.patch_bias else 0)
    return t.depth * block + mergers + patch + t.position_embeddings * h

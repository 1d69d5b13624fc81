"""A rank's weights: every block of its PP stage's layers (once per layer kind), embeddings,
final norm and lm_head; aggregated into tensors and report rows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memprof.core.deployment import Deployment, RankCoord, pp_layer_split
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines.vllm_pooling import convert_of, drops_lm_head, score_head
from memprof.core.models import Layer, ModelSpec, QuantConfig, layer_kinds
from memprof.core.models.families import family_row
from memprof.core.versions import Rule, value_at
from memprof.core.weights.attention import AttentionWeights
from memprof.core.weights.formats import Param
from memprof.core.weights.mlp import MlpWeights
from memprof.core.weights.shard import WeightTensor, has_digit, layer_exclusions

# DeepSeek V2/V3 build ``lm_head`` on every PP stage before 0.8.0 (deepseek_v2.py); the families
# whose row sets ``lm_head_every_pp_stage``.
LM_HEAD_EVERY_STAGE: tuple[Rule, ...] = (
    Rule(name="deepseek_lm_head_every_pp_stage", changes="weights: lm_head", since="0.7.0",
         until="0.8.0", value=True, introduced_by="before 0.7.0",
         removed_by="PPMissingLayer on non-last stages (first released in 0.8.0)",
         source="0.7.0 / 0.7.3 model_executor/models/deepseek_v2.py DeepseekV2ForCausalLM.__init__ "
         "(unconditional ParallelLMHead); 0.8.0: 'if get_pp_group().is_last_rank'",
         applies_to="deepseek"),
)


class RankWeights(AttentionWeights, MlpWeights):
    """Builds the tensor list of one rank."""

    def layer(self, layer: Layer) -> None:
        p = f"model.layers.{layer.index}."
        h = self.spec.hidden_size
        self.attention(layer, p)
        self.mlp(layer, p)
        self.vector(p + "input_layernorm", "norms", h)
        mixer = layer.attention.mixer
        if layer.mlp.kind != "none" and (mixer is None or mixer.kind != "none"):
            # one norm per block: a hybrid layer that is only a mixer or only an MLP has one
            self.vector(p + "post_attention_layernorm", "norms", h)
        for norm in family_row(self.spec.family).layer_norms:  # e.g. pre/post-MLP norms
            self.vector(p + norm, "norms", h)
        if self.spec.hc_mult:
            m = self.spec.hc_mult
            mix = (2 + m) * m
            # hc_{attn,ffn}_{fn [mix, m·H], base [mix], scale [3]}, fp32 (the DeepSeek-V4
            # checkpoint's tensors (model.safetensors.index.json)).
            hc = tuple(Param(f"hc_{part}_{name}", shape, "float32")
                       for part in ("attn", "ffn")
                       for name, shape in (("fn", (mix, m * h)), ("base", (mix,)),
                                           ("scale", (3,))))
            self.add(p + "hc", "hyper-connections", hc,
                     replicas=self.copies * self.tp,
                     formula=f"2×4B×({mix}×{m}×{h} + {mix} + 3) fp32")
        if layer.is_mtp and not family_row(self.spec.family).mtp_fc_block:
            g = "mtp"
            if family_row(self.spec.family).mtp_hc_block:
                self.linear(p + "e_proj", g, h, h, shard="rep")
                self.linear(p + "h_proj", g, h, h, shard="rep")
                self.hc_head(p)
            else:
                # DeepSeekMTP: eh_proj is an unquantised nn.Linear(2H, H); embed_tokens and
                # shared_head.head are shared with the target model by vLLM's proposer.
                self.linear(p + "eh_proj", g, h, 2 * h, shard="rep", quantise=False)
            for n in ("enorm", "hnorm", "shared_head.norm"):
                self.vector(p + n, g, h)

    def mtp_fc_block(self) -> None:
        """Qwen3.5's MTP predictor, once beside its layers (vLLM 0.17.0 / 0.33.0 qwen3_5_mtp.py
        ``Qwen3_5MultiTokenPredictor``): ``fc`` a ColumnParallelLinear(2H → H) quantised as the
        checkpoint says (its exclusion list names ``mtp.fc`` where it is kept unquantised), and
        the RMSNorms ``pre_fc_norm_embedding``, ``pre_fc_norm_hidden`` and ``norm``; the
        embedding and lm_head are the target's (llm_base_proposer.py ``_maybe_share_*``)."""
        h = self.spec.hidden_size
        self.linear("mtp.fc", "mtp", h, 2 * h, shard="col")
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            self.vector("mtp." + n, "mtp", h)

    def layer_kinds(self, layers: tuple[Layer, ...]) -> list[tuple[Layer, int]]:
        """The stage's layers as (first layer of a kind, how many layers of that kind), so work
        grows with the kinds, not the count (a config of 100,000 layers builds a few). Layers
        are one kind when attention, MLP and MTP role are equal and the quantisation's exclude
        list excludes the same of their modules (``shard.layer_exclusions``: names of single
        layers such as ``model.layers.7.mlp.gate`` compare by what they name; any other entry
        with a digit in it makes every layer its own kind)."""
        ex = self.quant.exclude if self.quant is not None else ()
        if not any(has_digit(p) for p in ex):
            return layer_kinds(layers)
        if layer_exclusions(ex, 0) is None:
            return [(layer, 1) for layer in layers]
        firsts: dict[tuple[object, ...], Layer] = {}
        counts: dict[tuple[object, ...], int] = {}
        for layer in layers:
            key = (layer.attention, layer.mlp, layer.is_mtp, layer_exclusions(ex, layer.index))
            firsts.setdefault(key, layer)
            counts[key] = counts.get(key, 0) + 1
        return [(first, counts[key]) for key, first in firsts.items()]

    def layer_times(self, layer: Layer, n: int) -> None:
        """The tensors of ``layer``, standing for ``n`` identical layers (``count = n``)."""
        start = len(self.out)
        self.layer(layer)
        if n != 1:
            self.out[start:] = [t.with_(count=t.count * n) for t in self.out[start:]]

    def hc_head(self, p: str) -> None:
        m, h = self.spec.hc_mult, self.spec.hidden_size
        head = (Param("hc_head_fn", (m, m * h), "float32"), Param("hc_head_base", (m,), "float32"),
                Param("hc_head_scale", (1,), "float32"))
        self.add(p + "hc_head", "hyper-connections head", head,
                 replicas=self.copies * self.tp, formula=f"4B×({m}×{m}×{h} + {m} + 1) fp32")

    def embed_tokens(self) -> None:
        """``embed_tokens``: split over the TP ranks, or under DP attention as the family's
        ``dp_attention_embed`` rows say its SGLang model file builds it (then split ``ways``
        ways, each part held by the ``tp / ways`` ranks of the same place in their
        attention-TP group, SGLang's ``attn_tp_rank = tp_rank % attn_tp_size``)."""
        dep = self.dep
        how = (value_at(family_row(self.spec.family).dp_attention_embed, dep.engine_version,
                        "tp", engine=dep.engine)
               if dep.attn_tp != dep.tp else "tp")
        if how == "tp":
            self.vocab_parallel("model.embed_tokens", "embed_tokens")
            return
        ways = 1 if how == "replicated" else dep.attn_tp
        saved = (self.tp, self.copies)
        self.tp, self.copies = ways, saved[1] * (saved[0] // ways)
        try:
            self.vocab_parallel("model.embed_tokens", "embed_tokens",
                                rank=self.coord.tp_rank % ways)
        finally:
            self.tp, self.copies = saved

    def build(self, *, in_order: bool = False) -> list[WeightTensor]:
        """The rank's tensors; ``in_order``: one per layer in construction order (vLLM builds
        ``embed_tokens``, then each layer's attention, MLP and norms, then the final norm and
        ``lm_head``), not folded by layer kind."""
        spec, dep = self.spec, self.dep
        kinds = ((lambda ls: [(x, 1) for x in ls]) if in_order else self.layer_kinds)
        stages = pp_layer_split(spec.num_layers, dep.pp, dep.engine_version)
        start, end = stages[self.coord.pp_stage]
        first = self.coord.pp_stage == 0
        last = self.coord.pp_stage == dep.pp - 1
        if spec.vision is not None:  # vLLM builds the tower first (weights/vision.py)
            from memprof.core.engines import engine_of
            from memprof.core.weights.vision import tower_built, vision_tower

            # the tower as the engine builds it (vLLM's: the model's; None: none built)
            tower = engine_of(dep).vision_tower(dep, spec)
            if tower is not None and tower_built(tower, dep.limit_mm_per_prompt,
                                                 dep.engine_version, self.coord.pp_stage):
                vision_tower(self, tower, in_order=in_order)
        if first or (last and spec.tie_word_embeddings):
            self.embed_tokens()
        for layer, n in kinds(spec.layers[start:end]):
            self.layer_times(layer, n)
        if last:
            for layer, n in kinds(spec.mtp_layers):
                self.layer_times(layer, n)
            if spec.mtp_layers and family_row(spec.family).mtp_fc_block:
                self.mtp_fc_block()
            self.vector("model.norm", "final norm", spec.hidden_size)
            if spec.hc_mult:
                self.hc_head("model.")
            if not spec.tie_word_embeddings and not drops_lm_head(convert_of(dep),
                                                                  dep.engine_version or ""):
                self.vocab_parallel("lm_head", "lm_head")
        elif (family_row(spec.family).lm_head_every_pp_stage and not spec.tie_word_embeddings
              and value_at(LM_HEAD_EVERY_STAGE, dep.engine_version, False)):
            self.vocab_parallel("lm_head", "lm_head")
        self.score_head()
        return self.out

    def score_head(self) -> None:
        """``--convert classify``'s score head, [num_labels, H] in fp32 on every rank
        (``ReplicatedLinear`` built in ``__init__``, TP and PP alike: engines/vllm_pooling.py
        ``SCORE_HEAD``)."""
        spec, dep = self.spec, self.dep
        head = score_head(spec.raw, spec.architecture, convert_of(dep), dep.engine_version or "")
        if head is None:
            return
        labels, dtype, why = head
        b = dtype_bytes(dtype)
        self.add("score", "score head", (Param("weight", (labels, spec.hidden_size), dtype),),
                 replicas=self.copies * self.tp,
                 formula=f"{labels}×{spec.hidden_size}×{b}B (rep, {dtype} head; num_labels: "
                 f"{why})")


# (compiled once: a rank's every tensor is matched)
_LAYER_INDEX = re.compile(r"\.layers\.\d+\.")
_LAYER_NUMBER = re.compile(r"\.layers\.(\d+)\.")
_UP_TO_LAYER = re.compile(r"^.*?\.layers\.\d+\.")


def _aggregate(tensors: Iterable[WeightTensor]) -> list[WeightTensor]:
    """Fold per-layer tensors that are identical on this rank into one row with a count."""
    rows: dict[tuple[object, ...], WeightTensor] = {}
    for t in tensors:
        module = _LAYER_INDEX.sub(".layers.*.", t.module)
        key = (module, t.group, t.bytes_each, t.replicas, t.padding_each, t.formula, t.params)
        seen = rows.get(key)
        rows[key] = t.with_(module=module, count=t.count + (seen.count if seen else 0))
    return list(rows.values())


def rank_weights(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None, coord: RankCoord,
                 arch: str = "sm90") -> list[WeightTensor]:
    """Tensor-by-tensor weights of one rank (aggregated over identical layers)."""
    return _aggregate(RankWeights(spec, dep, quant, coord, arch).build())


def weights_in_order(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                     coord: RankCoord, arch: str = "sm90") -> list[WeightTensor]:
    """One tensor per module per layer, in the order the engine constructs them (count 1)."""
    return RankWeights(spec, dep, quant, coord, arch).build(in_order=True)


class _InOrderParams(RankWeights):
    """``build(in_order=True)`` as ``(module.param, bytes)`` pairs, with each layer kind built
    once: a later layer of a kind is the first one's parameters under its own
    ``model.layers.{index}.`` prefix (what ``layer_kinds`` already relies on; every layer is
    built when a quantisation exclude names indices)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.params: list[tuple[str, int]] = []
        self._done = 0  # tensors of ``out`` already in ``params``
        # layer kind → its first layer's params as (name after that layer's prefix, bytes); a
        # name outside the prefix is kept whole, marked by a leading NUL
        self._built: dict[tuple[object, ...], tuple[list[tuple[str, int]], bool]] = {}
        ex = self.quant.exclude if self.quant is not None else ()
        named = any(has_digit(p) for p in ex)
        # the exclude list tells layers apart by more than their names: each layer is built
        self._by_index = named and layer_exclusions(ex, 0) is None
        self._exclude = ex if named else ()

    def _flush(self) -> list[tuple[str, int]]:
        new = [(f"{t.module}.{p.name}", p.bytes) for t in self.out[self._done:] for p in t.params]
        self._done = len(self.out)
        self.params += new
        return new

    def layer(self, layer: Layer) -> None:
        self._flush()
        key = (layer.attention, layer.mlp, layer.is_mtp,
               layer_exclusions(self._exclude, layer.index) if self._exclude else None)
        prefix = f"model.layers.{layer.index}."
        seen = None if self._by_index else self._built.get(key)
        if seen is None:
            super().layer(layer)
            new = self._flush()
            if not self._by_index:
                # (and whether every name is under the prefix: then no name is tested again)
                self._built[key] = ([(n[len(prefix):], b) if n.startswith(prefix)
                                     else ("\0" + n, b) for n, b in new],
                                    all(n.startswith(prefix) for n, _ in new))
            return
        entries, under_prefix = seen
        if under_prefix:
            self.params += [(prefix + n, b) for n, b in entries]
        else:
            self.params += [(prefix + n if n[:1] != "\0" else n[1:], b) for n, b in entries]

    def build_params(self) -> list[tuple[str, int]]:
        self.build(in_order=True)
        self._flush()
        return self.params


def weights_key(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None, coord: RankCoord,
                arch: str) -> tuple[object, ...]:
    """What a rank's weights are computed from, as a cache key of hashable values: the spec,
    the Deployment fields this package reads (release, TP, PP, DP copies, EP, DP attention,
    dtype, the multimodal limits, the pooling runner's conversion), the quantisation, the rank
    and the GPU architecture.
    (Hashing a spec costs tens of microseconds: a caller keeping many keys alive,
    ``memprof.batch``, puts its own handle of the spec in place of ``key[0]``.)"""
    return (spec, dep.engine, dep.engine_version, dep.tp, dep.pp, dep.dp,
            dep.enable_expert_parallel, dep.enable_dp_attention, dep.dtype, quant, coord, arch,
            dep.limit_mm_per_prompt, dep.mm_encoder_tp_mode, convert_of(dep))


# kept by ``weights_key`` (values, the spec among them; a bounded table, no identity keys): the
# allocator term and the model-load rounding of a rank read the same sequence
_IN_ORDER: dict[tuple[object, ...], list[tuple[str, int]]] = {}


def weights_in_order_params(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                            coord: RankCoord, arch: str = "sm90") -> list[tuple[str, int]]:
    """``(module.param, bytes)`` of every parameter of ``weights_in_order``, in that order, with
    each layer kind built once (the allocator replay of a sweep reads only names and sizes).
    The list is shared between callers: do not change it."""
    key = weights_key(spec, dep, quant, coord, arch)
    hit = _IN_ORDER.get(key)
    if hit is not None:
        return hit
    if len(_IN_ORDER) >= 64:
        _IN_ORDER.clear()
    params = _IN_ORDER[key] = _InOrderParams(spec, dep, quant, coord, arch).build_params()
    return params


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightGroup:
    """A report row: the tensors of one group in ``count`` layers of identical size."""

    group: str
    count: int
    bytes_each: int
    modules: tuple[str, ...]


def group_weights(spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                  coord: RankCoord, arch: str = "sm90") -> tuple[list[WeightTensor],
                                                                 list[WeightGroup]]:
    """The rank's tensors (aggregated) and its report rows: per group, layers of equal size."""
    raw = RankWeights(spec, dep, quant, coord, arch).build()
    per_layer: dict[tuple[str, str], int] = {}  # (group, layer) -> bytes of one such layer
    layers_like: dict[tuple[str, str], int] = {}  # how many layers that layer stands for
    modules: dict[str, list[str]] = {}
    for t in raw:
        m = _LAYER_NUMBER.search(t.module)
        # one row per layer; the vision tower (memprof/core/weights/vision.py) is one row
        where = m.group(1) if m else (t.group if t.module.startswith("visual.") else t.module)
        per_layer[(t.group, where)] = per_layer.get((t.group, where), 0) + (
            t.bytes_each if m else t.bytes)
        layers_like[(t.group, where)] = t.count if m else 1
        short = _UP_TO_LAYER.sub("", t.module)
        modules.setdefault(t.group, [])
        if short not in modules[t.group]:
            modules[t.group].append(short)
    rows: dict[tuple[str, int], int] = {}
    for key, nbytes in per_layer.items():
        rows[(key[0], nbytes)] = rows.get((key[0], nbytes), 0) + layers_like[key]
    groups = [WeightGroup(group=g, count=n, bytes_each=b, modules=tuple(modules[g]))
              for (g, b), n in rows.items()]
    return _aggregate(raw), groups


def unsharded_total(spec: ModelSpec, quant: QuantConfig | None, dtype: str = "auto",
                    arch: str = "sm90") -> int:
    """Bytes of the whole model on one GPU without padding (the reference for invariants)."""
    from memprof.core.deployment import ranks

    one = Deployment(dtype=dtype)
    (coord,) = ranks(one)
    return sum((t.bytes_each - t.padding_each) * t.count
               for t in rank_weights(spec, one, quant, coord, arch))

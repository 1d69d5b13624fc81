"""SGLang with a vision-language model: what its start-up does with the vision tower, by release.

SGLang profiles nothing before it sizes the KV pool (its budget line is ``mem_fraction_static ×
free before load − what loading took``: ``memprof/core/engines/sglang.py``), so a vision tower
reaches the KV figure in two ways only, both read in the PyPI wheels 0.4.3 – 0.5.9:

- its weights, loaded with the model (the family row's ``sglang_tower`` rows, an
  ``EngineTower`` each: ``memprof/core/models/families/row.py``): built, skipped, or built only
  under ``--enable-multimodal``, split over the TP ranks as vLLM's tower is
  (``memprof/core/weights/vision.py``) or whole on every rank;
- ``mem_fraction_static``, reduced for a model SGLang treats as multimodal
  (``sglang/srt/configs/model_config.py`` ``is_multimodal``: the architecture in
  ``multimodal_model_archs`` and multimodal not disabled for it by default):
  ``SGLANG_VLM_FRACTION`` below.

Nothing else is reserved at start for the encoder: the multimodal embedding cache
(``mem_cache/multimodal_cache.py`` ``MultiModalCache``, ``SGLANG_VLM_CACHE_SIZE_MB``, 100 MB by
default: ``managers/scheduler.py`` 0.5.5) is an ``OrderedDict`` filled by requests, and no
encoder forward runs before the pool (``profiles_encoder`` is False for SGLang). What is not
modelled is refused: a family without ``sglang_tower`` rows, a release no row covers, and a
built tower under PP, DP attention or a quantised checkpoint (SGLang passes ``quant_config`` to
the tower's linears, 0.5.5 ``qwen2_5_vl.py``; its PP and attention-TP split of the tower are not
read).

SGLang 0.4.5 – 0.4.6 also turn chunked prefill off for every multimodal model (the same
``model_runner.py`` ``model_specific_adjustment``: ``server_args.chunked_prefill_size = -1``,
given or not), so a prefill runs up to ``--max-prefill-tokens`` (16,384):
``SGLANG_VLM_CHUNK_OFF``, ``vlm_settings``. It moves the activation share outside the budget,
not the pool (those releases' fractions do not read the chunk).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memprof.base.errors import BadInput, ConfigError
from memprof.core.engines.base import DeploymentView
from memprof.core.models.families import family_row
from memprof.core.models.families.row import EngineTower
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.versions import Rule, around_snapshots, resolve_version, value_at

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower
    from memprof.core.models.spec import ModelSpec

ENGINE = "sglang"
_READ = "read in the sglang {} wheel"

# The mem_fraction_static reduction for a multimodal model. value: (where, factor): "runner"
# multiplies whatever mem_fraction_static holds (given or from the heuristic) in
# ModelRunner.model_specific_adjustment; "heuristic" only the heuristic's (inside
# ``if self.mem_fraction_static is None``); factor "vit" is adjust_mem_fraction_for_vlm
# (``vit_fraction``).
SGLANG_VLM_FRACTION: tuple[Rule, ...] = (
    Rule(name="sglang_vlm_mem_fraction", changes="budget: mem_fraction_static (multimodal)",
         since=None, until="0.4.5", value=("runner", 0.95), engine=ENGINE,
         applies_to="multimodal", introduced_by="before 0.4.3 (the oldest release modelled)",
         removed_by=_READ.format("0.4.5"),
         source="sglang 0.4.3 / 0.4.4 model_executor/model_runner.py "
         "ModelRunner.model_specific_adjustment: if self.is_multimodal: "
         "self.mem_fraction_static *= 0.95"),
    Rule(name="sglang_vlm_mem_fraction", changes="budget: mem_fraction_static (multimodal)",
         since="0.4.5", until="0.4.9", value=("runner", 0.90), engine=ENGINE,
         applies_to="multimodal", introduced_by=_READ.format("0.4.5"),
         removed_by=_READ.format("0.4.9"),
         source="sglang 0.4.5 / 0.4.6 / 0.4.7 / 0.4.8 / 0.4.8.post1 model_runner.py "
         "ModelRunner.model_specific_adjustment: self.mem_fraction_static *= 0.90"),
    Rule(name="sglang_vlm_mem_fraction", changes="budget: mem_fraction_static (multimodal)",
         since="0.4.9", until="0.4.9.post5", value=("heuristic", 0.90), engine=ENGINE,
         applies_to="multimodal", introduced_by=_READ.format("0.4.9"),
         removed_by=_READ.format("0.4.9.post5"),
         source="sglang 0.4.9 server_args.py ServerArgs.__post_init__, inside `if "
         "self.mem_fraction_static is None`: if model_config.is_multimodal: "
         "self.mem_fraction_static *= 0.90 (model_runner.py no longer scales it)"),
    *around_snapshots(Rule(
         name="sglang_vlm_mem_fraction", changes="budget: mem_fraction_static (multimodal)",
         since="0.4.9.post5", until=None, value=("heuristic", "vit"),
         engine=ENGINE, applies_to="multimodal", introduced_by=_READ.format("0.4.9.post5"),
         source="sglang 0.4.9.post5 / 0.4.10 / 0.5.3 / 0.5.5 / 0.5.6 / 0.5.9 server_args.py "
         "ServerArgs.adjust_mem_fraction_for_vlm, called inside `if self.mem_fraction_static "
         "is None` (0.5.3: _handle_gpu_memory_settings) when model_config.is_multimodal")),
)

# Chunked prefill turned off (``server_args.chunked_prefill_size = -1`` in
# ModelRunner.model_specific_adjustment, whatever was given) for a model SGLang treats as
# multimodal. value: True for every such model; False: only for architectures no family with
# ``sglang_tower`` rows has.
SGLANG_VLM_CHUNK_OFF: tuple[Rule, ...] = (
    Rule(name="sglang_vlm_chunked_prefill_off", changes="defaults: --chunked-prefill-size",
         since=None, until="0.4.5", value=False, engine=ENGINE, applies_to="multimodal",
         introduced_by="before 0.4.3 (the oldest release modelled)",
         removed_by=_READ.format("0.4.5"),
         source="sglang 0.4.3 / 0.4.4 model_runner.py model_specific_adjustment: only for "
         "architectures == [MllamaForConditionalGeneration] or [Qwen2VLForConditionalGeneration]"),
    Rule(name="sglang_vlm_chunked_prefill_off", changes="defaults: --chunked-prefill-size",
         since="0.4.5", until="0.4.7", value=True, engine=ENGINE, applies_to="multimodal",
         introduced_by=_READ.format("0.4.5"), removed_by=_READ.format("0.4.7"),
         source="sglang 0.4.5 / 0.4.6 model_runner.py model_specific_adjustment: if "
         "self.is_multimodal: ... server_args.chunked_prefill_size = -1"),
    *around_snapshots(Rule(
         name="sglang_vlm_chunked_prefill_off", changes="defaults: --chunked-prefill-size",
         since="0.4.7", until=None, value=False, engine=ENGINE,
         applies_to="multimodal", introduced_by=_READ.format("0.4.7"),
         source="sglang 0.4.7 / 0.4.9 / 0.5.5 / 0.5.9 model_runner.py: only when not "
         "is_multimodal_chunked_prefill_supported (configs/model_config.py: Grok1V, Grok1A, "
         "LlavaLlama, Mllama, CLIPModel)")),
)

# adjust_mem_fraction_for_vlm's constants (server_args.py, 0.4.9.post5 – 0.5.9): the base
# factor, the baseline ViT (ViT-L/14: 24 layers of 1024), the defaults its getattr falls back
# to, the sensitivity and the clamp of the dynamic factor
VIT_BASE_FACTOR = 0.95
VIT_BASELINE = (24, 1024)
VIT_SENSITIVITY = 0.1
VIT_CLAMP = (0.8, 1.05)


def vit_fraction(vision_config: dict[str, Any]) -> float:
    """``adjust_mem_fraction_for_vlm``'s factor::

        ratio  = layers·hidden² / (24·1024²)
        factor = 0.95 · clamp(1 − 0.1·(ratio − 1), 0.8, 1.05)

    with ``layers`` = ``vision_config.num_hidden_layers`` and ``hidden`` =
    ``vision_config.hidden_size`` as the config states them (``getattr`` with the defaults 24 and
    1024: a config that names its depth otherwise, as Qwen2.5-VL's ``depth``, reads 24)."""
    got = []
    for key, default in (("num_hidden_layers", VIT_BASELINE[0]),
                         ("hidden_size", VIT_BASELINE[1])):
        v = vision_config.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(f"config.json field 'vision_config.{key}' must be a positive "
                              f"integer, got {str(v)[:40]!r}",
                              hint=f"fix 'vision_config.{key}' in the config.json")
        got.append(v)
    layers, hidden = got
    ratio = layers * hidden ** 2 / (VIT_BASELINE[0] * VIT_BASELINE[1] ** 2)
    low, high = VIT_CLAMP
    return VIT_BASE_FACTOR * max(low, min(high, 1.0 - VIT_SENSITIVITY * (ratio - 1.0)))


def tower_rule(spec: ModelSpec, version: str | None) -> EngineTower | None:
    """The family's ``sglang_tower`` row at ``version`` (None: no row covers it)."""
    found = value_at(family_row(spec.family).sglang_tower, version, None, engine=ENGINE)
    return found if isinstance(found, EngineTower) else None


def _rows(spec: ModelSpec) -> tuple[Rule, ...]:
    return family_row(spec.family).sglang_tower


def check_vision(dep: DeploymentView, spec: ModelSpec) -> bool:
    """Before any work: is SGLang's vision path of ``spec`` modelled at the release? False: the
    family has no ``sglang_tower`` rows (the caller refuses it); ``BadInput`` for a release no
    row covers, a release without the model, and a built tower under a layout not read."""
    rows = _rows(spec)
    if not rows:
        return False
    version = resolve_version(dep.engine_version, ENGINE)
    rule = tower_rule(spec, version)
    if rule is None:
        until = rows[-1].until
        if until is None:  # a source snapshot inside the rows' range: its source is not read
            at = SGLANG_RELEASES.index(version)
            before = [r for r in SGLANG_RELEASES[:at] if tower_rule(spec, r) is not None]
            hint = (f"use --engine-version {before[-1]} (the release before it) or "
                    f"{SGLANG_RELEASES[-1]}; the source snapshots are not read for it"
                    if before else "estimate it with --engine vllm")
        else:
            newest = SGLANG_RELEASES[SGLANG_RELEASES.index(until) - 1]
            hint = (f"use --engine-version {newest} or older (the releases whose source it "
                    "was read in)")
        raise BadInput(f"memprof has not read SGLang {version}'s vision path of {spec.name}",
                       hint=hint)
    if rule.build == "absent":
        first = next((r.since for r in rows
                      if isinstance(r.value, EngineTower) and r.value.build != "absent"), None)
        raise BadInput(f"SGLang {version} has no {spec.architecture} model",
                       hint=f"use --engine-version {first} or later" if first
                       else "estimate it with --engine vllm")
    if rule.build in ("sharded", "whole"):
        what, way = ((f"--pp-size {dep.pp}", "--pp-size 1") if dep.pp > 1 else
                     ("--enable-dp-attention", "no --enable-dp-attention")
                     if dep.enable_dp_attention else
                     ("a quantised checkpoint", "an unquantised checkpoint")
                     if spec.quant is not None or dep.quantization
                     else (None, None))
        if what:
            raise BadInput(f"memprof does not model SGLang's vision tower of {spec.name} with "
                           f"{what} (how SGLang splits or quantises the tower there is not read)",
                           hint=f"estimate it with {way}, or with --engine vllm")
    return True


def sglang_tower(dep: DeploymentView, spec: ModelSpec) -> VisionTower | None:
    """The tower as SGLang builds it at the release (None: not built): vLLM's tower
    (``spec.vision``) with the MLP width rounded as the row says, or whole on every rank
    (transformers' modules: the projector too); never skipped by vLLM's
    ``--limit-mm-per-prompt`` rows, which SGLang has not."""
    tower = spec.vision
    rule = tower_rule(spec, dep.engine_version)
    if tower is None or rule is None or rule.build not in ("sharded", "whole"):
        return None
    m = rule.mlp_multiple
    out: VisionTower = replace(tower, intermediate=-(-tower.intermediate // m) * m,
                               releases=(), skipped=())
    if rule.build == "whole":  # transformers' nn.Embedding tables are not padded either
        out = replace(out, whole=True, position_pad=1, position_shard="rep",
                      head=tuple(replace(p, shard="rep", data_shard="rep") for p in out.head))
    return out


def vlm_fraction(mfs: float, *, given: bool, version: str | None,
                 spec: ModelSpec | None) -> float:
    """``mfs`` with ``SGLANG_VLM_FRACTION``'s reduction where SGLang treats ``spec`` as
    multimodal (the ``sglang_tower`` row's ``multimodal``); a given ``--mem-fraction-static`` is
    kept where the row scales the heuristic's only."""
    if spec is None or spec.vision is None:
        return mfs
    rule = tower_rule(spec, version)
    if rule is None or not rule.multimodal:
        return mfs
    row = value_at(SGLANG_VLM_FRACTION, version, None, engine=ENGINE)
    if not isinstance(row, tuple):
        return mfs
    where, factor = row
    if where == "heuristic" and given:
        return mfs
    if factor == "vit":
        return mfs * vit_fraction(_vision_config(spec))
    return mfs * float(factor)


def _vision_config(spec: ModelSpec) -> dict[str, Any]:
    vc = spec.raw.get("vision_config")
    return vc if isinstance(vc, dict) else {}


def _chunk_off(dep: DeploymentView, spec: ModelSpec | None) -> bool:
    """Does SGLang turn chunked prefill off for ``spec`` at the release
    (``SGLANG_VLM_CHUNK_OFF``, for a model it treats as multimodal)?"""
    if spec is None or spec.vision is None:
        return False
    rule = tower_rule(spec, dep.engine_version)
    return (rule is not None and rule.multimodal
            and value_at(SGLANG_VLM_CHUNK_OFF, dep.engine_version, False, engine=ENGINE) is True)


def vlm_settings(dep: DeploymentView, spec: ModelSpec | None,
                 max_prefill_tokens: int) -> dict[str, object]:
    """Chunked prefill off for a multimodal model where the release's model runner turns it off
    (``SGLANG_VLM_CHUNK_OFF``, whatever was given): a prefill then runs up to
    ``max_prefill_tokens``, the profile's token count."""
    if not _chunk_off(dep, spec):
        return {}
    return {"chunked_prefill_size": -1, "max_num_batched_tokens": max_prefill_tokens}


def vlm_notes(dep: DeploymentView, spec: ModelSpec) -> list[str]:
    """What the estimate says of SGLang's vision path of ``spec``."""
    rule = tower_rule(spec, dep.engine_version)
    if spec.vision is None or rule is None:
        return []
    built = {"sharded": "its linears split over the TP ranks",
             "whole": "transformers' modules, whole on every rank",
             "skipped": "not built (the checkpoint's tower tensors are skipped)",
             "flag": "not built (SGLang builds it only with --enable-multimodal, which memprof "
                     "does not take)"}.get(rule.build, rule.build)
    out = [f"SGLang's vision tower of {spec.name}: {built}; no encoder profile or cache is "
           "reserved at start (the multimodal embedding cache fills lazily)"]
    if rule.multimodal:
        row = value_at(SGLANG_VLM_FRACTION, dep.engine_version, None, engine=ENGINE)
        if isinstance(row, tuple):
            where, factor = row
            how = (f"× {vit_fraction(_vision_config(spec)):.6g} (adjust_mem_fraction_for_vlm)"
                   if factor == "vit" else f"× {factor}")
            if where == "heuristic" and dep.mem_fraction_static:
                out.append("SGLang reduces its heuristic's mem_fraction_static for a multimodal "
                           f"model ({how}); the given one is kept")
            else:
                scope = "its heuristic's" if where == "heuristic" else "the given or heuristic"
                out.append(f"SGLang reduces {scope} mem_fraction_static for a multimodal model: "
                           f"{how}")
    if _chunk_off(dep, spec):
        out.append("SGLang turns chunked prefill off for a multimodal model at this release "
                   f"(model_runner.py): a prefill runs up to --max-prefill-tokens "
                   f"({dep.max_num_batched_tokens or 0:,} tokens)")
    return out

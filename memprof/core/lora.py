"""vLLM's LoRA settings (``--enable-lora``, ``--max-loras``, ``--max-lora-rank``,
``--lora-extra-vocab-size``, ``--lora-dtype``, ``--fully-sharded-loras``,
``--enable-lora-bias``): what each release accepts, what it resolves them to, and the refusals,
as vLLM's ``LoRAConfig`` makes them.

The buffers those settings allocate are the term ``memprof/core/terms/lora.py``; what a model
family's vLLM class does under LoRA is its row's ``lora`` rows (``Family.lora``,
``memprof/core/models/families/row.py``: ``LoraSupport``).

Sources (vllm-project/vllm, read in the released wheels): 0.8.2 ``config.py::LoRAConfig``
(``__post_init__``: ``possible_max_ranks = (8, 16, 32, 64, 128, 256, 320, 512)``,
``possible_lora_extra_vocab_size = (256, 512)``, ``max_loras >= 1``; ``verify_with_model_config``:
``lora_dtype`` "auto" → the model dtype) and ``engine/arg_utils.py`` (``--lora-dtype`` choices
auto, float16, bfloat16; defaults ``max_loras`` 1, ``max_lora_rank`` 16,
``lora_extra_vocab_size`` 256); 0.11.0 ``config/lora.py`` (the same checks;
``lora_extra_vocab_size`` deprecated "in v0.12.0"); 0.12.0 and 0.33.0 ``config/lora.py``
(``MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]``, no ``lora_extra_vocab_size``).
"""

from __future__ import annotations

from typing import NamedTuple

from memprof.base.errors import BadInput
from memprof.core.models.families import family_row
from memprof.core.models.families.row import LoraSupport
from memprof.core.versions import Rule, resolve_version, split_generation, value_at, version_key

DEFAULT_MAX_LORAS = 1
# far above any deployment (each slot holds every LoRA layer's A and B), low enough that the
# term's arithmetic stays small
MAX_LORAS = 1 << 16
DEFAULT_MAX_LORA_RANK = 16
DEFAULT_EXTRA_VOCAB = 256
LORA_DTYPES = ("auto", "float16", "bfloat16")  # --lora-dtype choices, 0.8.2 to 0.33.0
# LoRAConfig.lora_vocab_padding_size: 256 (0.8.2 a ClassVar; 0.11.0 on CUDA
# ``current_platform.get_lora_vocab_padding_size()`` = 256); the LoRA lm_head's padding
LORA_VOCAB_PADDING = 256

_RANKS_082 = (8, 16, 32, 64, 128, 256, 320, 512)

# ``--max-lora-rank`` values LoRAConfig accepts
LORA_RANKS: tuple[Rule, ...] = (
    Rule(name="lora_max_ranks", changes="LoRA: --max-lora-rank values", since="0.7.0",
         until="0.8.0", value=_RANKS_082[:6], introduced_by="before 0.7.0",
         removed_by="320 and 512 added (first released in 0.8.0: 0.8.0 / 0.8.1 config.py)",
         source="0.7.0 / 0.7.1 / 0.7.2 / 0.7.3 config.py LoRAConfig.__post_init__: "
         "possible_max_ranks = (8, 16, 32, 64, 128, 256)", applies_to="lora"),
    Rule(name="lora_max_ranks", changes="LoRA: --max-lora-rank values", since="0.8.0",
         until="0.12.0", value=_RANKS_082,
         introduced_by="320 and 512 added (first released in 0.8.0)",
         removed_by="MaxLoRARanks adds 1 (first released in 0.12.0)",
         source="0.8.0 / 0.8.1 / 0.8.2 config.py / 0.11.0 config/lora.py LoRAConfig: "
         "possible_max_ranks", applies_to="lora"),
    Rule(name="lora_max_ranks", changes="LoRA: --max-lora-rank values", since="0.12.0",
         until=None, value=(1, *_RANKS_082),
         introduced_by="MaxLoRARanks adds 1 (first released in 0.12.0)",
         source="0.12.0 / 0.33.0 config/lora.py MaxLoRARanks", applies_to="lora"),
)

# Whether LoRAConfig has ``lora_extra_vocab_size`` (its values; () where it has none): the LoRA
# layers' ``embeddings_tensors`` [max_loras, extra, hidden] and the families' extra rows
LORA_EXTRA_VOCAB: tuple[Rule, ...] = (
    Rule(name="lora_extra_vocab_size", changes="LoRA: extra vocabulary buffers", since="0.7.0",
         until="0.12.0", value=(256, 512), introduced_by="before 0.7.0",
         removed_by="lora_extra_vocab_size removed (first released in 0.12.0)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.8.2 config.py / 0.11.0 config/lora.py LoRAConfig "
         "(possible_lora_extra_vocab_size); 0.8.2 / 0.11.0 lora/layers "
         "VocabParallelEmbeddingWithLoRA, LogitsProcessorWithLoRA.create_lora_weights "
         "(embeddings_tensors)", applies_to="lora"),
    Rule(name="lora_extra_vocab_size", changes="LoRA: extra vocabulary buffers", since="0.12.0",
         until=None, value=(), introduced_by="lora_extra_vocab_size removed (first released "
         "in 0.12.0)", source="0.12.0 / 0.33.0 config/lora.py LoRAConfig (no such field); "
         "lora/layers/vocal_parallel_embedding.py, logits_processor.py (no embeddings_tensors)",
         applies_to="lora"),
)

# Whether LoRAConfig has ``bias_enabled`` (``--enable-lora-bias``): a bias slot
# ``[max_loras, 1, out]`` beside each LoRA B
LORA_BIAS: tuple[Rule, ...] = (
    Rule(name="lora_bias", changes="LoRA: bias slots", since="0.7.0", until="0.12.0",
         value=True, introduced_by="before 0.7.0",
         removed_by="enable_lora_bias removed (first released in 0.12.0)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.8.2 lora/layers.py BaseLinearLayerWithLoRA / "
         "MergedColumnParallelLinearWithLoRA.create_lora_weights (lora_bias_stacked); 0.11.0 "
         "config/lora.py (deprecated 'in v0.12.0')", applies_to="lora"),
    Rule(name="lora_bias", changes="LoRA: bias slots", since="0.12.0", until=None,
         value=False, introduced_by="enable_lora_bias removed (first released in 0.12.0)",
         source="0.12.0 / 0.33.0 config/lora.py (no bias_enabled)", applies_to="lora"),
)

# Whether LoRAConfig has ``specialize_active_lora`` (``--specialize-active-lora``: graphs per
# active-LoRA count, memprof/core/terms/lora.py LORA_GRAPH_CASES)
LORA_SPECIALIZE: tuple[Rule, ...] = (
    Rule(name="lora_specialize_active", changes="LoRA: --specialize-active-lora",
         since="0.7.0", until="0.16.0", value=False, introduced_by="before 0.7.0",
         removed_by="specialize_active_lora (first released in 0.16.0)",
         source="0.7.0 as 0.7.1 (lora/, LoRAConfig, worker/model_runner.py "
         "and the model files compared); "
         "0.15.1 config/lora.py LoRAConfig (no such field)", applies_to="lora"),
    Rule(name="lora_specialize_active", changes="LoRA: --specialize-active-lora",
         since="0.16.0", until=None, value=True,
         introduced_by="specialize_active_lora (first released in 0.16.0)",
         source="0.16.0 / 0.27.1 / 0.33.0 config/lora.py LoRAConfig.specialize_active_lora, "
         "engine/arg_utils.py --specialize-active-lora", applies_to="lora"),
)

RULES = (LORA_RANKS, LORA_EXTRA_VOCAB, LORA_BIAS, LORA_SPECIALIZE)


class LoraSettings(NamedTuple):
    """The LoRA settings of a deployment, resolved as the release resolves them."""

    max_loras: int
    rank: int
    extra_vocab: int  # 0 where the release has no lora_extra_vocab_size
    dtype: str  # the model dtype for "auto"
    fully_sharded: bool
    bias: bool  # --enable-lora-bias: a bias slot beside each LoRA B
    support: LoraSupport  # what the family's vLLM class does under LoRA at the release


def _sized(rows: tuple[Rule, ...]) -> list[Rule]:
    """The ``Family.lora`` rows memprof sizes (not those it refuses: expert LoRA, unmodelled
    layers)."""
    return [r for r in rows if isinstance(r.value, LoraSupport)
            and not (r.value.experts or r.value.unmodelled)]


def _refuse_family(family: str, version: str) -> BadInput:
    from memprof.core.models.families import ROWS

    rows = [r for r in family_row(family).lora if isinstance(r.value, LoraSupport)]
    first = rows[0] if rows else None
    # a family whose class gained SupportsLoRA within the releases read says where
    before = (f"; vLLM {version} has no LoRA for it: {first.introduced_by}"
              if first is not None and first.since and "first released" in first.introduced_by
              and version_key(split_generation(version)[0]) < version_key(first.since)
              else "")
    sized = _sized(family_row(family).lora)
    if sized:  # read for other releases
        spans = ", ".join(r.span for r in sized)
        return BadInput(f"memprof reads vLLM's LoRA layers of the {family} family at {spans}, "
                        f"not at {version}{before}",
                        hint=f"use an --engine-version in {spans}, or drop --enable-lora to "
                        "estimate the model without adapters")
    known = ", ".join(r.name for r in ROWS if _sized(r.lora))
    return BadInput(f"memprof does not model vLLM's LoRA layers for the {family} family "
                    f"(vLLM {version}){before}; it reads them for: {known}",
                    hint="drop --enable-lora to estimate the model without adapters (the "
                    "estimate then leaves out their stacked buffers)")


def lora_settings(family: str, version: str | None, *, max_loras: int | None,
                  max_lora_rank: int | None, lora_extra_vocab_size: int | None,
                  lora_dtype: str, fully_sharded_loras: bool, model_dtype: str,
                  tp: int, enable_lora_bias: bool = False,
                  specialize_active_lora: bool = False, architecture: str = "") -> LoraSettings:
    """The settings as vLLM ``version`` reads them; :class:`BadInput` for what its LoRAConfig
    refuses, for a family whose LoRA layers memprof has not read, and for expert LoRA (vLLM
    0.12.0 on), which memprof does not model yet. ``architecture``: the checkpoint's, for a family
    whose classes differ (``LoraSupport.no_embeddings``)."""
    release = resolve_version(version)
    loras = DEFAULT_MAX_LORAS if max_loras is None else max_loras
    if loras < 1:
        raise BadInput(f"--max-loras must be at least 1, got {loras}",
                       hint="vLLM's LoRAConfig refuses it; the default is 1")
    if loras > MAX_LORAS:
        raise BadInput(f"--max-loras {str(loras)[:24]} is above memprof's bound {MAX_LORAS:,}",
                       hint="adapters in one batch: a few to a few hundred in practice")
    rank = DEFAULT_MAX_LORA_RANK if max_lora_rank is None else max_lora_rank
    ranks: tuple[int, ...] = value_at(LORA_RANKS, release, _RANKS_082)  # type: ignore[assignment]
    if rank not in ranks:
        raise BadInput(f"--max-lora-rank {rank} is not one vLLM {release} accepts",
                       hint="one of " + ", ".join(map(str, ranks)))
    sizes: tuple[int, ...] = value_at(LORA_EXTRA_VOCAB, release, ())  # type: ignore[assignment]
    if not sizes and lora_extra_vocab_size is not None:
        first = LORA_EXTRA_VOCAB[-1].since
        raise BadInput(f"--lora-extra-vocab-size: vLLM {release} has no such setting (removed "
                       f"in {first})", hint=f"drop it, or use --engine-version below {first}")
    extra = 0
    if sizes:
        extra = DEFAULT_EXTRA_VOCAB if lora_extra_vocab_size is None else lora_extra_vocab_size
        if extra not in sizes:
            raise BadInput(f"--lora-extra-vocab-size {extra} is not one vLLM {release} accepts",
                           hint="one of " + ", ".join(map(str, sizes)))
    if enable_lora_bias and not value_at(LORA_BIAS, release, False):
        first = LORA_BIAS[-1].since
        raise BadInput(f"--enable-lora-bias: vLLM {release} has no such setting (removed in "
                       f"{first})", hint=f"drop it, or use --engine-version below {first}")
    if specialize_active_lora and not value_at(LORA_SPECIALIZE, release, False):
        first = LORA_SPECIALIZE[-1].since
        raise BadInput(f"--specialize-active-lora: vLLM {release} has no such setting (added "
                       f"in {first})", hint=f"drop it, or use --engine-version {first} or later")
    if lora_dtype not in LORA_DTYPES:
        raise BadInput(f"unknown --lora-dtype {str(lora_dtype)[:40]!r}",
                       hint="one of: " + ", ".join(LORA_DTYPES) + " (auto: the model dtype)")
    if fully_sharded_loras and rank % tp:
        raise BadInput(f"--fully-sharded-loras splits the LoRA rank {rank} over TP {tp}, which "
                       "does not divide it (vLLM's divide() asserts)",
                       hint="use a --max-lora-rank that TP divides, or drop "
                       "--fully-sharded-loras")
    support = value_at(family_row(family).lora, release)
    if not isinstance(support, LoraSupport):
        raise _refuse_family(family, release)
    if support.experts or support.unmodelled:
        what = support.unmodelled or "experts (FusedMoEWithLoRA)"
        spans = ", ".join(r.span for r in _sized(family_row(family).lora))
        raise BadInput(f"vLLM {release} puts LoRA on the {family} family's {what}, whose "
                       "buffers memprof does not model yet",
                       hint="drop --enable-lora to estimate without adapters"
                       + (f", or use an --engine-version in {spans}" if spans else ""))
    if architecture in support.no_embeddings:  # its own class: no embedding modules
        support = support._replace(embeddings=False)
    dtype = model_dtype if lora_dtype == "auto" else lora_dtype
    return LoraSettings(max_loras=loras, rank=rank, extra_vocab=extra, dtype=dtype,
                        fully_sharded=fully_sharded_loras, bias=enable_lora_bias,
                        support=support)

"""SGLang's model dtype, per release and card: what ``--dtype`` (``auto`` unless given) serves a
checkpoint in, read in the PyPI wheels 0.4.3 – 0.5.23 (vLLM's reading is
``memprof/core/auto_dtype.py``, which asks this module for an SGLang deployment).

SGLang settles it in two steps:

1. ``ModelConfig`` (srt/configs/model_config.py ``_get_and_verify_dtype``, adapted from vLLM
   0.6.4.post1's): an explicit ``--dtype`` as given; ``auto`` the checkpoint's dtype (that of the
   text config, ``hf_text_config``), a float32 checkpoint in float16 ("Following the common
   practice, we use float16 for float32 models", ``SGLANG_AUTO_DTYPE``) except the Gemma model
   types, which take bfloat16 (the families' ``sglang_auto_dtype`` rows: Gemma 2's at every
   release, the other Gemma model types' from 0.4.5, when the test became a prefix). No platform
   check there: unlike vLLM from 0.9.1, a bfloat16 checkpoint stays bfloat16 at this step on
   every card.
2. ``ModelRunner.load_model`` on CUDA (``SGLANG_LEGACY_GPU``), before the weights load and the
   KV pool is sized: below compute capability 8.0 the model dtype becomes float16 whatever step
   1 gave, an explicit ``--dtype bfloat16`` or ``float32`` too ("Compute capability below sm80.
   Use float16 due to lack of bfloat16 support.", an info line, no refusal); where the minor
   number is then below 5 as well SGLang raises "SGLang only supports sm75 and above." whatever
   ``--dtype``. So a T4 or an RTX 20xx (7.5) serves float16 (``--kv-cache-dtype auto``
   follows it) and a V100 (7.0) does not start.

ROCm takes the same path (SGLang's device is "cuda" there), where torch reports the gfx
architecture's own numbers (9.x on CDNA, 11.x on RDNA 3): never below 8, no fallback. memprof
has no compute capability for a ROCm card or an unknown architecture (``gpus.arch_cc``) and
applies neither step 2 rule there.

Not modelled: the per-architecture dtype SGLang's ``ServerArgs`` sets before step 1 (bfloat16
for an MXFP4 ``GptOssForCausalLM`` from 0.5.1, for ``MistralLarge3ForCausalLM`` and
``PixtralForConditionalGeneration`` from 0.5.7: server_args.py, from 0.5.15 arg_groups/); it
differs from what memprof serves only under an explicit ``--dtype`` other than bfloat16.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from memprof.base.errors import BadInput
from memprof.core.gpus import arch_cc
from memprof.core.models.families import family_row
from memprof.core.versions import Rule, value_at

_READ = "read in the sglang {} wheel (first release with it)"
_OLDEST = "before 0.4.3 (read in the sglang 0.4.3 wheel, the oldest release modelled)"
_CONFIG = "configs/model_config.py _get_and_verify_dtype"


SGLANG_AUTO_DTYPE: tuple[Rule, ...] = (
    Rule(name="sglang_auto_dtype", changes="--dtype auto: a float32 checkpoint's dtype",
         since=None, until=None, value="float16", engine="sglang", introduced_by=_OLDEST,
         source=f"sglang 0.4.3 – 0.5.23 {_CONFIG}: auto is the checkpoint's torch_dtype, a "
         "float32 one in float16 ('Following the common practice, we use float16 for float32 "
         "models'), in bfloat16 for the Gemma model types (the families' sglang_auto_dtype "
         "rows); the same reading in every wheel to 0.5.23 (from 0.5.5 the checkpoint's dtype "
         "is read as config.dtype, transformers' new name, from 0.5.9 from a dict config too; "
         "the source snapshots, not read, lie between releases that read it so)"),
)


class LegacyGpu(NamedTuple):
    """SGLang's start-up on an older CUDA card: below compute capability major ``float16_below``
    the model runs in float16; there, a minor number below ``refused_minor_below`` is refused."""

    float16_below: int
    refused_minor_below: int

    def __str__(self) -> str:  # as ``memprof versions`` prints the row
        return (f"float16 below compute capability {self.float16_below}.0 whatever --dtype; "
                f"refused there where the minor number is below {self.refused_minor_below}")


SGLANG_LEGACY_GPU: tuple[Rule, ...] = (
    Rule(name="sglang_legacy_gpu_dtype", changes="dtype served below compute capability 8.0",
         since=None, until=None, value=LegacyGpu(float16_below=8, refused_minor_below=5),
         engine="sglang", introduced_by=_OLDEST,
         source="sglang 0.4.3 – 0.5.15 model_executor/model_runner.py ModelRunner.load_model, "
         "0.5.16 – 0.5.23 model_executor/model_runner_components/load_model_utils.py "
         "maybe_downgrade_dtype_for_legacy_gpu (on device 'cuda'): torch.cuda."
         "get_device_capability()[0] < 8 sets model_config.dtype = torch.float16 whatever "
         "--dtype, then [1] < 5 raises RuntimeError('SGLang only supports sm75 and above.'); "
         "the same in every wheel read; the source snapshots, not read, lie between releases "
         "that read it so"),
)


def auto_model_dtype(family: str, checkpoint: str, version: str) -> str:
    """Step 1 for ``--dtype auto``: the checkpoint's dtype, a float32 one by ``SGLANG_AUTO_DTYPE``
    or the family's own ``sglang_auto_dtype`` rows (the Gemma model types' bfloat16)."""
    if checkpoint != "float32":
        return checkpoint
    if value_at(family_row(family).sglang_auto_dtype, version, None, "sglang") == "bf16_for_fp32":
        return "bfloat16"
    return str(value_at(SGLANG_AUTO_DTYPE, version, "float16", "sglang"))


def _legacy(arch: str, version: str) -> tuple[LegacyGpu, int] | None:
    """The legacy-card row and the card's capability where step 2 applies (None: it does not:
    capability 8.0 or newer, ROCm, an unknown architecture)."""
    cc = arch_cc(arch)
    row = value_at(SGLANG_LEGACY_GPU, version, None, "sglang")
    if cc is None or not isinstance(row, LegacyGpu) or cc // 10 >= row.float16_below:
        return None
    return row, cc


@lru_cache(maxsize=256)  # asked once per estimate and per rank's weights
def sglang_served_dtype(family: str, checkpoint: str, asked: str, version: str,
                        arch: str) -> str:
    """The dtype SGLang ``version`` serves the model in on a card of architecture ``arch``:
    ``asked`` (``--dtype``, aliases resolved) or step 1's reading of ``auto``, then float16 below
    compute capability 8.0 (step 2)."""
    dtype = auto_model_dtype(family, checkpoint, version) if asked == "auto" else asked
    return "float16" if _legacy(arch, version) is not None else dtype


def check_sglang_card(version: str, arch: str, gpu_name: str) -> None:
    """Refuse what SGLang refuses when the model loads: a CUDA card below compute capability 8.0
    whose minor number is below 5 (a V100, 7.0), whatever ``--dtype``."""
    legacy = _legacy(arch, version)
    if legacy is None:
        return
    row, cc = legacy
    if cc % 10 < row.refused_minor_below:
        raise BadInput(f"SGLang {version} does not start on {gpu_name} (compute capability "
                       f"{cc // 10}.{cc % 10}): ModelRunner.load_model raises 'SGLang only "
                       "supports sm75 and above.' whatever --dtype",
                       hint="no --dtype avoids it; pick a card of compute capability 7.5 or "
                       "newer (memprof gpus), or --engine vllm")


def sglang_dtype_notes(family: str, checkpoint: str, asked: str, version: str,
                       arch: str) -> tuple[str, ...]:
    """The estimate's note where step 2 changes the dtype step 1 gave."""
    legacy = _legacy(arch, version)
    if legacy is None:
        return ()
    cc = legacy[1]
    first = auto_model_dtype(family, checkpoint, version) if asked == "auto" else asked
    if first == "float16":
        return ()
    return (f"capability {cc // 10}.{cc % 10} < 8.0: SGLang serves the model in float16, not "
            f"{first} (ModelRunner.load_model: 'Compute capability below sm80. Use float16 due "
            "to lack of bfloat16 support.', whatever --dtype; "
            "memprof.core.engines.sglang_dtype SGLANG_LEGACY_GPU)",)

"""vLLM's ``--dtype auto``: the dtype a release serves a checkpoint in on a given card.

Two readings, per release (``AUTO_DTYPE``):

- before 0.9.1 (``_get_and_verify_dtype`` in vllm/config.py, read in 0.6.0, 0.6.6, 0.7.0, 0.8.5 and
  0.9.0): a float32 checkpoint is served in float16 ("Following the common practice, we use
  float16 for float32 models"; a family's ``vllm_auto_dtype`` rows say where bfloat16 is
  taken instead, Gemma 2's), any other in its own dtype, whatever the
  card. A bfloat16 result on a card below compute capability 8.0 is then refused when the worker
  starts (V0 worker/worker.py and V1 v1/worker/gpu_worker.py ``_check_if_gpu_supports_dtype``:
  "Bfloat16 is only supported on GPUs with compute capability of at least 8.0 ... You can use
  float16 instead by explicitly setting the `dtype` flag in CLI");
- from 0.9.1 (``_resolve_auto_dtype``, vllm/config.py in 0.9.1 and 0.9.2,
  vllm/config/__init__.py in 0.10.1.1, vllm/config/model.py in 0.11.0): the dtypes the platform
  supports (platforms/cuda.py ``supported_dtypes``: bfloat16, float16, float32 from 8.0; float16,
  float32 below it), less float16 for the model types vLLM keeps off it
  (``_FLOAT16_NOT_SUPPORTED_MODELS``, the families' ``vllm_auto_dtype`` rows), the first of them
  preferred; a float32 checkpoint takes the preferred one, any other its own where supported
  and the preferred one otherwise ("Casting ... to ..."). So a bfloat16 checkpoint runs in
  float16 on a T4 or a V100, and a model type kept off float16 in float32 there.

SGLang's reading, per release and card (its own ``auto`` and the float16 it serves below
compute capability 8.0 whatever ``--dtype``), is ``memprof/core/engines/sglang_dtype.py``; the
functions here ask it for an SGLang deployment, with the model's family.
"""

from __future__ import annotations

from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.dtypes import FLAG_ALIASES
from memprof.core.engines import engine_of
from memprof.core.gpus import arch_cc
from memprof.core.models import ModelSpec
from memprof.core.models.families import family_row
from memprof.core.versions import Rule, value_at

AUTO_DTYPE: tuple[Rule, ...] = (
    Rule(name="auto_dtype", changes="--dtype auto: the dtype served", since=None, until="0.9.1",
         value="checkpoint", introduced_by="before 0.6.0",
         removed_by="0.9.1 config.py _resolve_auto_dtype",
         source="0.6.0 / 0.6.6 / 0.7.0 / 0.8.5 / 0.9.0 config.py _get_and_verify_dtype (float32 "
         "-> float16, Gemma 2 bfloat16; else the checkpoint's); worker.py / v1/worker/"
         "gpu_worker.py _check_if_gpu_supports_dtype (no bfloat16 below 8.0)"),
    Rule(name="auto_dtype", changes="--dtype auto: the dtype served", since="0.9.1", until=None,
         value="platform", introduced_by="0.9.1 config.py _resolve_auto_dtype",
         source="0.9.1 / 0.9.2 config.py, 0.10.1.1 config/__init__.py, 0.11.0 config/model.py "
         "_resolve_auto_dtype and _FLOAT16_NOT_SUPPORTED_MODELS; platforms/cuda.py "
         "supported_dtypes"),
)

BF16_MIN_CC = 80  # platforms/cuda.py supported_dtypes: bfloat16 from compute capability 8.0
ALIASES = FLAG_ALIASES  # --dtype's other spellings (memprof.core.dtypes)


def served_dtype(spec: ModelSpec, dep: Deployment, arch: str = "") -> str:
    """The dtype the deployment serves ``spec`` in: ``--dtype`` as given, or the release's
    reading of ``auto`` (``AUTO_DTYPE``) on a card of architecture ``arch``; an engine with a
    reading of its own (``Engine.served_dtype``: SGLang's, ``engines/sglang_dtype.py``) by it."""
    asked = ALIASES.get(dep.dtype, dep.dtype)
    own = engine_of(dep).served_dtype(dep, spec.family, spec.dtype, asked, arch)
    if own is not None:
        return own
    if asked != "auto":
        return asked
    return _auto(spec.family, spec.dtype, dep.engine, dep.engine_version, arch)


@lru_cache(maxsize=256)  # asked once per estimate and per rank's weights: a sweep asks it often
def _auto(family_name: str, ckpt: str, engine: str, version: str, arch: str) -> str:
    reading = value_at(AUTO_DTYPE, version, None, engine)
    family = value_at(family_row(family_name).vllm_auto_dtype, version, None, engine)
    if reading == "checkpoint":
        if ckpt != "float32":
            return ckpt
        return "bfloat16" if family == "bf16_for_fp32" else "float16"
    if reading == "platform":
        cc = arch_cc(arch)
        supported = ["bfloat16", "float16", "float32"]
        if cc is not None and cc < BF16_MIN_CC:
            supported.remove("bfloat16")
        if family == "no_float16":
            supported.remove("float16")
        return ckpt if ckpt in supported and ckpt != "float32" else supported[0]
    raise ValueError(f"no --dtype auto reading for {engine} {version}")


def check_served_dtype(spec: ModelSpec, dep: Deployment, arch: str, gpu_name: str) -> None:
    """Refuse what the worker refuses: a bfloat16 model on a card below 8.0, which ``auto``
    gives a bfloat16 checkpoint before vLLM 0.9.1; and a card the engine does not start on
    (``Engine.check_card``: SGLang below compute capability 7.5, ``engines/sglang_dtype.py``)."""
    engine_of(dep).check_card(dep, arch, gpu_name)
    cc = arch_cc(arch)
    if cc is None or cc >= BF16_MIN_CC or dep.dtype != "auto":
        return  # an explicit --dtype bfloat16 there is capability.check_capability's
    if value_at(AUTO_DTYPE, dep.engine_version, None, dep.engine) != "checkpoint":
        return
    if served_dtype(spec, dep, arch) == "bfloat16":
        raise BadInput(f"vLLM {dep.engine_version} serves this {spec.dtype} checkpoint in "
                       f"bfloat16 under --dtype auto and refuses bfloat16 on {gpu_name} (compute "
                       f"capability {cc // 10}.{cc % 10}; worker _check_if_gpu_supports_dtype); "
                       "from 0.9.1 auto picks a dtype the card supports",
                       hint="pass --dtype float16 (what vLLM's message asks for), or a release "
                       "from 0.9.1")


def served_dtype_notes(spec: ModelSpec, dep: Deployment, arch: str,
                       served: str) -> tuple[str, ...]:
    """What the estimate says where the dtype served is not the checkpoint's because of the card:
    the engine's own notes (``Engine.dtype_notes``), else vLLM's auto on a card below 8.0."""
    asked = ALIASES.get(dep.dtype, dep.dtype)
    own = engine_of(dep).dtype_notes(dep, spec.family, spec.dtype, asked, arch)
    if own is not None:
        return tuple(own)
    cc = arch_cc(arch)
    if (asked != "auto" or spec.dtype not in ("bfloat16", "float32") or cc is None
            or cc >= BF16_MIN_CC or served == spec.dtype):
        return ()
    return (f"capability {cc // 10}.{cc % 10} < 8.0: vLLM serves this {spec.dtype} "
            f"checkpoint in {served} (memprof.core.auto_dtype: _resolve_auto_dtype from 0.9.1, "
            "float16 for a float32 checkpoint before it)",)

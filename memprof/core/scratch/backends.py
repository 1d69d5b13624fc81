"""Which attention backend a deployment runs (vLLM's default, or a checked ``--attention-backend``)
and which scratch policy current engine releases use."""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.core.attention import kind_of
from memprof.core.attention_backends import (
    BY_NAME,
    NAMES,
    ROWS,
    arch_refusal,
    chosen,
    fp8_kv_refusal,
)
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.gpus import GPU
from memprof.core.kv_dtypes import GQA, MLA, attention_kind, kv_dtype
from memprof.core.kv_dtypes import ROWS as KV_ROWS
from memprof.core.models import ModelSpec

# ``--attention-backend`` values memprof knows: the rows of ``memprof.core.attention_backends``.
BACKENDS = NAMES


# --- backends ------------------------------------------------------------------------------------


def _row_kind(spec: ModelSpec) -> str:
    a = spec.layers[0].attention
    return attention_kind(a.kind, a.has_indexer)


def default_backend(spec: ModelSpec, gpu: GPU, kv_cache_dtype: str,
                    engine_version: str | None = None) -> str:
    """The attention backend vLLM picks when ``--attention-backend`` is not given: the one a KV
    dtype forces (``kv_dtypes`` rows: TurboQuant), else the row whose ``default_for`` names the
    model's attention kind and the GPU (``attention_backends.default_for``):

    - DeepSeek-V4 and DeepSeek-V3.2 sparse MLA: AITER sparse MLA on ROCm (the only ROCm path,
      vLLM #40889 review), FlashMLA sparse on NVIDIA (vLLM @023da1fc flashmla_sparse);
    - MLA: CUTLASS MLA on SM100, FlashMLA on SM90 (and when the architecture is unknown), Triton
      MLA on older NVIDIA GPUs and on ROCm, where AITER MLA is opt-in (``VLLM_ROCM_USE_AITER``);
    - GQA: FlashInfer on SM100, FlashAttention on other NVIDIA GPUs, Triton attention on ROCm;
      an fp8 KV cache FlashAttention does not read (off compute capability 9.0) runs what vLLM
      falls to at ``engine_version`` (``attention_backends.fp8_kv_fallback``; None: the newest
      release modelled).
    """
    kind = spec.layers[0].attention.kind
    kv = kv_dtype(kv_cache_dtype)
    if kv.forces_backend is not None:
        if _row_kind(spec) not in kv.kinds:
            raise BadInput(f"--kv-cache-dtype {kv_cache_dtype} supports standard attention only",
                           hint=f"{spec.name} uses {kind.upper()}; use fp8")
        return kv.forces_backend
    row = chosen(_row_kind(spec), gpu.arch, gpu.is_rocm, kv_cache_dtype, None, engine_version)
    if row is None:  # chosen answers None only for an asked name no row has
        raise LookupError(f"no attention backend row for {spec.name} on {gpu.arch}")
    return row.name


def _default(spec: ModelSpec, gpu: GPU, dep: Deployment) -> str:
    return default_backend(spec, gpu, dep.kv_cache_dtype, dep.engine_version)


def resolve_backend(spec: ModelSpec, gpu: GPU, dep: Deployment) -> str:
    """``dep.attention_backend`` checked against the model, KV dtype and GPU (the rows of
    ``attention_backends`` and ``kv_dtypes``), or the default.

    Raises ``BadInput`` for an unknown name or a combination vLLM refuses.
    """
    kv = dep.kv_cache_dtype
    name = dep.attention_backend
    if name is None:
        return default_backend(spec, gpu, kv, dep.engine_version)
    key = name.strip().lower()
    if key not in BY_NAME:
        raise BadInput(f"unknown --attention-backend {name!r}",
                       hint="one of: " + ", ".join(BACKENDS))
    row = BY_NAME[key]
    kind = spec.layers[0].attention.kind
    row_kind = _row_kind(spec)
    kv_row = kv_dtype(kv)
    readers = [r.name for r in KV_ROWS if r.forces_backend == row.name]
    if readers and kv not in readers:
        raise BadInput(f"--attention-backend {row.name} needs a {row.shown} KV cache",
                       hint=f"add --kv-cache-dtype {readers[0]} (or another {row.name}_* "
                            "preset)")
    if kv_row.forces_backend is not None and kv_row.forces_backend != row.name:
        raise BadInput(f"--kv-cache-dtype {kv} is read by the {kv_row.forces_backend} backend "
                       "only", hint=f"drop --attention-backend or use {kv_row.forces_backend}")
    if row_kind == GQA and GQA not in row.kinds:
        raise BadInput(f"--attention-backend {row.name} is an MLA backend but {spec.name} uses "
                       "standard attention (GQA)",
                       hint=f"use {_default(spec, gpu, dep)} (the default)")
    if row_kind != GQA and GQA in row.kinds:
        raise BadInput(f"--attention-backend {row.name} cannot run {spec.name}'s "
                       f"{kind.upper()} attention",
                       hint=f"use {_default(spec, gpu, dep)} (the default)")
    if row_kind not in row.kinds:
        raise BadInput(f"--attention-backend {row.name} does not run DeepSeek sparse attention",
                       hint="one of: " + ", ".join(sorted(r.name for r in ROWS
                                                          if row_kind in r.kinds)))
    why = arch_refusal(row, gpu.name, gpu.arch, gpu.is_rocm, row_kind)
    if why:
        raise BadInput(f"--attention-backend {row.name} on {gpu.name}: {why}",
                       hint=f"use {_default(spec, gpu, dep)} (the default)")
    why = fp8_kv_refusal(row, gpu.name, gpu.arch, gpu.is_rocm, kv, dep.engine_version)
    if why:
        raise BadInput(f"--attention-backend {row.name} with --kv-cache-dtype {kv}: {why}",
                       hint=f"drop --attention-backend (vLLM runs {_default(spec, gpu, dep)}) "
                            "or use --kv-cache-dtype auto")
    return row.name


# --- block sizes the backends take ---------------------------------------------------------------


def block_size_for(spec: ModelSpec, gpu: GPU, dep: Deployment) -> tuple[int | None, str]:
    """The block size vLLM runs with for ``dep.block_size`` given (``None``: left to the
    default), and a note when vLLM forces another; a size the backend refuses is ``BadInput``.
    The rule is the backend row's (``keeps``, ``forces``, ``sparse_block``; vLLM
    platforms/cuda.py ``check_and_update_config``, v0.11.0, "Forcing kv cache block size to 64
    for FlashMLA backend."; GQA kernels ``get_supported_kernel_block_sizes``: a size no kernel
    block divides is vLLM's "No common block size" ValueError).

    V0 releases (before 0.8.0), kinds with a packed KV pool (DeepSeek-V4) and engines that do
    not select vLLM's attention backends (SGLang's ``--page-size``) are taken as given.
    """
    from memprof.core.kvcache import V0_BLOCK_SIZE
    from memprof.core.versions import value_at

    asked = dep.block_size
    if (asked is None or not engine_of(dep).selects_attention_backend
            or isinstance(value_at(V0_BLOCK_SIZE, dep.engine_version), int)):
        return asked, ""
    a = spec.layers[0].attention
    if kind_of(a).packed_kv_pool:  # the packed pool's own KV plan lays out its pages
        return asked, ""
    row = BY_NAME[resolve_backend(spec, gpu, dep)]
    if a.kind == MLA:
        if a.has_indexer and row.sparse_block is not None:
            forced: int | None = row.sparse_block
            ok = asked == row.sparse_block
            name = f"{row.shown} sparse (DeepSeek-V3.2)"
        elif row.forces is not None:
            forced, ok, name = row.forces, row.keeps(asked), row.name
        else:
            return asked, ""
        if ok:
            return asked, ""
        return forced, (f"--block-size {asked}: vLLM forces {forced} for {name} "
                        "(platforms/cuda.py check_and_update_config)")
    if not row.keeps(asked):
        raise BadInput(f"--block-size {asked} on {row.name}: its kernels take multiples of "
                       f"{row.keeps_multiple_of}, so vLLM finds no common block size",
                       hint="use --block-size 16 (vLLM's default) or 32/64/128")
    return asked, ""


def default_scratch_policy(backend: str) -> str:
    """What current engine releases do, per catalog key (``--scratch`` left out).

    - ``cutlass_mla`` / ``flashinfer_mla``: ``"shared"``. The per-layer ``_decode_out`` of vLLM
      #37442 was reverted by #38359 (merged 2026-04-01); vLLM@52a31cc allocates the CUTLASS
      output per call (``new_empty``), so one layer's worth is live at a time (vLLM #37442 / #38359,
      vllm/v1/attention/backends/mla/cutlass_mla.py).
    - ``turboquant``: ``"shared"``. #40941 (merged 2026-04-26, commit 2cc008e7) removed the
      per-layer ``register_buffer`` set and the per-layer dequant buffers; both come from the
      WorkspaceManager (vLLM@52a31cc model_executor/layers/quantization/turboquant/).
    - ``aiter_mla``: ``"shared"``. The per-layer-per-step copies of #40889 were never merged
      upstream (#40889/#40892 closed; the 0.20.2rc1 fallback that did the same was issue #41962),
      the ROCm fork carries the shared scratch (#40892 → ROCm/vllm#902, #40909 → ROCm/vllm#903),
      and upstream's Triton sparse MLA (#41812, merged 2026-05-11) reads the fp8 cache without a
      whole-pool dequant at all (vLLM #41812). The shared variant is therefore an upper
      bound for upstream builds; their per-call split-K partials (#50566) are not modelled.
    - ``sglang_dp_attention``: ``"shared"`` (per forward). SGL@d315eb7 allocates the gathered
      buffer with ``get_global_dp_buffer()`` on every forward; the persistent graph-runner buffer
      is the #8280 design (SGLang #8280 cuda_graph_runner.py; SGL@d315eb7 layers/dp_attention.py).
    - every other backend has no per-layer scratch in the catalog: ``"shared"``.
    """
    del backend  # every current release shares; the docstring records why, key by key
    return "shared"

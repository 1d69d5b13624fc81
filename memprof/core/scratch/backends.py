"""Which attention backend a deployment runs (vLLM's default, or a checked ``--attention-backend``)
and which scratch policy current engine releases use."""

from __future__ import annotations

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.gpus import GPU
from memprof.core.models import ModelSpec

# ``--attention-backend`` values memprof knows (vLLM's ``AttentionBackendEnum`` names, lower case).
BACKENDS = ("cutlass_mla", "flashinfer_mla", "flashmla", "triton_mla", "flash_attn", "flashinfer",
            "turboquant", "aiter_mla", "triton_attn")
MLA_BACKENDS = frozenset({"cutlass_mla", "flashinfer_mla", "flashmla", "triton_mla", "aiter_mla"})
GQA_BACKENDS = frozenset({"flash_attn", "flashinfer", "triton_attn", "turboquant"})
# Backends that run DeepSeek sparse attention (V3.2 indexer, V4): FlashMLA sparse (SM90/SM100),
# FlashInfer MLA sparse (SM100, ``FLASHINFER_MLA_SPARSE_DSV4``, vLLM @023da1fc flashmla_sparse /
# fp8_ds_mla slot) and AITER on
# ROCm ("on ROCm, DeepSeek sparse attention can only run through AITER", review of vLLM #40889).
SPARSE_MLA_BACKENDS = frozenset({"flashmla", "flashinfer_mla", "aiter_mla"})


# --- backends ------------------------------------------------------------------------------------


def default_backend(spec: ModelSpec, gpu: GPU, kv_cache_dtype: str) -> str:
    """The attention backend vLLM picks when ``--attention-backend`` is not given.

    - ``--kv-cache-dtype turboquant_*`` forces the TurboQuant backend (the only one that reads its
      packed slots; ``TurboQuantAttentionBackend.supported_kv_cache_dtypes``, vLLM@52a31cc
      model_executor/layers/quantization/turboquant/);
    - DeepSeek-V4: AITER sparse MLA on ROCm (the only ROCm path, vLLM #40889 review), FlashMLA
      sparse on NVIDIA (vLLM @023da1fc flashmla_sparse / fp8_ds_mla slot);
    - MLA: CUTLASS MLA on SM100 (its block size 128 is the SM100 default, ``kvcache``), FlashMLA on
      SM90 (and when the architecture is unknown), DeepSeek-V3.2's sparse MLA on FlashMLA; Triton
      MLA on older NVIDIA GPUs and on ROCm, where AITER MLA is opt-in (``VLLM_ROCM_USE_AITER``);
    - GQA: FlashInfer on SM100, FlashAttention on other NVIDIA GPUs, Triton attention on ROCm.
    """
    kind = spec.layers[0].attention.kind
    amd = gpu.is_rocm
    sm100 = gpu.arch.startswith("sm10")
    if kv_cache_dtype.startswith("turboquant"):
        if kind != "gqa":
            raise BadInput(f"--kv-cache-dtype {kv_cache_dtype} supports standard attention only",
                           hint=f"{spec.name} uses {kind.upper()}; use fp8")
        return "turboquant"
    if kind == "dsv4":
        return "aiter_mla" if amd else "flashmla"
    if kind == "mla":
        if spec.layers[0].attention.has_indexer:
            return "aiter_mla" if amd else "flashmla"
        if amd:
            return "triton_mla"
        if sm100:
            return "cutlass_mla"
        if gpu.arch in ("sm90", "unknown"):
            return "flashmla"
        return "triton_mla"
    if amd:
        return "triton_attn"
    return "flashinfer" if sm100 else "flash_attn"


def _arch_ok(backend: str, gpu: GPU) -> str | None:
    """Why ``backend`` cannot run on ``gpu`` (None: it can, or the architecture is unknown)."""
    if gpu.arch == "unknown":
        return None
    amd = gpu.is_rocm
    if backend == "aiter_mla" and not amd:
        return "AITER runs on AMD Instinct GPUs (gfx9xx) only"
    if backend in ("flash_attn", "flashinfer", "flashmla", "flashinfer_mla", "cutlass_mla") and amd:
        return f"{backend} is an NVIDIA backend"
    if backend in ("cutlass_mla", "flashinfer_mla") and not gpu.arch.startswith("sm10"):
        return f"{backend} needs Blackwell (SM100), {gpu.name} is {gpu.arch}"
    if backend == "flashmla" and gpu.arch not in ("sm90",) and not gpu.arch.startswith("sm10"):
        return f"FlashMLA needs SM90 or SM100, {gpu.name} is {gpu.arch}"
    return None


def resolve_backend(spec: ModelSpec, gpu: GPU, dep: Deployment) -> str:
    """``dep.attention_backend`` checked against the model, KV dtype and GPU, or the default.

    Raises ``BadInput`` for an unknown name or a combination vLLM refuses.
    """
    kv = dep.kv_cache_dtype
    name = dep.attention_backend
    if name is None:
        return default_backend(spec, gpu, kv)
    backend = name.strip().lower()
    if backend not in BACKENDS:
        raise BadInput(f"unknown --attention-backend {name!r}",
                       hint="one of: " + ", ".join(BACKENDS))
    kind = spec.layers[0].attention.kind
    if backend == "turboquant" and not kv.startswith("turboquant"):
        raise BadInput("--attention-backend turboquant needs a TurboQuant KV cache",
                       hint="add --kv-cache-dtype turboquant_k8v4 (or another turboquant_* "
                            "preset)")
    if kv.startswith("turboquant") and backend != "turboquant":
        raise BadInput(f"--kv-cache-dtype {kv} is read by the turboquant backend only",
                       hint="drop --attention-backend or use turboquant")
    if kind == "gqa" and backend in MLA_BACKENDS:
        raise BadInput(f"--attention-backend {backend} is an MLA backend but {spec.name} uses "
                       "standard attention (GQA)",
                       hint="use " + default_backend(spec, gpu, kv) + " (the default)")
    if kind in ("mla", "dsv4") and backend in GQA_BACKENDS:
        raise BadInput(f"--attention-backend {backend} cannot run {spec.name}'s "
                       f"{kind.upper()} attention",
                       hint="use " + default_backend(spec, gpu, kv) + " (the default)")
    sparse = kind == "dsv4" or spec.layers[0].attention.has_indexer
    if sparse and backend not in SPARSE_MLA_BACKENDS:
        raise BadInput(f"--attention-backend {backend} does not run DeepSeek sparse attention",
                       hint="one of: " + ", ".join(sorted(SPARSE_MLA_BACKENDS)))
    why = _arch_ok(backend, gpu)
    if why:
        raise BadInput(f"--attention-backend {backend} on {gpu.name}: {why}",
                       hint="use " + default_backend(spec, gpu, kv) + " (the default)")
    return backend


# --- block sizes the backends take ---------------------------------------------------------------

# MLA backends whose block size vLLM forces when the requested one does not suit the kernel
# (vllm/platforms/cuda.py CudaPlatform.check_and_update_config, v0.11.0 — "Forcing kv cache block
# size to 64 for FlashMLA backend."): backend -> (sizes kept as given, the size forced otherwise).
# FlashMLA keeps multiples of 64, CUTLASS MLA multiples of 128, FlashInfer MLA 32 or multiples of
# 64; sparse MLA (DeepSeek-V3.2, FlashMLA sparse) exactly 64.
_MLA_FORCED = {"flashmla": (64, 64), "cutlass_mla": (128, 128), "flashinfer_mla": (64, 64)}
# GQA backends' kernel block sizes (``get_supported_kernel_block_sizes``, v0.11.0:
# FlashAttention and Triton attention MultipleOf(16); FlashInfer [16, 32, 64]; TurboQuant
# [16, 32, 64, 128]); a larger manager block is split into kernel blocks that divide it
# (v1/worker/utils.py ``select_common_block_size``), so each takes the multiples of 16 of the
# CLI choices. A size none divides is vLLM's "No common block size" ValueError.
_GQA_KERNEL_MULTIPLE = {"flash_attn": 16, "triton_attn": 16, "flashinfer": 16, "turboquant": 16}


def block_size_for(spec: ModelSpec, gpu: GPU, dep: Deployment) -> tuple[int | None, str]:
    """The block size vLLM runs with for ``dep.block_size`` given (``None``: left to the
    default), and a note when vLLM forces another; a size the backend refuses is ``BadInput``.

    V0 releases (before 0.8.0) and SGLang's ``--page-size`` are taken as given.
    """
    from memprof.core.kvcache import V0_BLOCK_SIZE
    from memprof.core.versions import value_at

    asked = dep.block_size
    if (asked is None or not engine_of(dep).selects_attention_backend
            or isinstance(value_at(V0_BLOCK_SIZE, dep.engine_version), int)):
        return asked, ""
    a = spec.layers[0].attention
    if a.kind == "dsv4":
        return asked, ""
    backend = resolve_backend(spec, gpu, dep)
    if a.kind == "mla":
        if a.has_indexer and backend == "flashmla":
            keep, forced = (64,), 64
            ok = asked in keep
            name = "FlashMLA sparse (DeepSeek-V3.2)"
        elif backend in _MLA_FORCED:
            base, forced = _MLA_FORCED[backend]
            ok = asked % base == 0 or (backend == "flashinfer_mla" and asked == 32)
            name = backend
        else:
            return asked, ""
        if ok:
            return asked, ""
        return forced, (f"--block-size {asked}: vLLM forces {forced} for {name} "
                        "(platforms/cuda.py check_and_update_config)")
    multiple = _GQA_KERNEL_MULTIPLE.get(backend)
    if multiple and asked % multiple:
        raise BadInput(f"--block-size {asked} on {backend}: its kernels take multiples of "
                       f"{multiple}, so vLLM finds no common block size",
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

"""The attention backends memprof knows, one row each: the ``--attention-backend`` value, the
attention kinds it runs, the GPUs it runs on, the KV dtypes it reads, the block sizes it keeps or
forces, where vLLM picks it by default, its scratch family and the releases that have it.

Everything that asks a backend question (the default choice, validating ``--attention-backend``,
the block size, the scratch buffers, the logged graph figure) reads these rows through one
selection, ``chosen``; a new backend is one row. Where the default does not read an fp8 KV cache
(FlashAttention off FA3's compute capability 9.0), vLLM's selector passes over it to the next
backend of its priority list, release by release (``FP8_KV_GQA_BACKEND``, ``FA3_FP8_KV_DTYPES``).

Sources (vLLM): ``vllm/platforms/cuda.py`` ``CudaPlatform.check_and_update_config`` (v0.11.0; the
same forcing at vLLM@002db495): ``block_size`` None → 16, then "Forcing kv cache block size to 64
for FlashMLA backend" when ``block_size % 64``, to 128 for CUTLASS MLA when ``block_size % 128``,
to 64 for FlashInfer MLA unless 32 or a multiple of 64, to 64 for sparse MLA unless 64; each
backend's ``get_supported_kernel_block_sizes`` and ``supports_compute_capability``
(``v1/attention/backends/mla/flashmla.py``: ``[64]``, compute capability major 9 or 10).
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core.kv_dtypes import BY_NAME as KV_BY_NAME
from memprof.core.kv_dtypes import DS_MLA_SLOT, DSV4, FP8_ELEMENT, GQA, MLA, SPARSE_MLA
from memprof.core.kv_dtypes import ROWS as KV_ROWS
from memprof.core.versions import Rule, value_at

_MLA_KV = frozenset({"auto", "fp8", "fp8_e4m3", "bfloat16", "float16"})
_SPARSE_KV = frozenset({*_MLA_KV, "fp8_ds_mla"})
_GQA_KV = frozenset(r.name for r in KV_ROWS if not r.turboquant and r.storage != DS_MLA_SLOT)
_TQ_KV = frozenset(r.name for r in KV_ROWS if r.turboquant)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionBackend:
    """One attention backend (vLLM's ``AttentionBackendEnum`` name, lower case)."""

    name: str
    kinds: frozenset[str]  # attention kinds it runs (kv_dtypes.GQA, MLA, SPARSE_MLA, DSV4)
    vendor: str | None  # "nvidia" / "amd": only that vendor's GPUs; None: any
    vendor_why: str = ""  # the refusal on another vendor's GPU ({name} for the backend)
    archs: tuple[str, ...] = ()  # architecture prefixes it runs on (): every one of its vendor
    arch_why: str = ""  # the refusal on another architecture ({gpu}, {arch})
    # dense MLA only on these architecture prefixes when narrower than ``archs`` (FlashMLA)
    dense_archs: tuple[str, ...] = ()
    dense_why: str = ""
    kv_dtypes: frozenset[str] = frozenset()  # the KV dtypes it reads (documentation)
    # block sizes: kept as given when a multiple of ``keeps_multiple_of`` (or in ``keeps_also``),
    # else vLLM forces ``forces`` (MLA); ``forces`` None: vLLM finds no common kernel block size
    # and refuses (GQA kernels, ``get_supported_kernel_block_sizes``)
    keeps_multiple_of: int | None = None
    keeps_also: tuple[int, ...] = ()
    forces: int | None = None
    # DeepSeek-V3.2 sparse MLA on this backend keeps only this size (forced otherwise)
    sparse_block: int | None = None
    # the block size when --block-size is left out (MLA: vLLM's 16 after the forcing above);
    # None: the engine's default (16, CacheConfig.DEFAULT_BLOCK_SIZE)
    default_block: int | None = None
    # where vLLM picks it when --attention-backend is left out: (kind, where) with where one of
    # "rocm", an architecture ("sm90", "unknown"), an architecture family ("sm10") or "nvidia"
    default_for: tuple[tuple[str, str], ...] = ()
    display: str = ""  # the name in messages ("" → name)
    vllm_class: str = ""  # vLLM's backend class, where a message names it
    scratch: str = ""  # the scratch family of the catalog (scratch/<family>.py), "" none
    # modules about this backend beside its scratch family (repo paths): the kernels that
    # reproduce it and their GPU validation; with ``core/scratch/<scratch>.py`` the only places
    # outside the rows that may name it (tests/test_extension_axes.py)
    modules: tuple[str, ...] = ()
    # architecture prefixes where FULL CUDA graphs run this backend with a fixed split-KV count,
    # whose fp32 accumulators the graphs' pool holds (``cudagraph.full_graph_split_bytes``)
    graph_split_archs: tuple[str, ...] = ()
    # architecture prefixes where it reads a KV cache in fp8 elements (None: wherever it runs);
    # elsewhere vLLM's selector passes over it (``FP8_KV_GQA_BACKEND``) and refuses it when asked
    fp8_kv_archs: tuple[str, ...] | None = None
    releases: str = "every V1 release modelled"
    source: str = ""

    @property
    def shown(self) -> str:
        return self.display or self.name

    def keeps(self, block: int) -> bool:
        """Whether vLLM runs a requested ``block`` as given on this backend."""
        if self.keeps_multiple_of is None:
            return True
        return block % self.keeps_multiple_of == 0 or block in self.keeps_also


_NVIDIA_WHY = "{name} is an NVIDIA backend"
_MLA_DECODE_KERNELS = "memprof/kernels/mla_decode.py"  # the CUTLASS / FlashInfer MLA decodes
# their validation, and TurboQuant's: its run, and its rows and result
_DECODE_VALIDATION = ("memprof/validation/mla_tq.py", "memprof/validation/mla_tq_result.py")
ROWS: tuple[AttentionBackend, ...] = (
    AttentionBackend(
        name="cutlass_mla", kinds=frozenset({MLA}), vendor="nvidia", vendor_why=_NVIDIA_WHY,
        archs=("sm10",), arch_why="cutlass_mla needs Blackwell (SM100), {gpu} is {arch}",
        kv_dtypes=_MLA_KV, keeps_multiple_of=128, forces=128, default_block=128,
        default_for=((MLA, "sm10"),), scratch="mla",
        modules=(_MLA_DECODE_KERNELS, *_DECODE_VALIDATION),
        source="platforms/cuda.py check_and_update_config (v0.11.0): 'Forcing kv cache block "
        "size to 128 for CUTLASS_MLA backend' when block_size % 128; "
        "v1/attention/backends/mla/cutlass_mla.py (SM100 only)"),
    AttentionBackend(
        name="flashinfer_mla", kinds=frozenset({MLA, SPARSE_MLA, DSV4}), vendor="nvidia",
        vendor_why=_NVIDIA_WHY, archs=("sm10",),
        arch_why="flashinfer_mla needs Blackwell (SM100), {gpu} is {arch}",
        kv_dtypes=_SPARSE_KV, keeps_multiple_of=64, keeps_also=(32,), forces=64,
        default_block=64, scratch="mla", modules=(_MLA_DECODE_KERNELS, *_DECODE_VALIDATION),
        source="platforms/cuda.py check_and_update_config (v0.11.0): 'Forcing kv cache block "
        "size to 64 for FlashInferMLA backend' unless 32 or a multiple of 64; sparse: "
        "FLASHINFER_MLA_SPARSE_DSV4 (vLLM @023da1fc)"),
    AttentionBackend(
        name="flashmla", kinds=frozenset({MLA, SPARSE_MLA, DSV4}), vendor="nvidia",
        vendor_why=_NVIDIA_WHY, archs=("sm90", "sm10"),
        arch_why="FlashMLA needs SM90 or SM100, {gpu} is {arch}", dense_archs=("sm90",),
        dense_why="FlashMLA runs dense MLA on Hopper (SM90) only, {gpu} is {arch}; on SM100 "
        "only DeepSeek's sparse MLA", kv_dtypes=_SPARSE_KV,
        keeps_multiple_of=64, forces=64, sparse_block=64, default_block=64,
        default_for=((MLA, "sm90"), (MLA, "unknown"), (SPARSE_MLA, "nvidia"),
                     (DSV4, "nvidia")),
        display="FlashMLA",
        source="platforms/cuda.py check_and_update_config (v0.11.0, and vLLM@002db495): "
        "block_size None → 16, then 'Forcing kv cache block size to 64 for FlashMLA backend' "
        "when block_size % 64 (gated on is_flashmla_dense_supported), 64 exactly for sparse "
        "MLA; v1/attention/ops/flashmla.py (vLLM@055e47c2) is_flashmla_dense_supported: 'FlashMLA "
        "Dense is only supported on Hopper devices.', is_flashmla_sparse_supported: Hopper and "
        "Blackwell DC; v1/attention/backends/mla/flashmla.py (vLLM@01b1d340) "
        "supports_combination returns that reason, get_supported_kernel_block_sizes [64]"),
    AttentionBackend(
        name="triton_mla", kinds=frozenset({MLA}), vendor=None, kv_dtypes=_MLA_KV,
        default_block=64, default_for=((MLA, "nvidia"), (MLA, "rocm")),
        source="v1/attention/backends/mla/triton_mla.py (any block size); default block 64 as "
        "memprof has taken it (vLLM's check_and_update_config leaves 16 for Triton MLA: not "
        "changed here)"),
    AttentionBackend(
        name="aiter_mla", kinds=frozenset({MLA, SPARSE_MLA, DSV4}), vendor="amd",
        vendor_why="AITER runs on AMD Instinct GPUs (gfx9xx) only", kv_dtypes=_SPARSE_KV,
        default_block=64, default_for=((SPARSE_MLA, "rocm"), (DSV4, "rocm")), scratch="dsv4",
        source="v1/attention/backends/mla/rocm_aiter_mla.py; on ROCm DeepSeek sparse attention "
        "runs only through AITER (review of vLLM #40889)"),
    AttentionBackend(
        name="flash_attn", kinds=frozenset({GQA}), vendor="nvidia", vendor_why=_NVIDIA_WHY,
        kv_dtypes=_GQA_KV, keeps_multiple_of=16, default_for=((GQA, "nvidia"),),
        graph_split_archs=("sm90",), fp8_kv_archs=("sm90",),
        source="v1/attention/backends/flash_attn.py get_supported_kernel_block_sizes "
        "MultipleOf(16) (v0.11.0); FlashAttentionMetadataBuilder: aot_schedule = "
        "get_flash_attn_version() == 3 (FA3: compute capability 9.x, "
        "vllm/attention/utils/fa_utils.py) fixes max_num_splits for full CUDA graphs "
        "(v0.11.0, v0.13.0, v0.19.0)"),
    AttentionBackend(
        name="flashinfer", kinds=frozenset({GQA}), vendor="nvidia", vendor_why=_NVIDIA_WHY,
        kv_dtypes=_GQA_KV, keeps_multiple_of=16, default_for=((GQA, "sm10"),),
        scratch="flashinfer", modules=("memprof/core/terms/attn_capture.py",),
        source="v1/attention/backends/flashinfer.py get_supported_kernel_block_sizes "
        "[16, 32, 64] (v0.11.0); a larger block is split into kernel blocks that divide it "
        "(v1/worker/utils.py select_common_block_size)"),
    AttentionBackend(
        name="turboquant", kinds=frozenset({GQA}), vendor=None, kv_dtypes=_TQ_KV,
        keeps_multiple_of=16, display="TurboQuant", vllm_class="TurboQuantAttentionBackend",
        scratch="turboquant", modules=_DECODE_VALIDATION,
        releases="vLLM@52a31cc on",
        source="TurboQuantAttentionBackend (vLLM@52a31cc model_executor/layers/quantization/"
        "turboquant/): get_supported_kernel_block_sizes [16, 32, 64, 128]"),
    AttentionBackend(
        name="triton_attn", kinds=frozenset({GQA}), vendor=None, kv_dtypes=_GQA_KV,
        keeps_multiple_of=16, default_for=((GQA, "rocm"),),
        source="v1/attention/backends/triton_attn.py get_supported_kernel_block_sizes "
        "MultipleOf(16) (v0.11.0)"),
)
BY_NAME: dict[str, AttentionBackend] = {r.name: r for r in ROWS}
NAMES: tuple[str, ...] = tuple(BY_NAME)


def backend(name: str) -> AttentionBackend:
    return BY_NAME[name]


def wheres(arch: str, rocm: bool) -> tuple[str, ...]:
    """The ``default_for`` places a GPU matches, most specific first."""
    if rocm:
        return ("rocm",)
    family = ("sm10",) if arch.startswith("sm10") else ()
    return (*family, arch, "nvidia")


def default_for(kind: str, arch: str, rocm: bool) -> AttentionBackend:
    """The backend vLLM picks for an attention kind on a GPU (``default_for`` of the rows)."""
    for where in wheres(arch, rocm):
        for row in ROWS:
            if (kind, where) in row.default_for:
                return row
    raise LookupError(f"no default attention backend for {kind} on {arch}")


# --- the default GQA backend of an fp8 KV cache ---------------------------------------------------
#
# vLLM V1 picks FlashAttention for GQA on NVIDIA cards of compute capability 8.0 and up (other
# than the 10.x family, where FlashInfer comes first), but FlashAttention reads an fp8 KV cache
# only as FA3 on the 9.0 family. Elsewhere vLLM runs another backend:
# - 0.11.0: platforms/cuda.py ``get_attn_backend_cls``: "(has_sink or
#   use_fp8_kv_cache) and not cls.is_device_capability(90)" returns TRITON_ATTN;
# - 0.11.1 on: the priority list of platforms/cuda.py ``_get_backend_priorities`` (not
#   capability 10: FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION) filtered by each
#   backend's ``supports_kv_cache_dtype`` (v1/attention/backends/flash_attn.py: fp8 only where
#   ``get_flash_attn_version() == 3`` on capability 9; read at 0.11.1, 0.11.2, 0.12.0, 0.13.0,
#   0.17.1, 0.20.0, 0.24.0, 0.28.0, 0.33.0) and ``supports_compute_capability``
#   (flashinfer.py: 7.5-12.1 at 0.11.1-0.20.0, 8.0-12.1 at 0.24.0, 0.28.0 and 0.33.0):
#   FlashInfer, whose ``supported_kv_cache_dtypes`` lists fp8, fp8_e4m3 and fp8_e5m2.
# Before 0.11.0 V1's selector kept FlashAttention (0.8.5, 0.10.2 platforms/cuda.py), whose
# ``FlashAttentionImpl`` refuses an fp8 cache off FA3 (0.8.5 v1/attention/backends/
# flash_attn.py "FlashAttention does not support fp8 kv-cache on this device."); which engine
# such a deployment then runs is not read here, so no rule holds before 0.11.0.
FP8_KV_GQA_BACKEND: tuple[Rule, ...] = (
    Rule(name="fp8_kv_gqa_backend",
         changes="attention backend (and its buffers) of an fp8 KV cache where FlashAttention 2 "
         "would run: Triton attention",
         since="0.11.0", until="0.11.1", value="triton_attn", applies_to="gqa",
         introduced_by="read in the 0.11.0 wheel (V0 removed; the V1 selector's own fallback)",
         removed_by="the priority-list selector (read in the 0.11.1 wheel)",
         source="0.11.0 vllm/platforms/cuda.py CudaPlatform.get_attn_backend_cls: '(has_sink or "
         "use_fp8_kv_cache) and not cls.is_device_capability(90)' → 'Using Triton backend on "
         "V1 engine.'"),
    Rule(name="fp8_kv_gqa_backend",
         changes="attention backend (and its buffers) of an fp8 KV cache where FlashAttention 2 "
         "would run: FlashInfer",
         since="0.11.1", until=None, value="flashinfer", applies_to="gqa",
         introduced_by="the priority-list selector (read in the 0.11.1 wheel)",
         source="0.11.1 / 0.11.2 / 0.12.0 / 0.13.0 / 0.17.1 / 0.20.0 / 0.24.0 / 0.28.0 / 0.33.0 "
         "vllm/platforms/cuda.py _get_backend_priorities (FLASH_ATTN, FLASHINFER, "
         "TRITON_ATTN, FLEX_ATTENTION off capability 10) and get_valid_backends; "
         "v1/attention/backends/flash_attn.py supports_kv_cache_dtype (fp8 only with FA3 on "
         "the 9.0 family; 0.28.0 fa_utils."
         "flash_attn_supports_kv_cache_dtype adds FA4 on 10.0); flashinfer.py "
         "supported_kv_cache_dtypes [auto, fp8, fp8_e4m3, fp8_e5m2]; 0.24.0 log of an A100 "
         "'Using FLASHINFER attention backend out of potential backends: ['FLASHINFER', "
         "'TRITON_ATTN']'"),
)
# below compute capability 8.0 FlashAttention is not vLLM's default, and on the 10.x family
# FlashInfer comes first (0.28.0 on, FA4 reads fp8 there); the selector's pick for an fp8 KV
# cache there is not read here
_NOT_READ = ("sm7", "sm6", "sm10")


# The fp8 KV dtypes FlashAttention 3 reads on its ``fp8_kv_archs``: v1/attention/backends/
# flash_attn.py ``supports_kv_cache_dtype`` took any fp8 cache to ``flash_attn_supports_fp8``
# (0.11.1-0.20.0: ``startswith("fp8")``; 0.21.0: ``is_quantized_kv_cache``); from 0.22.0 only
# ``("fp8", "fp8_e4m3")`` reach FA3 and fp8_e5m2 falls to ``["auto", "float16", "bfloat16"]``
# (read in 0.22.0, 0.23.0, 0.24.0; 0.28.0 / 0.33.0 fa_utils.flash_attn_supports_kv_cache_dtype:
# 'if kv_cache_dtype == "fp8_e5m2": return False'), so the selector passes over it there too.
FA3_FP8_KV_DTYPES: tuple[Rule, ...] = (
    Rule(name="fa3_fp8_kv_dtypes",
         changes="attention backend (and its buffers) of an fp8_e5m2 KV cache on compute "
         "capability 9.0: FlashInfer, FlashAttention 3 no longer reads it",
         since="0.22.0", until=None, value=("fp8", "fp8_e4m3"), applies_to="gqa",
         introduced_by="read in the 0.22.0 wheel (0.21.0: every quantised KV dtype)",
         source="0.22.0 / 0.23.0 / 0.24.0 v1/attention/backends/flash_attn.py "
         "FlashAttentionBackend.supports_kv_cache_dtype: fp8 and fp8_e4m3 only with FA3 on the "
         "9.0 family, else kv_cache_dtype in ['auto', 'float16', 'bfloat16']; 0.28.0 / 0.33.0 "
         "v1/attention/backends/fa_utils.py flash_attn_supports_kv_cache_dtype: fp8_e5m2 → "
         "False"),
)


def _passes_over(row: AttentionBackend, arch: str, rocm: bool, kv_cache_dtype: str,
                 engine_version: str | None) -> bool:
    """Whether vLLM's selector passes over ``row`` for a KV cache in fp8 elements on ``arch``
    at the release: off the row's ``fp8_kv_archs``, or on them for a dtype FA3 no longer reads
    (``FA3_FP8_KV_DTYPES``); only from 0.11.0, where ``FP8_KV_GQA_BACKEND`` holds."""
    kv = KV_BY_NAME.get(kv_cache_dtype)
    if (row.fp8_kv_archs is None or rocm or kv is None or kv.storage != FP8_ELEMENT
            or arch == "unknown" or arch.startswith(_NOT_READ)
            or value_at(FP8_KV_GQA_BACKEND, engine_version, None) is None):
        return False
    if not arch.startswith(row.fp8_kv_archs):
        return True
    reads = value_at(FA3_FP8_KV_DTYPES, engine_version, None)
    return isinstance(reads, tuple) and kv_cache_dtype not in reads


def fp8_kv_fallback(kind: str, arch: str, rocm: bool, kv_cache_dtype: str,
                    engine_version: str | None) -> AttentionBackend | None:
    """The backend vLLM runs instead of the default one for a KV cache in fp8 elements on a card
    where the default does not read it (FlashAttention off FA3's compute capability 9.0:
    ``FP8_KV_GQA_BACKEND`` at the release); None where the default stands."""
    if kind != GQA:
        return None
    try:
        default = default_for(kind, arch, rocm)
    except LookupError:
        return None
    if not _passes_over(default, arch, rocm, kv_cache_dtype, engine_version):
        return None
    return BY_NAME[str(value_at(FP8_KV_GQA_BACKEND, engine_version))]


def fp8_kv_refusal(row: AttentionBackend, gpu_name: str, arch: str, rocm: bool,
                   kv_cache_dtype: str, engine_version: str | None) -> str | None:
    """Why vLLM refuses ``row`` asked for with a KV cache in fp8 elements on the GPU (None: it
    does not): 0.11.1 on, ``get_attn_backend_cls`` validates the asked backend with
    ``supports_kv_cache_dtype`` and raises; 0.11.0 returns it and its ``FlashAttentionImpl``
    raises "FlashAttention does not support fp8 kv-cache on this device."."""
    if not _passes_over(row, arch, rocm, kv_cache_dtype, engine_version):
        return None
    if arch.startswith(row.fp8_kv_archs or ()):
        return (f"{row.shown} (FlashAttention 3) does not read --kv-cache-dtype "
                f"{kv_cache_dtype} at this release (flash_attn.py supports_kv_cache_dtype)")
    return (f"{row.shown} reads an fp8 KV cache only on {', '.join(row.fp8_kv_archs or ())} "
            f"(FlashAttention 3; flash_attn.py supports_kv_cache_dtype), {gpu_name} is {arch}")


def chosen(kind: str, arch: str, rocm: bool, kv_cache_dtype: str,
           asked: str | None, engine_version: str | None = None) -> AttentionBackend | None:
    """The backend a deployment runs, without checks (``scratch.backends.resolve_backend``
    refuses what vLLM refuses): the one asked for (None for a name no row has), the one the KV
    dtype forces, the one vLLM falls to for an fp8 KV cache FlashAttention does not read
    (``fp8_kv_fallback``, by ``engine_version``; None: the newest release modelled), or the
    default."""
    if asked is not None:
        return BY_NAME.get(asked.strip().lower())
    forced = KV_BY_NAME[kv_cache_dtype].forces_backend
    if forced is not None:
        return BY_NAME[forced]
    fallback = fp8_kv_fallback(kind, arch, rocm, kv_cache_dtype, engine_version)
    return fallback if fallback is not None else default_for(kind, arch, rocm)


def arch_refusal(row: AttentionBackend, gpu_name: str, arch: str, rocm: bool,
                 kind: str = MLA) -> str | None:
    """Why ``row`` cannot run ``kind`` attention on the GPU (None: it can, or the architecture
    is unknown)."""
    if arch == "unknown":
        return None
    if row.vendor is not None and row.vendor != ("amd" if rocm else "nvidia"):
        return row.vendor_why.format(name=row.name)
    if row.archs and not any(arch.startswith(a) for a in row.archs):
        return row.arch_why.format(gpu=gpu_name, arch=arch)
    if kind == MLA and row.dense_archs and not any(arch.startswith(a) for a in row.dense_archs):
        return row.dense_why.format(gpu=gpu_name, arch=arch)
    return None

"""The KV-cache dtypes memprof knows, one row each: the ``--kv-cache-dtype`` value, how a cached
element is stored (the model dtype's width, one byte, or a packed slot), its scales, the attention
kinds that accept it, the engines that have it and the attention backend it forces.

Every KV-dtype question (is it known, does this engine have it, does this model's attention read
it, how many bytes, which backend) reads these rows; a new KV dtype is one row.

Sources: vLLM ``CacheDType`` (vllm/config/cache.py, v0.11.0) and each backend's
``supported_kv_cache_dtypes``; TurboQuant presets vLLM@52a31cc
model_executor/layers/quantization/turboquant/config.py; SGLang's ``--kv-cache-dtype`` choices
(python/sglang/srt/server_args.py, SGL@d315eb7): auto, fp8_e4m3, fp8_e5m2, bfloat16 (float16 and
fp8 taken as their aliases, as memprof did before these rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.errors import BadInput

# attention kinds a row can accept: standard (GQA/MHA), dense MLA, DeepSeek sparse MLA
# (V3.2 indexer: an MLA layer with an indexer), DeepSeek-V4
GQA, MLA, SPARSE_MLA, DSV4 = "gqa", "mla", "sparse_mla", "dsv4"
_ALL_KINDS = frozenset({GQA, MLA, SPARSE_MLA, DSV4})
# storage layouts (``KVDtype.storage``)
MODEL_WIDTH, FP8_ELEMENT, DS_MLA_SLOT, TURBOQUANT = "model", "fp8", "fp8_ds_mla", "turboquant"
_BOTH = frozenset({"vllm", "sglang"})
_VLLM = frozenset({"vllm"})


@dataclass(frozen=True, slots=True, kw_only=True)
class KVDtype:
    """One ``--kv-cache-dtype`` value."""

    name: str
    # storage: "model" (the model dtype's width: 2 B, 4 B for a float32 model), "fp8" (1 B per
    # element), "fp8_ds_mla" (DeepSeek's packed fp8 slot with scales and a bf16 RoPE part),
    # "turboquant" (packed key/value bits per head, ``tq_bits``)
    storage: str
    scales: str  # how the quantised values are scaled ("" for unquantised)
    kinds: frozenset[str]  # attention kinds whose backends read it
    engines: frozenset[str]
    forces_backend: str | None = None  # the only backend that reads it
    tq_bits: tuple[int, int, bool] | None = None  # TurboQuant (key bits, value bits, key fp8)
    # the slot a packed-pool attention kind (``AttentionKind.packed_kv_pool``, the dsv4 kind)
    # stores it in: "fp8" (584 B fp8_ds_mla slot), "bf16" (1024 B), None: refused
    packed_slot: str | None = None
    # modules about this KV dtype (repo paths): the kernels that read its layout and their GPU
    # validation; the only
    # places outside the rows that may name it (tests/test_extension_axes.py)
    modules: tuple[str, ...] = ()
    source: str = ""

    @property
    def quantized_fp8(self) -> bool:
        """Stored as fp8 (one byte per element, or DeepSeek's fp8 slot)."""
        return self.storage in (FP8_ELEMENT, DS_MLA_SLOT)

    @property
    def turboquant(self) -> bool:
        return self.storage == TURBOQUANT

    def element_bytes(self, model_dtype: str) -> int:
        """Bytes of one cached element (``BadInput`` for a packed layout, which has none)."""
        if self.storage == MODEL_WIDTH:
            return 4 if model_dtype == "float32" else 2
        if self.quantized_fp8:
            return 1
        raise BadInput(f"--kv-cache-dtype {self.name} does not apply here", hint="auto or fp8")


_TQ_SOURCE = ("vLLM@52a31cc model_executor/layers/quantization/turboquant/config.py (presets; "
              "keys fp8 when key bits == 8); TurboQuantAttentionBackend.supported_kv_cache_dtypes")
_FP8_SOURCE = ("vllm/config/cache.py CacheDType (v0.11.0); per-tensor k_scale/v_scale "
               "(attention layer); FlashMLA/CUTLASS MLA list auto/fp8/fp8_e4m3 "
               "(mla/flashmla.py, v0.11.0)")

ROWS: tuple[KVDtype, ...] = (
    KVDtype(name="auto", storage=MODEL_WIDTH, scales="", kinds=_ALL_KINDS, engines=_BOTH,
            packed_slot="fp8",
            source="the model dtype (CacheConfig.cache_dtype 'auto'); DeepSeek-V4's default "
            "cache is the fp8_ds_mla slot (vLLM @023da1fc DeepSeek-V4 KV specs)"),
    KVDtype(name="bfloat16", storage=MODEL_WIDTH, scales="", kinds=_ALL_KINDS, engines=_BOTH,
            packed_slot="bf16", source="vllm/config/cache.py CacheDType; DeepSeek-V4 SM100 "
            "FlashInfer path: plain bf16 rows of 512 (vLLM @023da1fc)"),
    KVDtype(name="float16", storage=MODEL_WIDTH, scales="", kinds=_ALL_KINDS, engines=_BOTH,
            source="vllm/config/cache.py CacheDType"),
    KVDtype(name="fp8", storage=FP8_ELEMENT, scales="per-tensor k_scale / v_scale",
            kinds=_ALL_KINDS, engines=_BOTH, packed_slot="fp8", source=_FP8_SOURCE),
    KVDtype(name="fp8_e4m3", storage=FP8_ELEMENT, scales="per-tensor k_scale / v_scale",
            kinds=_ALL_KINDS, engines=_BOTH, packed_slot="fp8", source=_FP8_SOURCE),
    KVDtype(name="fp8_e5m2", storage=FP8_ELEMENT, scales="none (e5m2 is cast, not scaled)",
            kinds=_ALL_KINDS, engines=_BOTH, source=_FP8_SOURCE),
    KVDtype(name="fp8_ds_mla", storage=DS_MLA_SLOT,
            scales="fp32 scale per 128 values inside the slot", kinds=frozenset({SPARSE_MLA,
                                                                               DSV4}),
            engines=_VLLM, packed_slot="fp8", modules=("memprof/kernels/sparse_mla_decode.py",),
            source="backends listing fp8_ds_mla in supported_kv_cache_dtypes: FlashMLASparse"
            "Backend (v1/attention/backends/mla/flashmla_sparse.py), the DeepSeek-V4 backends"),
    KVDtype(name="turboquant_k8v4", storage=TURBOQUANT,
            scales="fp16 scale + zero per value vector", kinds=frozenset({GQA}), engines=_VLLM,
            forces_backend="turboquant", tq_bits=(8, 4, True),
            modules=("memprof/kernels/tq_decode.py", "memprof/validation/mla_tq.py"),
            source=_TQ_SOURCE),
    KVDtype(name="turboquant_4bit_nc", storage=TURBOQUANT,
            scales="fp16 key norm; fp16 scale + zero per value vector", kinds=frozenset({GQA}),
            engines=_VLLM, forces_backend="turboquant", tq_bits=(4, 4, False),
            source=_TQ_SOURCE),
    KVDtype(name="turboquant_k3v4_nc", storage=TURBOQUANT,
            scales="fp16 key norm; fp16 scale + zero per value vector", kinds=frozenset({GQA}),
            engines=_VLLM, forces_backend="turboquant", tq_bits=(3, 4, False),
            source=_TQ_SOURCE),
    KVDtype(name="turboquant_3bit_nc", storage=TURBOQUANT,
            scales="fp16 key norm; fp16 scale + zero per value vector", kinds=frozenset({GQA}),
            engines=_VLLM, forces_backend="turboquant", tq_bits=(3, 3, False),
            source=_TQ_SOURCE),
)
BY_NAME: dict[str, KVDtype] = {r.name: r for r in ROWS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
DEFAULT = "auto"  # --kv-cache-dtype left out
FP8 = "fp8"  # the smaller cache remedies and explain offer in place of the default


def kv_dtype(name: str) -> KVDtype:
    """The row of ``name`` (``BadInput`` for a name memprof does not know)."""
    row = BY_NAME.get(name)
    if row is None:
        raise BadInput(f"unknown --kv-cache-dtype {str(name)[:40]!r}",
                       hint="one of: " + ", ".join(NAMES))
    return row


def for_engine(engine: str) -> tuple[str, ...]:
    """The KV dtypes ``engine`` has, in row order."""
    return tuple(r.name for r in ROWS if engine in r.engines)


def attention_kind(kind: str, has_indexer: bool) -> str:
    """The row kind of an attention layer (``Attention.kind`` and whether it has an indexer)."""
    return SPARSE_MLA if kind == MLA and has_indexer else kind

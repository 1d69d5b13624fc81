"""The shard builder every block type uses: the tensor record (``WeightTensor``), how a linear,
a vector and the vocabulary embedding split over TP and replicate over DP.

Sharding rules (vLLM ``vllm/model_executor/layers/linear.py`` and the model files):
- ``ColumnParallelLinear`` / ``QKVParallelLinear`` / ``MergedColumnParallelLinear`` split the
  output dim by TP; ``RowParallelLinear`` splits the input dim (its bias is kept whole on every
  rank); ``ReplicatedLinear`` and norms are replicated.
- ``QKVParallelLinear`` keeps ``max(1, kv_heads / tp)`` KV heads per rank: when TP > KV heads,
  each KV head is replicated ``tp / kv_heads`` times.
- ``VocabParallelEmbedding`` / ``ParallelLMHead`` pad the vocab to a multiple of 64
  (``DEFAULT_VOCAB_PADDING_SIZE``) and split it by TP.
- PP splits layers (``get_pp_indices``); the first stage holds the embeddings, the last the final
  norm and the lm_head.
- ``FusedMoE``: with ``--enable-expert-parallel`` routed experts are spread over TP×DP ranks
  (whole experts); without it their intermediate dim is split TP×DP ways.

- A checkpoint's exclusion list (``modules_to_not_convert``, ``ignore``, ...) leaves the modules
  it names unquantised (``excluded``; bitsandbytes' ``llm_int8_skip_modules`` as each release
  matches it: ``memprof/core/weights/bnb_skip.py``); vLLM on ROCm pads block-fp8 linear weights
  (``ROCM_FP8_BLOCK_PADDING``).

Every tensor carries ``replicas``: how many identical copies exist across the whole deployment.
Summing ``(bytes - padding) / replicas`` over all ranks gives back the unsharded model — the
invariant the property tests check.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, fields, replace
from functools import lru_cache

from memprof.base.errors import ConfigError, LayoutError
from memprof.base.frozen import copier
from memprof.base.units import cdiv, round_up
from memprof.core.auto_dtype import served_dtype
from memprof.core.capability import marlin_min_cc
from memprof.core.deployment import Deployment, RankCoord
from memprof.core.dtypes import dtype_bytes
from memprof.core.models import ModelSpec, QuantConfig
from memprof.core.versions import Rule, value_at
from memprof.core.weights.bnb_skip import bnb_skipped
from memprof.core.weights.formats import (
    Param,
    fp8_on_marlin,
    linear_bytes,
    linear_params,
    marlin_blocks,
)

# vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
VOCAB_PADDING = 64

# vLLM on ROCm pads each block-fp8 linear weight whose rows are a multiple of 512 bytes by 256
# bytes a row (``VLLM_ROCM_FP8_PADDING``, on by default): ``F.pad(weight, (0, 256))[..., :-256]``
# keeps the padded storage behind the (out, in) view. value: True (padded) / False.
ROCM_FP8_BLOCK_PADDING: tuple[Rule, ...] = (
    Rule(name="rocm_fp8_block_padding", changes="weights: block-fp8 linears on ROCm (padding)",
         since=None, until="0.8.2", value=False, introduced_by="before 0.7.1",
         removed_by="Fp8LinearMethod pads block weights (first read in the 0.8.2 wheel)",
         source="0.7.3 / 0.8.0 / 0.8.1 model_executor/layers/quantization/fp8.py "
         "Fp8LinearMethod.process_weights_after_loading: the block branch normalises to "
         "e4m3fnuz and returns without padding", applies_to="fp8_block"),
    Rule(name="rocm_fp8_block_padding", changes="weights: block-fp8 linears on ROCm (padding)",
         since="0.8.2", until=None, value=True,
         introduced_by="read in the 0.8.2 wheel (first release with it)",
         source="0.8.2 – 0.9.2 fp8.py Fp8LinearMethod.process_weights_after_loading (block "
         "branch: weight = self._maybe_pad_weight(weight)); 0.11.0 and 0.33.0 quantization/"
         "utils/fp8_utils.py process_fp8_weight_block_strategy -> _maybe_pad_fp8_weight "
         "(VLLM_ROCM_FP8_PADDING default 1, is_rocm(), stride(-2) bytes % 512 == 0, 256 "
         "elements of fp8); 0.33.0 calls it from kernels/linear/scaled_mm/"
         "BlockScaledMMLinearKernel.py", applies_to="fp8_block"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightTensor:
    """One weight tensor (or ``count`` identical ones) on a rank, in bytes, with the padding inside
    it and how many copies exist across the deployment (``replicas``)."""

    module: str  # HF-style module path with the layer index as ``*`` once aggregated
    group: str  # the report component this tensor belongs to
    bytes_each: int  # bytes of one instance on this rank
    count: int = 1  # instances on this rank (layers)
    replicas: int = 1  # identical copies across the deployment
    padding_each: int = 0  # bytes of kernel/vocab padding inside bytes_each
    formula: str = ""
    # the parameter tensors of one instance as the engine allocates them (Σ bytes = bytes_each)
    params: tuple[Param, ...] = ()
    # blocks per SM of the Marlin workspace this module's layer allocates (0: no Marlin kernel;
    # formats.marlin_blocks), sized per GPU by memprof.core.terms.marlin_workspace
    marlin_blocks: int = 0

    @property
    def bytes(self) -> int:
        return self.bytes_each * self.count

    def with_(self, **changes: object) -> WeightTensor:
        """``dataclasses.replace`` without its per-field overhead (a rank's tensors are
        derived by the thousand: counts per layer kind, aggregated rows)."""
        if not _TENSOR_FIELDS.issuperset(changes):  # an unknown name
            return replace(self, **changes)  # type: ignore[arg-type]  # raises its TypeError
        return _copy_tensor(self, changes)


_TENSOR_FIELDS_ORDER = tuple(f.name for f in fields(WeightTensor))
_TENSOR_FIELDS = frozenset(_TENSOR_FIELDS_ORDER)
_copy_tensor = copier(WeightTensor, _TENSOR_FIELDS_ORDER)


def model_dtype(spec: ModelSpec, dep: Deployment, arch: str = "") -> str:
    """The dtype the model is served in on a card of architecture ``arch``: ``--dtype`` as
    given, or the release's reading of ``auto`` (``memprof.core.auto_dtype``)."""
    return served_dtype(spec, dep, arch)



class _Exclusion:
    """A checkpoint's exclusion list, split once for fast matching: the plain dotted names
    (``lm_head``, ``model.layers.0.mlp.gate``; a checkpoint may list hundreds, e.g. one per
    layer), the glob patterns and the compressed-tensors ``re:`` entries."""

    __slots__ = ("by_layer", "exclude", "globs", "names", "regexes")

    def __init__(self, exclude: tuple[str, ...]) -> None:
        self.exclude = exclude
        names: set[str] = set()
        globs: list[str] = []
        regexes: list[re.Pattern[str]] = []
        # layer index → the plain names that name that layer, with the index as ``#``; None
        # when an entry with a digit is anything else (the layers are then told apart one by one)
        by_layer: dict[int, set[str]] | None = {}
        for pat in exclude:
            if pat.startswith("re:"):
                regexes.append(re.compile(pat[3:]))
                by_layer = None if has_digit(pat) else by_layer
                continue
            p = pat.rstrip(".")
            if not p or p.startswith(".") or ".." in p or any(c in p for c in "*?["):
                globs.append(p)
                by_layer = None if has_digit(p) else by_layer
                continue
            names.add(p)
            if by_layer is not None and has_digit(p):
                m = _LAYER_NAME.fullmatch(p)
                if m is None or has_digit(m[1] + m[3]):
                    by_layer = None
                else:
                    by_layer.setdefault(int(m[2]), set()).add(f"{m[1]}layers.#{m[3]}")
        self.names = frozenset(names)
        self.globs = tuple(globs)
        self.regexes = tuple(regexes)
        self.by_layer = (None if by_layer is None
                         else {i: frozenset(v) for i, v in by_layer.items()})

    def match(self, module: str) -> bool:
        # compressed-tensors' regex entries (``re.match`` on the layer name,
        # compressed_tensors/utils.py _is_equal_or_regex_match, vLLM v0.11.0)
        if any(r.match(module) for r in self.regexes):
            return True
        if self.names:
            # a plain name excludes the module it names, the modules under it and any module
            # whose dotted path contains it as whole components (``lm_head`` excludes
            # ``model.lm_head``): one of the module's runs of consecutive components
            parts = module.split(".")
            for i in range(len(parts)):
                for j in range(i + 1, len(parts) + 1):
                    if ".".join(parts[i:j]) in self.names:
                        return True
        return any(fnmatch.fnmatch(module, p) or fnmatch.fnmatch(module, p + ".*")
                   or module.endswith("." + p) or ("." + p + ".") in ("." + module + ".")
                   for p in self.globs)


# a plain name of one decoder layer's module: ``[prefix.]layers.N[.suffix]``
_LAYER_NAME = re.compile(r"((?:[^.]+\.)*?)layers\.(\d+)((?:\.[^.]+)*)")


def has_digit(text: str) -> bool:
    """Whether ``text`` has a digit in it (an exclude entry that may name a layer index)."""
    return any(c.isdigit() for c in text)


@lru_cache(maxsize=256)
def _exclusion(exclude: tuple[str, ...]) -> _Exclusion:
    """The split form of one exclusion list, kept per list by its value (a bounded cache: a
    sweep estimates the same checkpoint's list many times)."""
    return _Exclusion(exclude)


def layer_exclusions(exclude: tuple[str, ...], index: int) -> frozenset[str] | None:
    """What of an exclusion list can tell decoder layer ``index`` from the others: the plain
    names that name that layer (``model.layers.7.mlp.gate`` → ``model.layers.#.mlp.gate``).
    Two layers of one kind with the same answer have the same modules excluded, so they are
    built once. None when the list has another entry with a digit in it (a glob, a regular
    expression, a name with an index elsewhere): then each layer is its own kind."""
    by_layer = _exclusion(exclude).by_layer
    return None if by_layer is None else by_layer.get(index, frozenset())


# vLLM's fused modules whose checkpoint holds the parts under other names (the models'
# ``packed_modules_mapping``); ``is_layer_skipped`` (quantization/utils/quant_utils.py, v0.27.1
# and v0.33.0) skips a fused module its list names, or else one whose parts it all names, and
# refuses one whose parts it names only in part
PACKED_PARTS: dict[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
    # Qwen3.5 / 3.6 Gated DeltaNet (qwen3_5.py Qwen3_5ForCausalLMBase, v0.27.1 and v0.33.0)
    "in_proj_qkvz": ("in_proj_qkv", "in_proj_z"),
    "in_proj_ba": ("in_proj_b", "in_proj_a"),
}


def excluded(exclude: tuple[str, ...], module: str) -> bool:
    """Does a checkpoint's exclusion list (``modules_to_not_convert``, ``ignored_layers``,
    ``ignore``, ``exclude_modules``) leave ``module`` unquantised? Each entry matches the module
    it names, the modules under it (``name.*``), a module whose dotted path contains it as whole
    components, a glob over the path, or (``re:`` entries) a regular expression from the path's
    start. A fused module (``PACKED_PARTS``) the list does not name is excluded when the list
    names all its parts; naming some of them is refused, as vLLM refuses it. The split list is
    kept per exclusion tuple, so a list of hundreds of names costs a set lookup per module."""
    ex = _exclusion(exclude)
    if ex.match(module):
        return True
    head, _, name = module.rpartition(".")
    parts = PACKED_PARTS.get(name)
    if parts is None:
        return False
    hits = [ex.match(f"{head}.{part}" if head else part) for part in parts]
    if any(hits) and not all(hits):
        named = ", ".join(part for part, hit in zip(parts, hits, strict=True) if hit)
        raise ConfigError(f"the checkpoint's exclusion list leaves {named} of the fused "
                          f"{module} unquantised but not the rest",
                          hint="vLLM refuses to load this (is_layer_skipped: all shards of a "
                               "fused layer must have the same precision); fix the "
                               "quantization_config's exclusion list")
    return all(hits)


class Shard:
    """Builds the tensor list of one rank: the helpers every block type uses."""

    def __init__(self, spec: ModelSpec, dep: Deployment, quant: QuantConfig | None,
                 coord: RankCoord, arch: str) -> None:
        self.spec, self.dep, self.quant, self.coord, self.arch = spec, dep, quant, coord, arch
        # from which compute capability GPTQ / AWQ run on Marlin at the release
        self.marlin_cc = marlin_min_cc(dep.engine_version, dep.engine)
        self.dtype = model_dtype(spec, dep, arch)
        self.b = dtype_bytes(self.dtype)
        self.tp = dep.tp
        self.copies = dep.copies  # full copies of non-expert tensors (vLLM DP)
        self.out: list[WeightTensor] = []
        self._marlin_fused: set[str] = set()  # fused modules whose workspace is counted

    # --- helpers ---------------------------------------------------------------------------------
    def quantised(self, module: str, expert: bool = False) -> QuantConfig | None:
        q = self.quant
        if q is None:
            return None
        if q.method == "mxfp4" and not expert:
            return None  # vLLM's Mxfp4Config quantises FusedMoE experts only
        if q.exclude:
            # bitsandbytes' skip list as the release matches it (None: no row for the engine)
            skip = (bnb_skipped(q.exclude, module, self.dep.engine_version, self.dep.engine)
                    if q.method == "bnb4" else None)
            if excluded(q.exclude, module) if skip is None else skip:
                return None
        if q.method == "gguf":
            return gguf_module(q, module)
        return q

    def add(self, module: str, group: str, params: tuple[Param, ...], *, replicas: int,
            formula: str, padding: int = 0, marlin_blocks: int = 0) -> None:
        """One tensor (set) of ``params``; its bytes are theirs."""
        nbytes = sum(p.bytes for p in params)
        self.out.append(WeightTensor(module=module, group=group, bytes_each=nbytes,
                                     replicas=replicas, padding_each=padding, formula=formula,
                                     params=params, marlin_blocks=marlin_blocks))

    def vec(self, name: str, n: int, dtype: str | None = None) -> tuple[Param, ...]:
        """One 1-D parameter of ``n`` elements (the model dtype unless given)."""
        return (Param(name, (n,), dtype or self.dtype),)

    def linear(self, module: str, group: str, out: int, inn: int, *, shard: str,
               bias: bool = False, quantise: bool = True, replicas_extra: int = 1) -> None:
        """A linear of full shape ``out × in``; ``shard`` is col, row or rep."""
        dp = self.copies
        if shard == "col":
            lo, li, rep = cdiv(out, self.tp), inn, dp
        elif shard == "row":
            lo, li, rep = out, cdiv(inn, self.tp), dp
        else:
            lo, li, rep = out, inn, dp * self.tp
        q = self.quantised(module) if quantise else None
        _nbytes, formula = linear_bytes(lo, li, q, self.b, self.arch, self.marlin_cc)
        params, pad = self.rocm_fp8_padded(q, lo, li, linear_params(
            lo, li, q, self.dtype, self.arch, self.marlin_cc))
        self.add(module, group, params, replicas=rep * replicas_extra,
                 formula=f"{formula} ({shard})" + (f" + {lo}×256 ROCm padding" if pad else ""),
                 padding=pad, marlin_blocks=marlin_blocks(q, self.arch, marlin_cc=self.marlin_cc))
        if bias:
            bo = lo
            self.add(module + ".bias", group, self.vec("bias", bo),
                     replicas=(dp * self.tp if shard in ("row", "rep") else dp) * replicas_extra,
                     formula=f"{bo}×{self.b}B bias")

    def vector(self, module: str, group: str, n: int, dtype: str | None = None,
               *, sharded: bool = False) -> None:
        b = dtype_bytes(dtype or self.dtype)
        n_local = cdiv(n, self.tp) if sharded else n
        self.add(module, group, self.vec("weight", n_local, dtype),
                 replicas=self.copies * (1 if sharded else self.tp),
                 formula=f"{n_local}×{b}B")

    def fused_slice(self, module: str, group: str, out: int, inn: int, *, quant_of: str,
                    replicas: int, note: str) -> None:
        """One slice (``out × inn``, already local) of a fused linear, quantised as the fused
        module ``quant_of`` is (e.g. the q or the kv part of ``QKVParallelLinear``)."""
        q = self.quantised(quant_of)
        _nbytes, formula = linear_bytes(out, inn, q, self.b, self.arch, self.marlin_cc)
        first = quant_of not in self._marlin_fused  # one workspace per fused module
        self._marlin_fused.add(quant_of)
        params, pad = self.rocm_fp8_padded(q, out, inn, linear_params(
            out, inn, q, self.dtype, self.arch, self.marlin_cc))
        self.add(module, group, params, replicas=replicas,
                 formula=formula + note + (f" + {out}×256 ROCm padding" if pad else ""),
                 padding=pad,
                 marlin_blocks=(marlin_blocks(q, self.arch, marlin_cc=self.marlin_cc)
                                if first else 0))

    def rocm_fp8_padded(self, q: QuantConfig | None, out: int, inn: int,
                        params: tuple[Param, ...]) -> tuple[tuple[Param, ...], int]:
        """A block-fp8 linear of vLLM's own fp8 method on ROCm whose rows are a multiple of
        512 bytes keeps its weight in ``(out, in + 256)`` storage (``ROCM_FP8_BLOCK_PADDING``):
        the params with the padded weight, and the padding bytes (0 where none)."""
        if (q is None or q.method != "fp8" or not q.block or q.checkpoint_format
                or not self.arch.startswith("gfx") or fp8_on_marlin(q, self.arch)
                or inn % 512
                or not value_at(ROCM_FP8_BLOCK_PADDING, self.dep.engine_version, False,
                                engine=self.dep.engine)):
            return params, 0
        return tuple(Param(p.name, (p.shape[0], p.shape[1] + 256), p.dtype)
                     if p.name == "weight" and len(p.shape) == 2 else p
                     for p in params), out * 256

    def bias(self, module: str, group: str, n: int, *, replicas: int, formula: str) -> None:
        """A bias of ``n`` local elements in the model dtype."""
        self.add(module, group, self.vec("bias", n), replicas=replicas, formula=formula)

    def padded_vector(self, module: str, group: str, name: str, n: int, padded: int,
                      dtype: str, formula: str) -> None:
        """A per-rank vector of ``n`` useful elements stored as ``padded`` (the rest padding)."""
        self.add(module, group, self.vec(name, padded, dtype), replicas=self.copies,
                 padding=(padded - n) * dtype_bytes(dtype), formula=formula)

    # --- embeddings ------------------------------------------------------------------------------
    def vocab_parallel(self, module: str, group: str, rank: int | None = None) -> None:
        """A vocabulary-parallel table split ``self.tp`` ways; ``rank``: this rank's place in
        that split (None: its TP rank)."""
        v, h = self.spec.vocab_size, self.spec.hidden_size
        padded = round_up(v, VOCAB_PADDING)
        if padded % self.tp:
            raise LayoutError(
                f"the padded vocabulary ({padded}) is not divisible by tensor parallel size "
                f"{self.tp}", hint="vLLM asserts it; use a TP size that divides it")
        per = padded // self.tp
        place = self.coord.tp_rank if rank is None else rank
        real = max(0, min(per, v - place * per))
        tied_copies = 2 if self.spec.tie_word_embeddings and self.dep.pp > 1 else 1
        q = self.quant
        if q is not None and q.method == "gguf":
            # GGUFEmbeddingMethod keeps the GGUF blocks (vocab_parallel_embedding.py
            # weight_loader materialises (num_embeddings_per_partition, row bytes), v0.11.0)
            from memprof.core.weights.gguf import gguf_bytes  # GGUF checkpoints only

            t = gguf_module(q, module).scheme
            nbytes, how = gguf_bytes(per, h, t)
            self.add(module, group, (Param("qweight", (per, nbytes // per), "uint8"),),
                     replicas=self.copies * tied_copies, padding=(per - real) * nbytes // per,
                     formula=f"{how} (vocab {v} padded to {padded}, /{self.tp})")
            return
        self.add(module, group, (Param("weight", (per, h), self.dtype),),
                 replicas=self.copies * tied_copies,
                 padding=(per - real) * h * self.b,
                 formula=f"{per}×{h}×{self.b}B (vocab {v} padded to {padded}, /{self.tp})")


def gguf_module(q: QuantConfig, module: str) -> QuantConfig:
    """``q`` with ``scheme`` set to the GGML type ``module`` is stored in; a module memprof does
    not know the GGUF tensor of is refused, never sized in the model dtype."""
    from memprof.core.weights.gguf import module_type

    t = module_type(q.gguf_types, module)
    if t is None:
        raise ConfigError(f"GGUF: memprof does not know which GGUF tensor {module} is loaded "
                          "from", hint="GGUF sizing covers the Llama-layout modules "
                          "(memprof.core.weights.gguf.MODULE_KINDS)")
    return replace(q, scheme=t)

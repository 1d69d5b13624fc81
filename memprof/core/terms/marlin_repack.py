"""The AWQ / GPTQ → Marlin repack of vLLM 0.8.x as caching-allocator operations: which tensors
``process_weights_after_loading`` allocates, keeps and frees per linear layer, so that the
0.8-era V1 budget (``memprof.core.terms.reserved_charge``) replays them after the model load.

Read in the vLLM 0.8.0, 0.8.5, 0.9.0 and 0.9.0.1 wheels. The loader (0.8.x
``model_executor/model_loader/loader.py`` ``_process_weights_after_loading``; 0.9.x
``model_loader/utils.py`` ``process_weights_after_loading``) repacks after *every* weight is
loaded, one module after another in ``named_modules`` order (construction order). Per layer:

AWQ (``awq_marlin.py`` ``AWQMarlinLinearMethod.process_weights_after_loading``; ``Q`` the int32
``qweight`` ``(K, N/8)``, ``S`` the ``scales`` ``(G, N)``, ``Z`` the int32 ``qzeros`` ``(G, N/8)``,
``U = G·N·4`` one unpacked int32 per zero point)::

    workspace                       marlin_make_workspace (kept)
    Q' = awq_marlin_repack(Q)       new Q bytes; replace_parameter frees Q (a plain Tensor
                                    replacing a Parameter is re-registered, not copied in place:
                                    utils/layer_utils.py replace_parameter)
    S' = s.reshape(-1, 64)[:, scale_perm]      the index list goes to the device (64 int64,
                                    32 with one group: scale_perm_single), then S' ; frees S
    awq_to_marlin_zero_points(Z):   unpack_cols → U0 (numpy on the host, .to(device));
                                    U1 = U0[:, undo_interleave] (8 int64 index), frees U0;
                                    marlin_zero_points: U2 = U1[:, scale_perm], U3 =
                                    U2[:, interleave] (frees U2), pack_cols → Z' (host, then
                                    .to(device)); returning frees U3 then U1; frees Z
    g_idx, g_idx_sort_indices       empty (0 B: no allocation)

GPTQ on Marlin (``kernels/mixed_precision/marlin.py`` ``MarlinLinearKernel
.process_weights_after_loading``, the kernel ``gptq_marlin.py`` gets below sm90; created as
``qweight`` ``(K/8, N)``, ``g_idx`` ``(K,)`` int32, ``qzeros`` ``(G, N/8)``, ``scales``)::

    workspace                       kept
    desc_act: argsort(g_idx): the sort's values (K·4, dropped) and int64 indices (K·8);
              .to(int) int32 (K·4, kept as g_idx_sort_indices; the int64 freed), g_idx[sort]
              (K·4, replaces g_idx: the old one freed)
    else:     g_idx replaced by an empty tensor (the old one freed)
    qzeros replaced by an empty tensor (symmetric types: the old one freed)
    Q' = gptq_marlin_repack(Q)      x.data = Q' frees Q
    S' as AWQ's                     frees S

The workspace is ``marlin_make_workspace(N)``: ``(N // 64) × 16`` int32 (0.7.3, 0.8.0, 0.8.5
``utils/marlin_utils.py``: GPTQ_MARLIN_MIN_THREAD_N 64, GPTQ_MARLIN_MAX_PARALLEL 16) until
0.9.0's ``marlin_make_workspace_new``: one int32 per SM (``MARLIN_WORKSPACE``).

Not replayed: the temporaries inside the CUDA ops and the sort (``torch.argsort``'s scratch,
an int32 index widened inside ``index``), which are freed within the call; FusedMoE experts
(``AWQMoEMethod``, ``GPTQMarlinMoEMethod``); GPTQ on sm90, where 0.8.x picks Machete first when
it can implement the layer (``kernels/mixed_precision/__init__.py`` ``_POSSIBLE_KERNELS``), and
fp8 on Marlin below sm89 (``prepare_fp8_layer_for_marlin``): those repacks are not in the replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.base.units import cdiv
from memprof.core.components import TermContext
from memprof.core.terms.load_rounding import Op
from memprof.core.versions import Rule, rule_in_force

MARLIN_WORKSPACE: tuple[Rule, ...] = (
    Rule(name="marlin_workspace_per_output_columns", changes="weights: Marlin workspace",
         since=None, until="0.9.0", value="per_output", applies_to="marlin",
         introduced_by="read in the 0.7.3, 0.8.0 and 0.8.5 wheels",
         removed_by="marlin_make_workspace_new (read in the 0.9.0 wheel)",
         source="0.7.3 / 0.8.0 / 0.8.5 model_executor/layers/quantization/utils/marlin_utils.py "
         "marlin_make_workspace(output_size_per_partition): (N // GPTQ_MARLIN_MIN_THREAD_N "
         "64) × GPTQ_MARLIN_MAX_PARALLEL 16 int32 per Marlin linear (AWQMarlinLinearMethod, "
         "MarlinLinearKernel, marlin_utils_fp8.prepare_fp8_layer_for_marlin); FusedMoE "
         "layers: MARLIN_MOE_WORKSPACE"),
)
MARLIN_MOE_WORKSPACE: tuple[Rule, ...] = (
    Rule(name="marlin_moe_workspace", changes="weights: Marlin workspace", since="0.8.5",
         until=None, value="SMs × 4 int32", applies_to="marlin",
         introduced_by="read in the 0.8.5 wheel (absent in the 0.7.3, 0.8.0, 0.8.2 and 0.8.4 "
         "wheels)",
         source="0.8.5 model_executor/layers/quantization/gptq_marlin.py "
         "GPTQMarlinMoEMethod.create_weights and awq_marlin.py AWQMoEMethod.create_weights: "
         "layer.workspace = torch.zeros(sms * 4, int32); from 0.9.0 "
         "marlin_make_workspace_new(device, 4), the same size"),
)
MIN_THREAD_N = 64  # GPTQ_MARLIN_MIN_THREAD_N, 0.8.x marlin_utils.py
MAX_PARALLEL = 16  # GPTQ_MARLIN_MAX_PARALLEL, 0.8.x marlin_utils.py
SCALE_PERM = 64  # len(scale_perm): 8 × 8 (marlin_utils.py get_scale_perms)
SCALE_PERM_SINGLE = 32  # len(scale_perm_single): 4 × 8
INTERLEAVE = 8  # len of the 4-bit (un)interleave arrays; 4 for 8-bit


def workspace_per_output(version: str | None) -> bool:
    """Does the release size a Marlin linear's workspace by its output columns (before 0.9.0)?"""
    return rule_in_force(MARLIN_WORKSPACE, version) is not None


def moe_workspace_held(version: str | None) -> bool:
    """Does a FusedMoE Marlin layer keep a workspace at this release (from 0.8.5)?"""
    return rule_in_force(MARLIN_MOE_WORKSPACE, version) is not None


def old_workspace_bytes(out: int) -> int:
    """``marlin_make_workspace(out)`` before 0.9.0: ``(out // 64) × 16`` int32."""
    return (out // MIN_THREAD_N) * MAX_PARALLEL * 4


@dataclass(frozen=True, slots=True)
class MarlinLinear:
    """One linear module repacked for Marlin, on this rank: ``out`` (N) and ``inn`` (K) per
    partition, ``groups`` (G), the bytes of its ``qweight``, ``scales`` and ``qzeros`` as
    created, and the kind (``awq`` or ``gptq``, with ``desc_act``)."""

    name: str  # the module, as the fused weight list names it (``...self_attn.qkv_proj``)
    kind: str
    out: int
    inn: int
    groups: int
    qweight: int
    scales: int
    qzeros: int
    bits: int
    desc_act: bool

    def created(self) -> list[tuple[str, int]]:
        """The parameters in the order ``create_weights`` allocates them (awq_marlin.py
        ``AWQMarlinLinearMethod``: qweight, qzeros, scales; gptq_marlin.py
        ``GPTQMarlinLinearMethod``: qweight, g_idx, then the qzeros tensor before the scales
        one, though it registers scales first)."""
        n = self.name
        if self.kind == "awq":
            return [(f"{n}.qweight", self.qweight), (f"{n}.qzeros", self.qzeros),
                    (f"{n}.scales", self.scales)]
        return [(f"{n}.qweight", self.qweight), (f"{n}.g_idx", 4 * self.inn),
                (f"{n}.qzeros", self.qzeros), (f"{n}.scales", self.scales)]


def _base(module: str) -> str:
    return module.replace("(q)", "").replace("(kv)", "")


def marlin_linears(ctx: TermContext) -> list[MarlinLinear]:
    """The rank's linear modules that the release repacks for Marlin (AWQ on CUDA from
    Marlin's smallest compute capability, ``capability.marlin_min_cc``: 8.0, 7.5 from 0.14.0;
    GPTQ with a Marlin-compatible config from it to sm89), in construction order; []
    otherwise."""
    from memprof.core.capability import marlin_min_cc
    from memprof.core.weights.formats import _cuda_sm
    from memprof.core.weights.rank import RankWeights
    from memprof.core.weights.shard import WeightTensor

    q = ctx.quant
    if q is None or (q.source != "config" and not q.marlin):  # a flag names gptq_marlin
        return []
    sm = _cuda_sm(ctx.gpu.arch) if ctx.gpu.arch != "unknown" else 0
    least = marlin_min_cc(ctx.dep.engine_version, ctx.dep.engine)
    if q.method == "awq" and sm >= least:
        kind = "awq"
    elif q.method == "gptq" and q.marlin and least <= sm < 90:
        kind = "gptq"
    else:
        return []
    tensors = RankWeights(ctx.spec, ctx.dep, q, ctx.coord, ctx.gpu.arch).build(in_order=True)
    groups: dict[str, list[WeightTensor]] = {}
    marked: set[str] = set()
    order: list[str] = []
    for t in tensors:
        base = _base(t.module)
        if not any(p.name == "scales" for p in t.params) or "experts" in t.module:
            continue
        if base not in groups:
            groups[base] = []
            order.append(base)
        groups[base].append(t)
        if t.marlin_blocks == 1:
            marked.add(base)
    bits = q.bits or 4
    out: list[MarlinLinear] = []
    for base in order:
        if base not in marked:
            continue
        params = [p for t in groups[base] for p in t.params]
        scales = [p for p in params if p.name == "scales"]
        n = sum(p.shape[1] for p in scales)
        g = scales[0].shape[0]
        qw = sum(p.bytes for p in params if p.name == "qweight")
        sb = sum(p.bytes for p in scales)
        zb = g * cdiv(n * bits, 32) * 4
        out.append(MarlinLinear(name=base, kind=kind, out=n, inn=qw * 8 // (n * bits),
                                groups=g, qweight=qw, scales=sb, qzeros=zb, bits=bits,
                                desc_act=q.desc_act and kind == "gptq"))
    return out


class _Seq:
    """An op sequence being extended: ``malloc`` returns the handle ``free`` takes."""

    def __init__(self, ops: list[Op], mallocs: int) -> None:
        self.ops, self.n = ops, mallocs

    def malloc(self, nbytes: int) -> int:
        self.ops.append((0, nbytes))
        self.n += 1
        return self.n - 1

    def free(self, handle: int) -> None:
        self.ops.append((1, handle))


def repack_ops(layers: list[MarlinLinear], handles: dict[str, int], ops: list[Op],
               mallocs: int, sms: int | None, version: str | None) -> list[Op]:
    """``ops`` extended by each layer's repack (the module docstring's sequences). ``handles``:
    the malloc index of each created parameter (``name.param``) in ``ops``; ``mallocs``: how
    many mallocs ``ops`` holds; ``sms``: the GPU's SM count (the 0.9.0+ workspace; none
    allocated when the catalog does not state it)."""
    seq = _Seq(list(ops), mallocs)
    per_output = workspace_per_output(version)
    for m in layers:
        ws = old_workspace_bytes(m.out) if per_output else 4 * (sms or 0)
        if ws:
            seq.malloc(ws)
        grouped = m.groups > 1  # group_size < size_k: scale_perm, else scale_perm_single
        perm = 8 * (SCALE_PERM if grouped else SCALE_PERM_SINGLE)
        inter = 8 * (INTERLEAVE if m.bits == 4 else 4)
        h = {p: handles[f"{m.name}.{p}"] for p in ("qweight", "scales", "qzeros")}
        if m.kind == "gptq":
            g_idx = handles[f"{m.name}.g_idx"]
            if m.desc_act:
                values = seq.malloc(4 * m.inn)  # torch.sort's values output, dropped
                a64 = seq.malloc(8 * m.inn)
                seq.free(values)
                seq.malloc(4 * m.inn)  # g_idx_sort_indices, kept
                seq.free(a64)
                seq.malloc(4 * m.inn)  # the sorted g_idx, kept
            seq.free(g_idx)
            seq.free(h["qzeros"])
        seq.malloc(m.qweight)
        seq.free(h["qweight"])
        idx = seq.malloc(perm)
        seq.malloc(m.scales)
        seq.free(idx)
        seq.free(h["scales"])
        if m.kind == "awq":
            u = 4 * m.groups * m.out
            u0 = seq.malloc(u)
            idx = seq.malloc(inter)
            u1 = seq.malloc(u)
            seq.free(idx)
            seq.free(u0)
            idx = seq.malloc(8 * SCALE_PERM)
            u2 = seq.malloc(u)
            seq.free(idx)
            idx = seq.malloc(inter)
            u3 = seq.malloc(u)
            seq.free(idx)
            seq.free(u2)
            seq.malloc(m.qzeros)
            seq.free(u3)
            seq.free(u1)
            seq.free(h["qzeros"])
    return seq.ops

"""The trace replica launches the kernels the graph model counts (issue 25): a decode forward of
the DeepSeek-R1 shape (fp8 block linears, MLA, the fused MoE with a shared expert and noaux_tc
routing, three dense layers) on the fake device, its ops counted by a dispatch counter, against
``memprof.core.terms.cudagraph.graph_nodes`` for each mode. Inside PIECEWISE pieces the MLA
attention op's kernels run eagerly between the pieces (``Replica.piece_gap``), as vLLM runs its
splitting op; in FULL graphs they are inside. The replica's own extras are known and few: the
token ids' fill and the embedding lookup before the layers, and one copy per all-reduce (its
out-of-place all-reduce is a clone followed by the collective)."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from memprof.core.deployment import Deployment  # noqa: E402
from memprof.core.estimate import estimate, rank_context  # noqa: E402
from memprof.core.terms import cudagraph  # noqa: E402
from memprof.core.terms.activation import moe_workspace_bytes  # noqa: E402
from memprof.core.terms.allocations import rank_allocations  # noqa: E402
from memprof.trace.replica import MOE_WORKSPACE, Replica  # noqa: E402

# ops that launch no kernel: allocation, views and metadata
NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "view", "_unsafe_view",
             "slice", "select", "transpose", "t", "permute", "expand", "unsqueeze", "squeeze",
             "as_strided", "alias", "detach", "split", "split_with_sizes", "_reshape_alias",
             "reshape", "narrow", "lift_fresh", "unbind", "device", "_local_scalar_dense"}
GEMMS = {"mm", "addmm", "bmm", "_scaled_mm", "baddbmm"}


class Kernels(TorchDispatchMode):
    """Counts the ops that launch a kernel: GEMMs and the others."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))

    @property
    def gemm(self) -> int:
        return sum(n for op, n in self.ops.items() if op in GEMMS)

    @property
    def other(self) -> int:
        return sum(n for op, n in self.ops.items() if op not in GEMMS)


def _replica(tp: int, model: str = "deepseek-r1", **layout: Any) -> tuple[Any, Replica]:
    """The model's 8-layer shape's rank 0 (DeepSeek-R1's: 3 dense, 5 MoE) with its weights and
    KV cache allocated on the fake device."""
    dep = Deployment(tp=tp, max_num_seqs=256, hf_overrides='{"num_hidden_layers": 8}',
                     disable_custom_all_reduce=True, **layout)
    e = estimate(model, dep, gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    allocs = rank_allocations(ctx)
    rep = Replica(ctx=ctx, device=torch.device("cuda"),
                  charge=lambda _c: contextlib.nullcontext())
    rep.lazy = [a for a in allocs if a.phase == "decode"]
    rep.allocate([a for a in allocs if a.phase in ("weights", "kv_cache")])
    return ctx, rep


def _count(rep: Replica, mode: str, tokens: int) -> tuple[Kernels, Kernels, int]:
    """Kernels inside the graphs, kernels run eagerly between PIECEWISE pieces, pieces."""
    inside, gap = Kernels(), Kernels()
    pieces = [1]
    if mode == "PIECEWISE":
        def piece_gap(op: Callable[[], None]) -> None:
            pieces[0] += 1
            with gap:
                op()
        rep.piece_break = lambda: pieces.__setitem__(0, pieces[0] + 1)
        rep.piece_gap = piece_gap
    try:
        with inside:
            rep.forward(tokens, 0, decode=True)
    finally:
        rep.piece_break = rep.piece_gap = None
    inside.ops.subtract(gap.ops)
    return inside, gap, pieces[0]


@pytest.mark.parametrize("tp", [2, 4])
def test_deepseek_replica_launches_the_kernels_the_graph_model_counts(tp: int) -> None:
    with FakeTensorMode(allow_non_fake_inputs=False):
        ctx, rep = _replica(tp)
        rep.forward(64, 0, decode=True)  # warm-up: the lazy scratch and the MoE workspace
        all_reduces = cudagraph.tp_all_reduces(ctx)
        for mode in ("PIECEWISE", "FULL"):
            inside, gap, pieces = _count(rep, mode, 16)
            gemm, other = cudagraph.graph_nodes(ctx, mode)
            assert inside.ops["clone"] == all_reduces == cudagraph.graph_nccl_nodes(ctx) == 17
            assert inside.ops["embedding"] == 1 and inside.ops["zeros"] == 1
            assert (inside.gemm, inside.other - all_reduces - 2) == (gemm, other), mode
            if mode == "PIECEWISE":
                assert pieces == cudagraph.graph_pieces(ctx) == 9
                # the MLA op between the pieces: the two bmms; cache write, cat, FlashMLA's two
                assert (gap.gemm, gap.other) == (2 * 8, 4 * 8)
            else:
                assert gap.gemm == gap.other == 0


def test_fp8_block_linear_launches_pad_quant_and_a_scaled_gemm_on_sm90() -> None:
    """vLLM 0.11.0 apply_w8a8_block_fp8_linear on SM90: F.pad (fill + copy), the per-token-group
    quantisation (one kernel), the block-scaled GEMM, then the unpadded view: the rows are
    padded to the next multiple of 4, by 4 when already a multiple."""
    with FakeTensorMode(allow_non_fake_inputs=False):
        ctx, rep = _replica(4)
        assert ctx.gpu.arch == "sm90"
        x = torch.empty(8, 1536, dtype=torch.bfloat16, device="cuda")
        k = Kernels()
        with k:
            y = rep.linear(x, "self_attn.q_b_proj", 3, 6144)
        assert dict(k.ops) == {"fill_": 1, "add": 1, "_to_copy": 1, "_scaled_mm": 1}
        assert tuple(y.shape) == (8, 6144) and y._base is not None
        assert tuple(y._base.shape) == (12, 6144)  # 8 rows padded by 4
        assert cudagraph.linear_extra_nodes(ctx) == 3


def test_moe_workspace_is_the_estimate_row_and_kept() -> None:
    """The fused MoE's caches are views of the workspaces made at its first call: their bytes
    are the estimate's WorkspaceManager row, and a second forward allocates no other."""
    with FakeTensorMode(allow_non_fake_inputs=False):
        ctx, rep = _replica(4)
        rep.forward(16, 0, decode=True)
        ws = rep.tensors["_moe_ws13"], rep.tensors["_moe_ws2"]
        assert sum(t.numel() * t.element_size() for t in ws) == moe_workspace_bytes(ctx) > 0
        rep.forward(16, 0, decode=True)
        assert rep.tensors["_moe_ws13"] is ws[0] and rep.tensors["_moe_ws2"] is ws[1]
        est = estimate("deepseek-r1", ctx.dep, gpu_name="H100")
        assert MOE_WORKSPACE in {c.name for c in est.ranks[0].components}


def test_deepseek_v4_at_tp1_records_its_kernels_in_every_piece() -> None:
    """DeepSeek-V4-Flash's shape at DP4 EP4 (TP 1, 8 layers), rank 0 on the fake device: the
    decode capture that recorded empty graphs on the GPU (reports/gpu/ranks/README.md) now holds
    kernels in every PIECEWISE piece and in the FULL graph. The fused MoE (router, shared
    expert, noaux_tc or top-k routing, alignment with the EP expert map, the two grouped GEMMs,
    SiLU-and-mul, the quantisations, moe_sum) is the graph model's ``moe_nodes`` op for op; the
    attention runs one kernel per node of the model's "dsv4" row except where the model is
    coarser than the checkpoint: it gives every attention GEMM the fp8 block kernels (the
    compressor's wkv_wgate is bf16) and every layer a compressor (the sliding-window-only layers
    have none)."""
    with FakeTensorMode(allow_non_fake_inputs=False):
        ctx, rep = _replica(1, "deepseek-v4-flash", dp=4, enable_expert_parallel=True)
        rep.forward(64, 0, decode=True)
        layers = [x for x, n in cudagraph.rank_layer_kinds(ctx.spec, ctx.dep, ctx.coord)
                  for _ in range(n)]
        bare = sum(1 for x in layers
                   if f"model.layers.{x.index}.attn.compressor.wkv_wgate.weight"
                   not in rep.tensors)
        extra = cudagraph.linear_extra_nodes(ctx)
        assert (len(layers), bare, extra, cudagraph.tp_all_reduces(ctx)) == (8, 2, 3, 0)
        per_piece: list[int] = []
        counter = [Kernels()]

        def piece_gap(op: Callable[[], None]) -> None:
            per_piece.append(sum(counter[0].ops.values()))
            counter[0].__exit__(None, None, None)
            op()
            counter[0] = Kernels()
            counter[0].__enter__()

        rep.piece_gap = piece_gap
        rep.piece_break = lambda: None
        counter[0].__enter__()
        try:
            rep.forward(16, 0, decode=True)
        finally:
            counter[0].__exit__(None, None, None)
            rep.piece_gap = rep.piece_break = None
        per_piece.append(sum(counter[0].ops.values()))
        assert len(per_piece) == cudagraph.graph_pieces(ctx) == 9
        assert min(per_piece) > 0, per_piece
        for mode in ("PIECEWISE", "FULL"):
            inside, gap, _pieces = _count(rep, mode, 16)
            gemm, other = cudagraph.graph_nodes(ctx, mode)
            assert inside.ops["embedding"] == 1 and inside.ops["zeros"] == 1
            assert inside.gemm == gemm - bare, mode
            assert inside.other - 2 == other - extra * len(layers), mode
            moe = Kernels()
            with moe:
                rep.mlp(torch.empty(16, ctx.spec.hidden_size, dtype=torch.bfloat16,
                                    device="cuda"), layers[-1])
            assert (moe.gemm, moe.other) == cudagraph.mlp_nodes(ctx, layers[-1]), mode
            assert (gap.gemm, gap.other) == ((0, 2 * 8) if mode == "PIECEWISE" else (0, 0))

"""What a vLLM-style piecewise capture of a fused-MoE decoder stack costs on this GPU, as the
free-memory delta vLLM logs ("Graph capturing finished ..., took X GiB"), and whether the MoE
layer's kernels cost what ``memprof.core.terms.cudagraph``'s per-graph and per-node constants say.

The stack is Qwen3-30B-A3B-shaped (hidden 2048, 32/4 heads of 128 with q/k RMSNorms, 128 experts
of 768, top 8, bf16; one layer's weights shared by every layer, which the graphs do not see),
split at the attention op into ``layers + 1`` pieces as vLLM's V1 runner splits it. Each piece
(o_proj, the add + RMSNorm, the router GEMM, the MoE, the add + RMSNorm, qkv, the q/k norms and
the rotary embedding) is compiled by Inductor (``torch.compile``, dynamic batch) or run eagerly;
the MoE is an opaque custom op run eagerly inside the piece, as vLLM 0.10.x's
``torch.ops.vllm.moe_forward`` is, launching the kernel sequence of vLLM 0.10.2's Triton path
(model_executor/layers/fused_moe/fused_moe.py ``fused_topk`` / ``vllm_topk_softmax`` /
``fused_experts_impl``, moe_align_block_size.py): the router logits' fp32 cast, the top-k softmax
(here torch's softmax and topk, where vLLM runs one CUDA kernel), the renormalisation's sum and
division, the block alignment (two Triton kernels standing for the align and count-and-sort
kernels), the w13 grouped GEMM (a Triton kernel with the argument list of a fused-MoE GEMM:
pointers, sizes, strides and constexpr switches), SiLU-and-mul, the w2 grouped GEMM and the sum
over the top-k rows. ``lean`` launches the same GEMMs through a kernel of ten arguments, so the
difference is what a kernel node's argument bytes cost.

The capture itself is the one of ``recorders/gpu_graph_pieces.py`` (vLLM 0.8.4
compilation/backends.py ``PiecewiseBackend``, 0.10.2 compilation/cuda_piecewise_backend.py):
vLLM 0.8-0.10's 67 sizes from 512 down, one eager warm-up forward a size, ``empty_cache`` before
a size's first piece only, the attention stand-in run eagerly between the pieces, every piece
into one private pool.

Run on the GPU machine from the repository root (torch with CUDA and Triton)::

    PYTHONPATH=. python recorders/gpu_graph_moe_pieces.py --out $OUT

Each case runs in a fresh process and reads, around the window, ``mem_get_info`` (the logged
figure) and ``memory_reserved`` (the private pool's and the warm-ups' tensors), and the kernels
one piece launches (torch.profiler at 8 tokens, names kept). Writes ``graph-moe-pieces.json``
with the torch, Triton and CUDA versions, the GPU and this command.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2048, 32, 4, 128
EXPERTS, MOE_INTER, TOPK = 128, 768, 8
SIZES_67 = [1, 2, 4, *range(8, 513, 8)]  # vLLM 0.8.x-0.10.x V1 default list up to 512
CASES: list[dict[str, object]] = [
    {"mode": "compiled", "layers": 16, "gemm": "full"},
    {"mode": "compiled", "layers": 16, "gemm": "lean"},
    {"mode": "eager", "layers": 16, "gemm": "full"},
    {"mode": "compiled", "layers": 4, "gemm": "full"},
]


def _kernels() -> tuple[object, ...]:
    import triton
    import triton.language as tl

    @triton.jit
    def gemm_body(a_ptr, b_ptr, c_ptr, w_ptr, sorted_ptr, expert_ptr, ntpp_ptr, N, K,
                  num_valid, s_am, s_ak, s_be, s_bk, s_bn, s_cm, s_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, TOP: tl.constexpr,
                  MUL_W: tl.constexpr):
        pid = tl.program_id(0)
        npn = tl.cdiv(N, BN)
        pm, pn = pid // npn, pid % npn
        if pm * BM >= tl.load(ntpp_ptr):
            return
        rows = tl.load(sorted_ptr + pm * BM + tl.arange(0, BM))
        ok = rows < num_valid
        e = tl.load(expert_ptr + pm)
        cols = (pn * BN + tl.arange(0, BN)) % N
        ks = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, tl.cdiv(K, BK)):
            kin = ks < K - k0 * BK
            a = tl.load(a_ptr + (rows // TOP)[:, None] * s_am + (k0 * BK + ks)[None, :] * s_ak,
                        mask=ok[:, None] & kin[None, :], other=0.0)
            b = tl.load(b_ptr + e * s_be + (k0 * BK + ks)[:, None] * s_bk + cols[None, :] * s_bn,
                        mask=kin[:, None], other=0.0)
            acc += tl.dot(a, b)
        if MUL_W:
            acc = acc * tl.load(w_ptr + rows, mask=ok, other=0.0)[:, None]
        tl.store(c_ptr + rows[:, None] * s_cm + cols[None, :] * s_cn, acc.to(tl.bfloat16),
                 mask=ok[:, None])

    @triton.jit
    def gemm_full(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, w_ptr, sorted_ptr, expert_ptr,
                  ntpp_ptr, N, K, EM, num_valid, s_am, s_ak, s_be, s_bk, s_bn, s_cm, s_cn,
                  s_asm, s_ask, s_bse, s_bsk, s_bsn, group_n, group_k,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                  MUL_W: tl.constexpr, TOP: tl.constexpr, FP8: tl.constexpr, INT8: tl.constexpr,
                  W8A16: tl.constexpr, PER_CHANNEL: tl.constexpr):
        gemm_body(a_ptr, b_ptr, c_ptr, w_ptr, sorted_ptr, expert_ptr, ntpp_ptr, N, K, num_valid,
                  s_am, s_ak, s_be, s_bk, s_bn, s_cm, s_cn, BM, BN, BK, TOP, MUL_W)

    @triton.jit
    def gemm_lean(a_ptr, b_ptr, c_ptr, w_ptr, sorted_ptr, expert_ptr, ntpp_ptr, N, K, num_valid,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, TOP: tl.constexpr,
                  MUL_W: tl.constexpr):
        gemm_body(a_ptr, b_ptr, c_ptr, w_ptr, sorted_ptr, expert_ptr, ntpp_ptr, N, K, num_valid,
                  K, 1, N * K, 1, K, N, 1, BM, BN, BK, TOP, MUL_W)

    @triton.jit
    def align(ids_ptr, expert_ptr, ntpp_ptr, numel, nblocks, E: tl.constexpr, BM: tl.constexpr,
              B: tl.constexpr):
        i = tl.arange(0, B)
        first = tl.load(ids_ptr + tl.minimum(i * BM, numel - 1), mask=i < nblocks, other=0)
        tl.store(expert_ptr + i, first % E, mask=i < nblocks)
        tl.store(ntpp_ptr, tl.cdiv(numel, BM) * BM)

    @triton.jit
    def sort_ids(sorted_ptr, numel, total, B: tl.constexpr):
        j = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(sorted_ptr + j, tl.where(j < numel, j, numel), mask=j < total)

    @triton.jit
    def silu_mul(x_ptr, y_ptr, n, NI: tl.constexpr, B: tl.constexpr):
        j = tl.program_id(0) * B + tl.arange(0, B)
        m = j < n
        r, c = j // NI, j % NI
        g = tl.load(x_ptr + r * 2 * NI + c, mask=m, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + r * 2 * NI + NI + c, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + j, (g / (1 + tl.exp(-g)) * u).to(tl.bfloat16), mask=m)

    return gemm_full, gemm_lean, align, sort_ids, silu_mul


def one(mode: str, layers: int, gemm: str) -> dict[str, object]:
    import torch
    import torch.nn.functional as F
    import triton

    gemm_full, gemm_lean, align, sort_ids, silu_mul = _kernels()
    dev = torch.device("cuda")
    dt = torch.bfloat16
    qkv_out = (HEADS + 2 * KV_HEADS) * HEAD_DIM

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=dt) * 0.02

    lw = dict(o=w(HIDDEN, HEADS * HEAD_DIM), gate=w(EXPERTS, HIDDEN), qkv=w(qkv_out, HIDDEN),
              n1=torch.ones(HIDDEN, device=dev, dtype=dt),
              n2=torch.ones(HIDDEN, device=dev, dtype=dt),
              qn=torch.ones(HEAD_DIM, device=dev, dtype=dt),
              kn=torch.ones(HEAD_DIM, device=dev, dtype=dt))
    w13 = w(EXPERTS, 2 * MOE_INTER, HIDDEN)
    w2 = w(EXPERTS, HIDDEN, MOE_INTER)
    inv_freq = 1.0 / (1000000 ** (torch.arange(0, HEAD_DIM, 2, device=dev).float() / HEAD_DIM))
    bm, bn, bk = 16, 64, 64

    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tw: torch.Tensor,
               sorted_ids: torch.Tensor, expert_ids: torch.Tensor, ntpp: torch.Tensor,
               top: int, mul: bool) -> None:
        n, k = b.shape[1], b.shape[2]
        grid = (triton.cdiv(sorted_ids.numel(), bm) * triton.cdiv(n, bn),)
        if gemm == "full":
            gemm_full[grid](a, b, c, a, b, tw, sorted_ids, expert_ids, ntpp, n, k,
                            sorted_ids.numel(), tw.numel(), a.stride(0), a.stride(1),
                            b.stride(0), b.stride(2), b.stride(1), c.stride(-2), c.stride(-1),
                            0, 0, 0, 0, 0, 0, 0, BM=bm, BN=bn, BK=bk, GROUP_M=8, MUL_W=mul,
                            TOP=top, FP8=False, INT8=False, W8A16=False, PER_CHANNEL=False)
        else:
            gemm_lean[grid](a, b, c, tw, sorted_ids, expert_ids, ntpp, n, k, tw.numel(), BM=bm,
                            BN=bn, BK=bk, TOP=top, MUL_W=mul)

    @torch.library.custom_op("memprof_rec::moe", mutates_args=())
    def moe(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        m = x.shape[0]
        probs = torch.softmax(logits.float(), dim=-1)  # the cast, then top-k softmax
        tw, ids = torch.topk(probs, TOPK, dim=-1)
        tw = tw / tw.sum(dim=-1, keepdim=True)  # renormalize (vllm_topk_softmax, 0.10.2)
        numel = m * TOPK
        total = numel + EXPERTS * (bm - 1)
        nblocks = triton.cdiv(total, bm)
        sorted_ids = torch.empty(total, device=x.device, dtype=torch.int32)
        expert_ids = torch.empty(nblocks, device=x.device, dtype=torch.int32)
        ntpp = torch.empty(1, device=x.device, dtype=torch.int32)
        align[(1,)](ids, expert_ids, ntpp, numel, nblocks, E=EXPERTS, BM=bm,
                    B=triton.next_power_of_2(nblocks))
        sort_ids[(triton.cdiv(total, 1024),)](sorted_ids, numel, total, B=1024)
        cache13 = torch.empty(numel * max(2 * MOE_INTER, HIDDEN), device=x.device, dtype=dt)
        c1 = cache13[: numel * 2 * MOE_INTER].view(numel, 2 * MOE_INTER)
        c2 = torch.empty(numel, MOE_INTER, device=x.device, dtype=dt)
        c3 = cache13[: numel * HIDDEN].view(m, TOPK, HIDDEN)
        launch(x, w13, c1, tw, sorted_ids, expert_ids, ntpp, TOPK, False)
        silu_mul[(triton.cdiv(numel * MOE_INTER, 1024),)](c1, c2, numel * MOE_INTER,
                                                          NI=MOE_INTER, B=1024)
        launch(c2, w2, c3.view(numel, HIDDEN), tw, sorted_ids, expert_ids, ntpp, 1, True)
        return torch.sum(c3, dim=1)  # moe_sum

    @moe.register_fake
    def _(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    def rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dt) * g

    def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        f = pos.float()[:, None] * inv_freq[None, :]
        cos, sin = f.cos()[:, None, :].to(dt), f.sin()[:, None, :].to(dt)
        x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def piece(attn: torch.Tensor, resid: torch.Tensor, pos: torch.Tensor, o: torch.Tensor,
              gate: torch.Tensor, qkv: torch.Tensor, n1: torch.Tensor, n2: torch.Tensor,
              qn: torch.Tensor, kn: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = resid + F.linear(attn, o)
        x = rms(h, n2)
        h = h + moe(x, F.linear(x, gate))
        x = rms(h, n1)
        q, k, v = F.linear(x, qkv).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM,
                                          KV_HEADS * HEAD_DIM], dim=-1)
        q = rope(rms(q.reshape(-1, HEADS, HEAD_DIM), qn), pos)
        k = rope(rms(k.reshape(-1, KV_HEADS, HEAD_DIM), kn), pos)
        out = torch.empty(q.shape[0], HEADS * HEAD_DIM, device=q.device, dtype=q.dtype)
        return q, k, v, h, out

    fn = torch.compile(piece, dynamic=True, fullgraph=True) if mode == "compiled" else piece
    args_w = (lw["o"], lw["gate"], lw["qkv"], lw["n1"], lw["n2"], lw["qn"], lw["kn"])

    def attention(q: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(q.reshape(q.shape[0], -1))  # the splitting op, eager, outside every graph

    def forward(n: int, graphs: list[object] | None, pool: object | None) -> None:
        attn = torch.zeros(n, HEADS * HEAD_DIM, device=dev, dtype=dt)
        resid = torch.zeros(n, HIDDEN, device=dev, dtype=dt)
        pos = torch.arange(n, device=dev)
        for i in range(layers + 1):
            if graphs is None:
                q, _k, _v, resid, attn = fn(attn, resid, pos, *args_w)
            else:
                if i == 0:
                    torch.cuda.empty_cache()
                g = torch.cuda.CUDAGraph()
                g.capture_begin(pool=pool)
                q, _k, _v, resid, attn = fn(attn, resid, pos, *args_w)
                g.capture_end()
                graphs.append(g)
            if i < layers:
                attention(q, attn)

    sizes = sorted(SIZES_67, reverse=True)
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    with torch.cuda.stream(stream):
        forward(8192, None, None)  # the profile run's shape; Inductor compiles here
        forward(1, None, None)
        for n in sizes:  # Triton's kernels compile per constexpr set: all before the window
            forward(n, None, None)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    from torch.profiler import ProfilerActivity, profile

    a8 = torch.zeros(8, HEADS * HEAD_DIM, device=dev, dtype=dt)
    r8 = torch.zeros(8, HIDDEN, device=dev, dtype=dt)
    p8 = torch.arange(8, device=dev)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.cuda.stream(stream):
        fn(a8, r8, p8, *args_w)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if str(e.device_type).endswith("CUDA")]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free0 = torch.cuda.mem_get_info()[0]
    res0 = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    graphs: list[object] = []
    with torch.cuda.stream(stream):
        for n in sizes:
            forward(n, None, None)  # cudagraph_num_of_warmups = 1
            forward(n, graphs, pool)
    torch.cuda.synchronize()
    total = free0 - torch.cuda.mem_get_info()[0]
    reserved = torch.cuda.memory_reserved() - res0
    for g in graphs[:3]:
        g.replay()  # type: ignore[attr-defined]
    torch.cuda.synchronize()
    return {"mode": mode, "layers": layers, "gemm": gemm, "sizes": len(sizes),
            "graphs": len(graphs), "kernels_per_piece": len(kernels), "kernel_names": kernels,
            "total_bytes": int(total), "reserved_bytes": int(reserved),
            "rest_bytes_per_graph": (total - reserved) / len(graphs)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        mode, layers, gemm = args.case.split(":")
        print(json.dumps(one(mode, int(layers), gemm)))
        return 0
    import torch
    import triton

    out = Path(args.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in CASES:
        spec = f"{c['mode']}:{c['layers']}:{c['gemm']}"
        p = subprocess.run([sys.executable, __file__, "--case", spec], capture_output=True,
                           text=True, timeout=200)
        if p.returncode:
            print(f"{spec}: failed\n{p.stderr[-3000:]}", flush=True)
            rows.append({"case": spec, "failed": p.stderr[-3000:]})
        else:
            row = json.loads(p.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{spec:>20}: {row['graphs']} graphs, {row['kernels_per_piece']} kernels a "
                  f"piece, total {row['total_bytes'] / 2**20:8.1f} MiB, reserved "
                  f"{row['reserved_bytes'] / 2**20:7.1f} MiB, rest/graph "
                  f"{row['rest_bytes_per_graph']:.0f} B", flush=True)
        (out / "graph-moe-pieces.json").write_text(json.dumps({
            "command": "PYTHONPATH=. python recorders/gpu_graph_moe_pieces.py --out $OUT",
            "torch": torch.__version__, "triton": triton.__version__,
            "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
            "cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

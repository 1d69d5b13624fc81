"""What a vLLM-style piecewise capture costs on this GPU, as the free-memory delta vLLM logs
("Graph capturing finished ..., took X GiB"): one Llama-3.1-8B-shaped decoder stack (hidden 4096,
32/8 heads of 128, intermediate 14336, bf16), split at the attention op into ``layers + 1``
pieces, each piece compiled by Inductor (``torch.compile``, dynamic batch) or run eagerly, then
captured piece by piece for every capture size into one private pool, as vLLM's V1 model runner
does (0.8.4 compilation/backends.py ``PiecewiseBackend``, 0.11.0 compilation/cuda_graph.py
``CUDAGraphWrapper``): sizes from the largest down, one eager warm-up forward per size before its
capture, ``torch.cuda.empty_cache()`` only before a size's first piece, the attention op run
eagerly between the pieces (outside every graph), each piece's output kept only until the next
piece has read it.

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_graph_pieces.py --out $OUT

Each case runs in a fresh process and reads, around the window (warm-ups and captures of all
sizes), ``mem_get_info`` (the logged figure), ``memory_reserved`` (the private pool's and the
warm-ups' tensors) and the kernels one piece launches (torch.profiler, CUDA kernels of one eager
run). ``prewarm`` runs every size's forward once before the window opens, so the window holds
the captures alone; the difference from the same case without it is what the warm-ups leave
(kernels loaded on first launch under CUDA's lazy module loading, library workspaces). Writes
``graph-pieces.json`` with the torch version, the GPU, the driver and this command.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HIDDEN, INTER, HEADS, KV_HEADS, HEAD_DIM = 4096, 14336, 32, 8, 128
SIZES_67 = [1, 2, 4, *range(8, 513, 8)]  # vLLM 0.8.x-0.10.x V1 default list up to 512
CASES: list[dict[str, object]] = [
    {"mode": "compiled", "layers": 16, "sizes": 67, "prewarm": False},
    {"mode": "compiled", "layers": 4, "sizes": 67, "prewarm": False},
    {"mode": "compiled", "layers": 16, "sizes": 67, "prewarm": True},
    {"mode": "compiled", "layers": 16, "sizes": 17, "prewarm": False},
    {"mode": "eager", "layers": 16, "sizes": 67, "prewarm": False},
    {"mode": "eager", "layers": 16, "sizes": 67, "prewarm": True},
]


def one(mode: str, layers: int, nsizes: int, prewarm: bool) -> dict[str, object]:
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda")
    dt = torch.bfloat16
    qkv_out = (HEADS + 2 * KV_HEADS) * HEAD_DIM

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=dt) * 0.02

    weights = [dict(o=w(HIDDEN, HEADS * HEAD_DIM), gu=w(2 * INTER, HIDDEN), d=w(HIDDEN, INTER),
                    qkv=w(qkv_out, HIDDEN), n1=torch.ones(HIDDEN, device=dev, dtype=dt),
                    n2=torch.ones(HIDDEN, device=dev, dtype=dt)) for _ in range(layers)]
    inv_freq = 1.0 / (500000 ** (torch.arange(0, HEAD_DIM, 2, device=dev).float() / HEAD_DIM))

    def rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * g

    def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        f = pos.float()[:, None] * inv_freq[None, :]
        cos, sin = f.cos()[:, None, :].to(dt), f.sin()[:, None, :].to(dt)
        x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def piece(attn: torch.Tensor, resid: torch.Tensor, pos: torch.Tensor, o: torch.Tensor,
              gu: torch.Tensor, d: torch.Tensor, qkv: torch.Tensor, n1: torch.Tensor,
              n2: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # the layer's o_proj, MLP and the next layer's qkv + rotary (a vLLM piece between two
        # attention ops), and the next attention's output buffer
        h = resid + F.linear(attn, o)
        x = rms(h, n2)
        g, u = F.linear(x, gu).chunk(2, dim=-1)
        h = h + F.linear(F.silu(g) * u, d)
        x = rms(h, n1)
        q, k, v = F.linear(x, qkv).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM,
                                          KV_HEADS * HEAD_DIM], dim=-1)
        q = rope(q.view(-1, HEADS, HEAD_DIM), pos)
        k = rope(k.view(-1, KV_HEADS, HEAD_DIM), pos)
        out = torch.empty(q.shape[0], HEADS * HEAD_DIM, device=q.device, dtype=q.dtype)
        return q, k, v, h, out

    fn = torch.compile(piece, dynamic=True, fullgraph=True) if mode == "compiled" else piece

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
        # the splitting op, eager and outside every graph: one kernel writing the output buffer
        out.copy_(q.reshape(q.shape[0], -1))

    def forward(n: int, graphs: list[object] | None, pool: object | None) -> None:
        attn = torch.zeros(n, HEADS * HEAD_DIM, device=dev, dtype=dt)
        resid = torch.zeros(n, HIDDEN, device=dev, dtype=dt)
        pos = torch.arange(n, device=dev)
        for i in range(layers + 1):
            lw = weights[min(i, layers - 1)]
            args = (attn, resid, pos, lw["o"], lw["gu"], lw["d"], lw["qkv"], lw["n1"], lw["n2"])
            if graphs is None:
                q, k, v, resid, attn = fn(*args)
            else:
                if i == 0:
                    torch.cuda.empty_cache()
                g = torch.cuda.CUDAGraph()
                g.capture_begin(pool=pool)
                q, k, v, resid, attn = fn(*args)
                g.capture_end()
                graphs.append(g)
            if i < layers:
                attention(q, k, v, attn)

    sizes = SIZES_67 if nsizes == 67 else SIZES_67[:: max(1, len(SIZES_67) // nsizes)][:nsizes]
    sizes = sorted(set(sizes) | {512}, reverse=True)
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    with torch.cuda.stream(stream):
        forward(8192, None, None)  # the profile run's shape; Inductor compiles here
        forward(1, None, None)  # and here for size 1 (0/1 specialisation), before the window
        if prewarm:
            for n in sizes:
                forward(n, None, None)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.cuda.stream(stream):
        lw = weights[0]
        a = torch.zeros(8, HEADS * HEAD_DIM, device=dev, dtype=dt)
        fn(a, torch.zeros(8, HIDDEN, device=dev, dtype=dt), torch.arange(8, device=dev),
           lw["o"], lw["gu"], lw["d"], lw["qkv"], lw["n1"], lw["n2"])
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if str(e.device_type).endswith("CUDA")]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free0 = torch.cuda.mem_get_info()[0]
    res0 = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    graphs: list[object] = []
    warm_left = 0
    with torch.cuda.stream(stream):
        for n in sizes:
            f = torch.cuda.mem_get_info()[0]
            forward(n, None, None)  # cudagraph_num_of_warmups = 1
            torch.cuda.synchronize()
            warm_left += f - torch.cuda.mem_get_info()[0]
            forward(n, graphs, pool)
    torch.cuda.synchronize()
    total = free0 - torch.cuda.mem_get_info()[0]
    reserved = torch.cuda.memory_reserved() - res0
    for g in graphs[:3]:
        g.replay()  # type: ignore[attr-defined]
    torch.cuda.synchronize()
    return {"mode": mode, "layers": layers, "sizes": len(sizes), "prewarm": prewarm,
            "graphs": len(graphs), "kernels_per_piece": len(kernels),
            "kernel_names": sorted(set(kernels))[:40],
            "total_bytes": int(total), "reserved_bytes": int(reserved),
            "warmup_free_drop_bytes": int(warm_left),
            "rest_mib_per_graph": (total - reserved) / len(graphs) / 2**20}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        mode, layers, sizes, pre = args.case.split(":")
        print(json.dumps(one(mode, int(layers), int(sizes), pre == "1")))
        return 0
    import torch

    out = Path(args.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in CASES:
        spec = f"{c['mode']}:{c['layers']}:{c['sizes']}:{1 if c['prewarm'] else 0}"
        p = subprocess.run([sys.executable, __file__, "--case", spec], capture_output=True,
                           text=True, timeout=240)
        if p.returncode:
            print(f"{spec}: failed\n{p.stderr[-3000:]}", flush=True)
            rows.append({"case": spec, "failed": p.stderr[-3000:]})
            continue
        row = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{spec:>22}: {row['graphs']} graphs, {row['kernels_per_piece']} kernels a piece, "
              f"total {row['total_bytes'] / 2**20:8.1f} MiB, reserved "
              f"{row['reserved_bytes'] / 2**20:7.1f} MiB, warm-up drop "
              f"{row['warmup_free_drop_bytes'] / 2**20:7.1f} MiB, rest/graph "
              f"{row['rest_mib_per_graph']:.4f} MiB", flush=True)
        (out / "graph-pieces.json").write_text(json.dumps({
            "command": "PYTHONPATH=. python recorders/gpu_graph_pieces.py --out $OUT",
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
            "cuda": torch.version.cuda, "cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the CUDA driver keep and reuse the memory of destroyed CUDA graphs? Model Runner V2
(vLLM 0.29.0 on) captures its graphs once while profiling, destroys them and their pool, allocates
the KV cache, and captures again; this mirrors that sequence with torch alone.

A decoder stack (eager pieces: o_proj, RMSNorm, gate_up, SiLU-mul, down, RMSNorm, qkv and a
rotary-like product, split at the attention op, which runs eagerly between the pieces as a copy)
at two shapes: ``q15`` (Qwen2.5-1.5B: 28 layers, hidden 1536, 12/2 heads of 128, intermediate
8960, fp16) and ``q4`` (Qwen3-4B: 36 layers, hidden 2560, 32/8 heads, intermediate 9728, bf16).
A capture set is V2's: the 51 PIECEWISE sizes to 512 (one graph a piece, ``layers + 1`` a size)
and FULL sizes (the whole forward in one graph), one eager warm-up per size, one private pool,
a new stream; ``empty_cache`` then a read before, a read after. Every size runs eagerly once
before the first read, so kernels loaded on first launch are outside every window.

Cases, each in a fresh process: ``v2`` (set A = PIECEWISE + the 2 largest FULL sizes; destroy the
graphs and the pool: ``del``, ``gc.collect``, ``empty_cache``; a tensor of 80% of the free memory
as the KV cache; set B = PIECEWISE + the 35 FULL sizes to 256), ``nokv`` (the same without the
KV-like tensor), ``same`` (B = A), ``smaller`` (B = every other PIECEWISE size and one FULL),
``onebyone`` (A's graphs destroyed one at a time, a read every 300) and ``bonly`` (B alone, after
the KV-like tensor: what B costs as the process's first capture). Each read is
(tag, ``mem_get_info`` free bytes, ``memory_reserved``). Run on the GPU machine::

    python recorders/gpu_graph_reuse.py -o $OUT   # writes graph-reuse-h100.json

reports/gpu/graph-reuse/graph_reuse_as_run.py is the same program as it ran (compacted to be sent
inline).
"""

from __future__ import annotations

import gc
import json
import subprocess as sp
import sys
from typing import Any

SHAPES = {"q15": (28, 1536, 12, 2, 8960, "float16"), "q4": (36, 2560, 32, 8, 9728, "bfloat16")}
PIECEWISE = sorted([1, 2, 4, *range(8, 257, 8), *range(272, 513, 16)], reverse=True)
FULL = PIECEWISE[16:]  # the uniform decode sizes to max_num_seqs 256
CASES = ([("q15", k) for k in ("v2", "nokv", "same", "smaller", "onebyone", "bonly")]
         + [("q4", "v2"), ("q4", "bonly")])


def case(shape: str, kind: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    c = torch.cuda
    layers, hidden, heads, kv_heads, inter, dtype_name = SHAPES[shape]
    dt = getattr(torch, dtype_name)
    dev, hd = "cuda", 128
    reads: list[list[Any]] = []
    graphs_of: dict[str, list[int]] = {}
    weights = [[torch.randn(*s, device=dev, dtype=dt) * .02
                for s in ((hidden, heads * hd), (2 * inter, hidden), (hidden, inter),
                          ((heads + 2 * kv_heads) * hd, hidden))] for _ in range(layers)]

    def rd(tag: str) -> None:
        c.synchronize()
        reads.append([tag, c.mem_get_info()[0], c.memory_reserved()])

    def piece(a: Any, r: Any, w: list[Any], p: Any) -> tuple[Any, Any, Any]:
        h = r + F.linear(a, w[0])
        x = F.rms_norm(h, (hidden,))
        g, u = F.linear(x, w[1]).chunk(2, -1)
        h = h + F.linear(F.silu(g) * u, w[2])
        x = F.rms_norm(h, (hidden,))
        q, kk, _v = F.linear(x, w[3]).split([heads * hd, kv_heads * hd, kv_heads * hd], -1)
        e = p.float()[:, None].cos().to(dt)
        return (q * e + kk.repeat(1, heads // kv_heads) * e, h,
                torch.empty(q.shape[0], heads * hd, device=dev, dtype=dt))

    def fwd(n: int, gs: list[Any] | None = None, pool: Any = None) -> None:
        a = torch.zeros(n, heads * hd, device=dev, dtype=dt)
        r = torch.zeros(n, hidden, device=dev, dtype=dt)
        p = torch.arange(n, device=dev)
        for i in range(layers + 1):
            w = weights[min(i, layers - 1)]
            if gs is None:
                q, r, o = piece(a, r, w, p)
            else:
                g = c.CUDAGraph()
                g.capture_begin(pool=pool)
                q, r, o = piece(a, r, w, p)
                g.capture_end()
                gs.append(g)
            if i < layers:
                o.copy_(q)  # the attention op's stand-in, outside every PIECEWISE graph
            a = o

    def cap(tag: str, pw: list[int], fu: list[int]) -> tuple[list[Any], Any]:
        gs: list[Any] = []
        pool = c.graph_pool_handle()
        c.empty_cache()
        rd("pre" + tag)
        with c.stream(c.Stream()):
            for n in pw:
                fwd(n)
                fwd(n, gs, pool)
            for n in fu:
                fwd(n)
                g = c.CUDAGraph()
                g.capture_begin(pool=pool)
                fwd(n)
                g.capture_end()
                gs.append(g)
        rd(tag)
        graphs_of[tag] = [len(pw) * (layers + 1), len(fu)]
        return gs, pool

    for n in PIECEWISE:
        fwd(n)
    rd("start")
    if kind != "bonly":
        gs, pool = cap("A", PIECEWISE, FULL[:2])
        while kind == "onebyone" and gs:
            gs.pop()
            if len(gs) % 300 == 0:
                gc.collect()
                rd(f"pop{len(gs)}")
        del gs, pool
        gc.collect()
        c.empty_cache()
        rd("destroyed")
    if kind != "nokv":
        kv = torch.empty(int(c.mem_get_info()[0] * .8), dtype=torch.uint8, device=dev)
        rd("kv")
        assert kv.numel()
    sets = {"same": (PIECEWISE, FULL[:2]), "smaller": (PIECEWISE[::2], FULL[:1])}
    gs, pool = cap("B", *sets.get(kind, (PIECEWISE, FULL)))
    return {"shape": shape, "case": kind, "graphs": graphs_of, "reads": reads}


def main() -> int:
    if sys.argv[1] == "-c":
        print(json.dumps(case(*sys.argv[2:])))
        return 0
    import torch

    rows = []
    for shape, kind in CASES:
        p = sp.run([sys.executable, __file__, "-c", shape, kind], capture_output=True, text=True,
                   timeout=150)
        rows.append(json.loads(p.stdout.splitlines()[-1]) if p.returncode == 0
                    else {"shape": shape, "case": kind, "failed": p.stderr[-1500:]})
        print(json.dumps(rows[-1]), flush=True)
    driver = sp.getoutput("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    with open(sys.argv[2] + "/graph-reuse-h100.json", "w") as f:
        f.write(json.dumps({"command": " ".join(sys.argv), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "driver": driver,
                            "gpu": torch.cuda.get_device_name(), "cases": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

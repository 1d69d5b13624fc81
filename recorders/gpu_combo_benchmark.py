"""Measure, on a GPU, what a cold ``torch.compile`` of vLLM's first graph piece allocates when
Inductor's combo kernels are benchmarked (the compiled single-GPU Model Runner V2 logs keep about
an embedding table's size of "peak activation" on a cold compile and not on a warm one:
docs/model-runner-v2.md, rows 1603, 1604, 1607, 1640-1649).

Run on the GPU machine from the repository root (torch with CUDA and Triton; no vLLM)::

    PYTHONPATH=. python recorders/gpu_combo_benchmark.py --out $OUT

What it compiles, written here from vLLM 0.27.1's sources: the graph piece before the first
attention op (vLLM's backend splits the model's graph at attention and compiles each piece with
Inductor, compilation/backends.py): the token embedding (``VocabParallelEmbedding.forward``:
``F.embedding`` of the ids; at TP > 1 the vocabulary mask, ``masked_fill_`` and an all-reduce,
here an opaque custom op as vLLM's ``torch.ops.vllm.all_reduce`` is), the first layer's
RMSNorm (``RMSNorm.forward_static``, custom ops off under Inductor), the qkv projection, Qwen3's
per-head q / k RMSNorms, and the rotary embedding's native path (``RotaryEmbedding.forward_static``:
``cos_sin_cache.index_select(0, positions)``, neox style). Inductor's options as vLLM sets them for
torch >= 2.9 (config/compilation.py ``CompilationConfig.__post_init__``, 0.20.0-0.27.1:
``combo_kernels`` and ``benchmark_combo_kernel`` on), the token dimension dynamic.

Each case runs in a fresh process with an empty Inductor cache (cold), then again in a fresh
process on the same cache (warm). It records the first call's peak above the allocated bytes
before it, the second call's, every allocation of 32 MiB or more made during the first call with
the innermost frames of its Python stack, and the node groups Inductor benchmarked as combo
kernels (``Scheduler.speedup_by_combo_kernel``). Controls: combo kernels off, and the piece
without the rotary embedding (the shape of recorders/gpu_v2_window.py ``--set b``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MIB = 1 << 20

# name: (vocab, hidden, heads, kv heads, head dim, q/k norm, max positions)
SHAPES = {
    "qwen3-1.7b": (151936, 2048, 16, 8, 128, True, 40960),
    "qwen3-4b": (151936, 2560, 32, 8, 128, True, 40960),
    "qwen3-8b": (151936, 4096, 32, 8, 128, True, 40960),
    "llama3.1-8b": (128256, 4096, 32, 8, 128, False, 131072),
    "qwen3-32b": (151936, 5120, 64, 8, 128, True, 40960),
}

# case: (shape, tokens, tp, combo kernels, rotary)
CASES = {
    "qwen3-4b-t2048": ("qwen3-4b", 2048, 1, True, True),
    "qwen3-1.7b-t2048": ("qwen3-1.7b", 2048, 1, True, True),
    "qwen3-8b-t2048": ("qwen3-8b", 2048, 1, True, True),
    "llama3.1-8b-t2048": ("llama3.1-8b", 2048, 1, True, True),
    "llama3.1-8b-t2048-tp2": ("llama3.1-8b", 2048, 2, True, True),
    "qwen3-32b-t8192": ("qwen3-32b", 8192, 1, True, True),
    "qwen3-32b-t8192-tp2": ("qwen3-32b", 8192, 2, True, True),
    "qwen3-4b-t2048-nocombo": ("qwen3-4b", 2048, 1, False, True),
    "qwen3-4b-t2048-norope": ("qwen3-4b", 2048, 1, True, False),
}


def run_case(name: str) -> dict[str, Any]:
    import torch
    import torch._inductor.config as ic
    import torch.nn.functional as F
    from torch._inductor import scheduler as sched

    shape, tokens, tp, combo, rope = CASES[name]
    vocab, hidden, heads, kv, hd, qknorm, max_pos = SHAPES[shape]
    vocab_l, heads_l, kv_l = vocab // tp, heads // tp, max(kv // tp, 1)
    dev, bf16 = "cuda", torch.bfloat16
    torch.manual_seed(0)

    groups: list[list[str]] = []
    orig = sched.Scheduler.speedup_by_combo_kernel

    def spy(self: Any, nodes: list[Any]) -> bool:
        groups.append([n.get_name() for n in nodes])
        return bool(orig(self, nodes))

    sched.Scheduler.speedup_by_combo_kernel = spy  # type: ignore[method-assign]

    @torch.library.custom_op("memprof_rec::all_reduce", mutates_args=(),
                             schema="(Tensor x) -> Tensor")
    def all_reduce(x):  # type: ignore[no-untyped-def]
        return x.clone()

    @all_reduce.register_fake
    def _(x):  # type: ignore[no-untyped-def]
        return torch.empty_like(x)

    def w(*s: int) -> Any:
        return torch.empty(s, dtype=bf16, device=dev).normal_(0, 0.02)

    embed = w(vocab_l, hidden)
    ln = w(hidden)
    qkv_w = w((heads_l + 2 * kv_l) * hd, hidden)
    qn, kn = w(hd), w(hd)
    cache = w(max_pos, hd)

    def rms(x: Any, weight: Any) -> Any:
        x32 = x.float()
        var = x32.pow(2).mean(dim=-1, keepdim=True)
        return (x32 * torch.rsqrt(var + 1e-6)).to(bf16) * weight

    def rot(x: Any, cos: Any, sin: Any) -> Any:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        return torch.cat((o1, o2), dim=-1)

    def piece0(ids: Any, positions: Any) -> Any:
        if tp > 1:
            mask = (ids >= vocab_l)
            x = F.embedding(torch.where(mask, 0, ids).long(), embed)
            x.masked_fill_(mask.unsqueeze(-1), 0)
            x = torch.ops.memprof_rec.all_reduce(x)
        else:
            x = F.embedding(ids.long(), embed)
        residual = x
        h = rms(x, ln)
        qkv = F.linear(h, qkv_w)
        q, k, v = qkv.split([heads_l * hd, kv_l * hd, kv_l * hd], dim=-1)
        if qknorm:
            q = rms(q.view(-1, heads_l, hd), qn).view(q.shape)
            k = rms(k.view(-1, kv_l, hd), kn).view(k.shape)
        if rope:
            cos_sin = cache.index_select(0, positions)
            cos, sin = cos_sin.chunk(2, dim=-1)
            n = positions.shape[0]
            q = rot(q.view(n, -1, hd), cos.unsqueeze(-2), sin.unsqueeze(-2)).reshape(q.shape)
            k = rot(k.view(n, -1, hd), cos.unsqueeze(-2), sin.unsqueeze(-2)).reshape(k.shape)
        return q, k, v, residual

    ic.combo_kernels = combo
    ic.benchmark_combo_kernel = combo
    fn = torch.compile(piece0, fullgraph=True)

    def call() -> tuple[int, int, float]:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        t0 = time.time()
        with torch.inference_mode():
            ids = torch.randint(0, vocab, (tokens,), device=dev, dtype=torch.int32)
            pos = torch.arange(tokens, device=dev)
            torch._dynamo.mark_dynamic(ids, 0)
            torch._dynamo.mark_dynamic(pos, 0)
            out = fn(ids, pos)
            torch.cuda.synchronize()
            del out, ids, pos
        return (torch.cuda.max_memory_allocated() - base, torch.cuda.memory_allocated() - base,
                time.time() - t0)

    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    first, kept1, t1 = call()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    second, kept2, t2 = call()
    big = []
    for trace in snap.get("device_traces", []):
        for ev in trace:
            if ev.get("action") == "alloc" and ev.get("size", 0) >= 32 * MIB:
                frames = [f"{f.get('filename', '').rsplit('/', 1)[-1]}:{f.get('line')} "
                          f"{f.get('name')}" for f in ev.get("frames", [])[:10]]
                big.append({"size": ev["size"], "frames": frames})
    return {"case": name, "shape": shape, "tokens": tokens, "tp": tp, "combo_kernels": combo,
            "rotary": rope, "embed_bytes": vocab_l * hidden * 2,
            "first_call_peak": first, "first_call_s": round(t1, 2), "kept_first": kept1,
            "second_call_peak": second, "second_call_s": round(t2, 2), "kept_second": kept2,
            "combo_groups": groups[:40], "allocs_32mib_plus": big[:60]}


def _child(name: str, cache: str) -> dict[str, Any]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=cache + "/triton")
    p = subprocess.run([sys.executable, __file__, "--case", name], env=env, capture_output=True,
                       text=True, timeout=900)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return {"case": name, "error": p.stderr[-3000:]}
    return dict(json.loads(lines[-1]))


def both(name: str) -> dict[str, Any]:
    cache = tempfile.mkdtemp(prefix=f"ind-{name}-")
    cold = _child(name, cache)
    warm = _child(name, cache)
    return {"case": name, "cold": cold, "warm": warm}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--case")
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    import torch
    import triton

    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(both, list(CASES)))
    doc = {"torch": torch.__version__, "triton": triton.__version__,
           "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
           "command": "PYTHONPATH=. python recorders/gpu_combo_benchmark.py --out $OUT",
           "cases": results}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "combo-benchmark.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for r in results:
        for k in ("cold", "warm"):
            c = r[k]
            if "error" in c:
                print(r["case"], k, "ERROR", c["error"][-800:])
                continue
            sizes = sorted({a["size"] // MIB for a in c["allocs_32mib_plus"]}, reverse=True)[:6]
            print(f"{r['case']:<24} {k:<4} peak1 {c['first_call_peak'] / MIB:8.1f} MiB "
                  f"peak2 {c['second_call_peak'] / MIB:8.1f} embed {c['embed_bytes'] / MIB:7.1f} "
                  f"groups {len(c['combo_groups'])} big {sizes} t {c['first_call_s']}s")


if __name__ == "__main__":
    main()

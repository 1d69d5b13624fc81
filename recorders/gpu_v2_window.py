"""Measure, on a GPU, what vLLM's budget line reads across a profile-like window of Model Runner
V2, at TP1 and TP2 shapes, for the single-card V2 shortfall (memprof/core/engines/vllm_runner.py).

Run on the GPU machine from the repository root (torch with CUDA and Triton; no vLLM)::

    PYTHONPATH=. python recorders/gpu_v2_window.py --out $OUT

Two questions about torch and the CUDA allocator / driver, not about vLLM's source:

1. ``uva``: does pinned host memory (what V2's ``UvaBuffer`` makes: ``torch.zeros(...,
   pin_memory=True)``, v1/worker/gpu/buffer_utils.py, 0.27.1) lower the free memory that
   ``torch.cuda.mem_get_info`` reports, which 0.27.0+'s ``total_consumed`` reads?
2. ``window-*``: the sequence of vLLM 0.27.1 from the worker's init snapshot to the budget line
   (v1/worker/gpu_worker.py ``init_device`` / ``load_model`` / ``determine_available_memory``,
   utils/mem_utils.py ``memory_profiling``), written here from those files: ``gc.collect`` +
   ``empty_cache`` + a snapshot; the weights allocated under ``max_split_size_mb:20``; V2's
   sampler state (``PenaltiesState``, ``StructuredOutputsWorker``) and input buffers; then
   ``gc.collect`` + ``empty_cache`` + ``reset_peak_memory_stats`` + a snapshot, a profile-like
   forward of ``T`` tokens (token embedding, per layer RMSNorm, qkv projection, attention skipped
   as in the profile run's ``skip_attn`` (an output buffer), o projection, SiLU-and-mul of the
   gate-up projection, down projection; final norm, the ``R`` sampled rows, the lm_head in the
   model dtype and a greedy argmax), ``gc.collect`` + ``empty_cache`` + a snapshot. The TP2 case
   halves the sharded dimensions and adds the embedding mask (an all-reduce is a no-op on one
   card). Each case runs eagerly and through ``torch.compile`` (cold, in an empty Inductor cache,
   with vLLM 0.27.1's Inductor options ``combo_kernels`` / ``benchmark_combo_kernel``), one fresh
   process a case.

``--set b`` (``v2-module-h100.json``) asks the same of the compiled mode as vLLM builds it, for
Llama-3.1-8B shapes at 2,048 tokens (rows 1104, 1205-1214: compiled single-GPU V2 logs keep
0.82-0.88 GiB beyond V2's own terms, the eager row 1215 none): the model an ``nn.Module`` whose
weights are ``Parameter``s (``requires_grad=False``, as vLLM makes them; one case with the default
``True``), ``torch.compile`` of the module with the token dimension marked dynamic, the first call
(the cold compile and the forward) under ``torch.inference_mode`` as V2's ``profile_run`` runs it,
then the greedy sampler stage outside the compiled graph (``compute_logits`` on the R rows);
TP1 and TP2 shards and an eager baseline. Each case records the peak of the first and of a second
call above the allocated bytes before it, and every allocation of 256 MiB or more made during the
first call with the innermost frames of its Python stack (the allocator's recorded history).

Each case records the budget terms as vLLM 0.27.1 computes them (``total_consumed``,
``transient_peak_headroom``, ``torch_peak_increase``, the non-torch increase) and splits the
free-memory drop into allocated bytes, reserved-but-free bytes after ``empty_cache`` (segments
that a live block keeps) and the rest (non-torch), with the segments still reserved after the
window. Shapes: Qwen3-32B (rows 901-903) with a few layers (the window's terms per layer do not
add: activations are freed layer by layer). The golden and what it shows:
reports/gpu/v2-window/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

MIB = 1 << 20

# Qwen3-32B (config.json): vocab, hidden, intermediate, heads, kv heads, head dim
QWEN3_32B = (151936, 5120, 25600, 64, 8, 128)


def _snap(torch: Any) -> dict[str, int]:
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {"free": free, "total": total, "reserved": torch.cuda.memory_reserved(),
            "allocated": stats.get("allocated_bytes.all.current", 0),
            "peak": stats.get("allocated_bytes.all.peak", 0)}


def _set_split(torch: Any, value: str) -> None:
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None:
        torch.cuda.memory._set_allocator_settings(value)
    else:
        setter(value)


def run_uva() -> dict[str, Any]:
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    gc.collect()
    torch.cuda.empty_cache()
    before = torch.cuda.mem_get_info()[0]
    bufs = [torch.zeros((1024, 32768), dtype=torch.int32, pin_memory=True) for _ in range(8)]
    # the device view V2 reads through (UVA): a kernel reading pinned memory directly
    dev = torch.zeros(1, device="cuda")
    dev += bufs[0][0, 0].to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    after = torch.cuda.mem_get_info()[0]
    return {"pinned_bytes": sum(b.numel() * 4 for b in bufs), "free_drop": before - after,
            "reserved": torch.cuda.memory_reserved()}


def run_window(tp: int, tokens: int, rows: int, layers: int, compiled: bool) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    vocab, hidden, inter, heads, kv_heads, hd = QWEN3_32B
    vocab_l, inter_l, heads_l, kv_l = -(-vocab // tp), inter // tp, heads // tp, kv_heads // tp
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    torch.cuda.init()
    torch.zeros(1, device=dev)
    gc.collect()
    torch.cuda.empty_cache()
    init = _snap(torch)

    # load_model under max_split_size_mb:20 (0.27.1 Worker.load_model)
    _set_split(torch, "max_split_size_mb:20")

    def w(*shape: int) -> Any:
        return torch.empty(shape, dtype=bf16, device=dev).normal_(0, 0.02)

    embed = w(vocab_l, hidden)
    lw = []
    for _ in range(layers):
        lw.append((w(hidden), w((heads_l + 2 * kv_l) * hd, hidden), w(hidden, heads_l * hd),
                   w(hidden), w(2 * inter_l, hidden), w(hidden, inter_l)))
    final_n = w(hidden)
    lm_head = w(vocab_l, hidden)
    torch.cuda.synchronize()
    _set_split(torch, "max_split_size_mb:" + str((2**64 - 1) // MIB))  # as 0.27.1 restores
    gc.collect()
    torch.cuda.empty_cache()
    weights = torch.cuda.memory_allocated() - init["allocated"]

    # V2's state made before the window (0.27.1 GPUModelRunner.__init__ / load_model)
    v2_state = [
        torch.zeros((rows, vocab), dtype=torch.int32, device=dev),  # output_bin_counts
        torch.zeros((rows, -(-vocab // 32)), dtype=torch.int32, device=dev),  # prompt_bin_mask
        torch.zeros((rows, -(-vocab // 32)), dtype=torch.int32, device=dev),  # grammar_bitmask
        torch.zeros(rows, dtype=torch.int32, device=dev),  # logits_indices
        torch.zeros(tokens, dtype=torch.int32, device=dev),  # InputBuffers.input_ids
        torch.zeros(tokens, dtype=torch.int64, device=dev),  # InputBuffers.positions
        torch.zeros((rows, 1024), dtype=torch.int32, device=dev),  # allowed_token_ids
        torch.zeros((rows, 1024), dtype=torch.int32, device=dev),  # logit_bias_token_ids
        torch.zeros((rows, 1024), dtype=torch.float32, device=dev),  # logit_bias
    ]
    state_bytes = sum(t.numel() * t.element_size() for t in v2_state)

    def rms(x: Any, g: Any) -> Any:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(bf16) * g

    def forward(ids: Any, idx: Any) -> Any:
        if tp > 1:
            mask = ids >= vocab_l
            x = F.embedding(torch.where(mask, 0, ids), embed)
            x = x.masked_fill(mask.unsqueeze(-1), 0)
        else:
            x = F.embedding(ids, embed)
        residual = x
        for n1, wqkv, wo, n2, wgu, wd in lw:
            h = rms(x, n1)
            qkv = h @ wqkv.t()
            attn = torch.empty((qkv.shape[0], heads_l * hd), dtype=bf16, device=dev)
            o = attn @ wo.t()
            residual = residual + o
            h = rms(residual, n2)
            gu = h @ wgu.t()
            g, u = gu.split(inter_l, dim=-1)
            x = (F.silu(g.float()).to(bf16) * u) @ wd.t()
            residual = residual + x
        h = rms(residual + x, final_n)
        logits = h[idx] @ lm_head.t()
        return logits.argmax(-1)

    fn = forward
    if compiled:
        import torch._inductor.config as ic

        ic.combo_kernels = True
        ic.benchmark_combo_kernel = True
        fn = torch.compile(forward, fullgraph=True, dynamic=False)

    # memory_profiling (0.27.1 utils/mem_utils.py)
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = _snap(torch)
    t0 = time.time()
    ids = torch.randint(0, vocab_l, (tokens,), device=dev)
    idx = torch.arange(rows, device=dev) * (tokens // rows) + (tokens // rows - 1)
    out = fn(ids, idx)
    torch.cuda.synchronize()
    del out, ids, idx
    gc.collect()
    torch.cuda.empty_cache()
    after = _snap(torch)
    seconds = time.time() - t0

    segs = []
    for s in torch.cuda.memory_snapshot():
        active = sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
        if s["total_size"] - active >= MIB:
            segs.append({"size": s["total_size"], "active": active,
                         "stream": s.get("stream", 0)})
    total_consumed = init["free"] - after["free"]
    cuda_init = init["total"] - init["free"]
    cuda_after = after["total"] - after["free"]
    return {
        "tp": tp, "tokens": tokens, "rows": rows, "layers": layers, "compiled": compiled,
        "seconds": round(seconds, 2),
        "weights_allocated": weights, "v2_state_bytes": state_bytes,
        "total_consumed": total_consumed,
        "transient_peak_headroom": after["peak"] - after["allocated"],
        "torch_peak_increase": after["peak"] - before["peak"],
        "persistent_from_window": after["allocated"] - before["allocated"],
        "reserved_free_after": after["reserved"] - after["allocated"],
        "reserved_free_before_window": before["reserved"] - before["allocated"],
        "non_torch_increase": (cuda_after - after["reserved"]) - (cuda_init - init["reserved"]),
        "overhead_0271": total_consumed + after["peak"] - after["allocated"] - weights,
        "held_segments": segs,
    }


def run_module(tp: int, compiled: bool, grad: bool, tokens: int = 2048, rows: int = 256,
               layers: int = 2) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    vocab, hidden, inter, heads, kv_heads, hd = 128256, 4096, 14336, 32, 8, 128  # Llama-3.1-8B
    vocab_l, inter_l, heads_l, kv_l = -(-vocab // tp), inter // tp, heads // tp, kv_heads // tp
    dev = torch.device("cuda")
    bf16 = torch.bfloat16

    def p(*shape: int) -> nn.Parameter:
        return nn.Parameter(torch.empty(shape, dtype=bf16, device=dev).normal_(0, 0.02),
                            requires_grad=grad)

    class Norm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = p(hidden)

        def forward(self, x: Any, residual: Any) -> Any:
            if residual is not None:
                x = x + residual
            residual = x
            xf = x.float()
            y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(bf16)
            return y * self.weight, residual

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = Norm(), Norm()
            self.qkv = p((heads_l + 2 * kv_l) * hd, hidden)
            self.o = p(hidden, heads_l * hd)
            self.gu = p(2 * inter_l, hidden)
            self.down = p(hidden, inter_l)

        def forward(self, x: Any, residual: Any) -> Any:
            h, residual = self.n1(x, residual)
            qkv = F.linear(h, self.qkv)
            attn = torch.empty((qkv.shape[0], heads_l * hd), dtype=bf16, device=qkv.device)
            h, residual = self.n2(F.linear(attn, self.o), residual)
            g, u = F.linear(h, self.gu).split(inter_l, dim=-1)
            return F.linear(F.silu(g) * u, self.down), residual

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = p(vocab_l, hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.norm = Norm()

        def forward(self, ids: Any) -> Any:
            if tp > 1:
                mask = ids >= vocab_l
                x = F.embedding(torch.where(mask, 0, ids), self.embed)
                x = x.masked_fill(mask.unsqueeze(-1), 0)
            else:
                x = F.embedding(ids, self.embed)
            residual = None
            for layer in self.layers:
                x, residual = layer(x, residual)
            x, _ = self.norm(x, residual)
            return x

    torch.cuda.init()
    model = Model()
    lm_head = torch.empty((vocab_l, hidden), dtype=bf16, device=dev).normal_(0, 0.02)
    fn: Any = model
    if compiled:
        import torch._inductor.config as ic

        ic.combo_kernels = True
        ic.benchmark_combo_kernel = True
        fn = torch.compile(model, fullgraph=True)

    def call() -> tuple[int, int]:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        with torch.inference_mode():
            ids = torch.randint(0, vocab_l, (tokens,), device=dev)
            torch._dynamo.mark_dynamic(ids, 0)
            h = fn(ids)
            idx = torch.arange(rows, device=dev) * (tokens // rows) + (tokens // rows - 1)
            out = (h[idx] @ lm_head.t()).argmax(-1)
            torch.cuda.synchronize()
            del h, out, ids, idx
        gc.collect()
        return torch.cuda.max_memory_allocated() - base, torch.cuda.memory_allocated() - base

    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    first, kept1 = call()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    second, kept2 = call()
    big = []
    for trace in snap.get("device_traces", []):
        for ev in trace:
            if ev.get("action") == "alloc" and ev.get("size", 0) >= 256 * MIB:
                frames = [f"{f.get('filename', '').rsplit('/', 1)[-1]}:{f.get('line')} "
                          f"{f.get('name')}" for f in ev.get("frames", [])[:8]]
                big.append({"size": ev["size"], "frames": frames})
    return {"tp": tp, "compiled": compiled, "requires_grad": grad, "tokens": tokens,
            "rows": rows, "layers": layers, "first_call_peak": first, "kept_first": kept1,
            "second_call_peak": second, "kept_second": kept2,
            "embed_bytes": vocab_l * hidden * 2, "allocs_256mib_plus": big[:40]}


MODULE_CASES = {
    "tp1-eager": (1, False, False), "tp1-compiled": (1, True, False),
    "tp2-compiled": (2, True, False), "tp1-compiled-grad": (1, True, True),
}

CASES = [
    ("tp1-eager", 1, False), ("tp2-eager", 2, False),
    ("tp1-compiled", 1, True), ("tp2-compiled", 2, True),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--case")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--set", default="a", choices=["a", "b"])
    args = ap.parse_args()
    if args.case and args.case.startswith("module-"):
        tp, compiled, grad = MODULE_CASES[args.case.removeprefix("module-")]
        print(json.dumps(run_module(tp, compiled, grad)))
        return
    if args.case == "uva":
        print(json.dumps(run_uva()))
        return
    if args.case:
        tp, compiled = {c[0]: (c[1], c[2]) for c in CASES}[args.case]
        print(json.dumps(run_window(tp, args.tokens, args.rows, args.layers, compiled)))
        return
    import torch

    result: dict[str, Any] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                              "cases": {}}
    try:
        import triton

        result["triton"] = triton.__version__
    except ImportError:
        pass
    names = (["uva"] + [c[0] for c in CASES] if args.set == "a"
             else ["module-" + k for k in MODULE_CASES])
    out_name = "v2-window.json" if args.set == "a" else "v2-module.json"
    for name in names:
        env = dict(os.environ)
        env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind-")
        env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tri-")
        cmd = [sys.executable, __file__, "--out", args.out, "--case", name,
               "--layers", str(args.layers), "--tokens", str(args.tokens),
               "--rows", str(args.rows)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        try:
            result["cases"][name] = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            result["cases"][name] = {"error": p.stderr[-3000:]}
        print(name, json.dumps(result["cases"][name])[:600], flush=True)
        with open(os.path.join(args.out, out_name), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

"""Measure what a cold ``torch.compile`` of a decoder adds to the torch allocator's peak, on a GPU,
for the vLLM 0.26 / 0.27 single-card KV shortfall (memprof/core/engines/vllm_runner.py, "Row
1104's torch peak").

Run on the GPU machine from the repository root (torch with CUDA and Triton)::

    PYTHONPATH=. python recorders/gpu_compile_peak.py --out $OUT

What is run, one fresh process a case: a decoder stack written here from the shapes and native
("forward_native") paths vLLM compiles (token embedding; RMSNorm with the fused residual add in
fp32; the qkv projection, with bias or per-head q/k RMSNorm where the family has them; neox
rotary from a ``cos_sin_cache`` gathered by position; attention; the o projection; SiLU-and-mul
of the gate-up projection; the down projection; the final norm). vLLM splits the model's graph at
attention and compiles each piece with Inductor (compilation/backends.py, 0.26.0 / 0.27.1): here
each piece is its own ``torch.compile(fullgraph=True)`` function whose weights are arguments (graph
inputs, as Dynamo makes a module's parameters), with the token dimension marked dynamic (vLLM's
default backed dynamic shapes, hint = the profile run's token count), and attention runs eagerly
between pieces (an output buffer, as the profile run's ``skip_attn``). Inductor gets the options
vLLM 0.27.1 sets on CUDA with torch >= 2.9 (config/compilation.py
``CompilationConfig.__post_init__``): ``combo_kernels`` and ``benchmark_combo_kernel`` on,
``enable_auto_functionalized_v2`` off, and on torch < 2.12 the size / alignment / scalar asserts
off; no max-autotune (compilation/compiler_interface.py ``set_inductor_config`` turns it on only
for single-size ranges). A "tp2" case halves the sharded dimensions and adds the embedding mask and
an opaque all-reduce (a custom op, as ``vllm.all_reduce``), which Inductor cannot fuse across.

Each case records, above the allocated bytes after the weights and one eager forward (cuBLAS
workspace warm): the eager forward's peak, the first compiled call's peak (compile + forward), and
the second compiled call's peak (forward only). During the first call the allocator's history is
recorded with Python stacks; each allocation is classed by the functions on its stack
("bench": Inductor's / Triton's kernel benchmarking; "compile": other compile-time code; "run":
the compiled forward), and the file keeps the live bytes of each class at the overall peak, each
class's own peak, and the largest allocations with their stacks' Inductor functions.

Cases: "cold" in an empty Inductor / Triton cache; "warm" a second process on that cache (the FX
graph cache hits: no compile); "kperf" a second process on that cache with the FX graph and
AOTAutograd caches off (the graph is recompiled, but each kernel's benchmark timing is read from
the ``.kernel_perf`` file beside its source). The file ``compile-peak-<gpu>.json`` holds every
case, the versions and the GPU. ``--set b`` runs ``CASES_B`` instead (full-depth stacks, and the
whole model as one graph, compiled plainly or through Dynamo's AOT path) into
``compile-peak-b-<gpu>.json``. The goldens and what they show: reports/gpu/compile-peak/README.md.

``--set c`` (``CASES_C``) runs, one process at a time (the free memory is the device's), the
Qwen3 shapes of the published cold / warm Model Runner V2 logs (rows 1603 / 1604, 1607 /
1640-1649 of tests/data/published.json), each compiled cold and then warm on one cache, and
measures around the first and the second compiled call the profile window of vLLM 0.27.1-0.31
(utils/mem_utils.py ``memory_profiling``: ``gc.collect()`` + ``empty_cache()`` +
``reset_peak_memory_stats()``, a snapshot, the call, ``gc.collect()`` + ``empty_cache()``, a
snapshot): the torch peak increase, ``transient_peak_headroom`` (peak - allocated after), the
non-torch increase ((total - free) - reserved, after less before), ``total_consumed`` (the drop
in free memory) and the reserved increase, into ``compile-peak-c-<gpu>.json``. The non-torch part
is what the kernels a call loads keep in the context (their modules, the driver's local-memory
reservation): a cold compile launches every autotuning candidate, a warm one the chosen kernels
only. Golden: reports/gpu/cold-compile-window/README.md.

``--set d`` (``CASES_D``) is set c with Inductor's ``triton.autotune_at_compile_time`` on, as
``torch._inductor.standalone_compile`` turns it on around every compile (torch/_inductor/
standalone_compile.py, ``config.patch("triton.autotune_at_compile_time", True)``) and vLLM
compiles each graph piece through it (compilation/compiler_interface.py
``InductorStandaloneAdaptor``, ``VLLM_USE_STANDALONE_COMPILE`` on by default): the kernels are
autotuned while the graph compiles, on example arguments the wrapper generates for every kernel
argument, graph inputs (the weights) included; and it records the first call's allocations with
their stacks (the largest ones, as the default set does). Into ``compile-peak-d-<gpu>.json``.

``--set e`` (``CASES_E``, split at attention) and ``--set f`` (``CASES_F``, one graph through
Dynamo's AOT path, compiled whole before it runs, as vLLM compiles every piece before the first
forward) ask where the published cold starts' second table goes (rows 1604 / 1601 of
tests/data/published.json keep one table more in the budget's consumed memory than their warm
starts). Set d's order but without the eager forwards before the window, so that, as in vLLM
(nothing runs a GEMM between the load and ``profile_run``), the process's first GEMM and its
persistent cuBLAS workspace come inside the window, after the compile's example arguments were
freed; ``CUBLAS_WORKSPACE_CONFIG`` at torch's default below sm90 (":4096:2:16:8", 8 MiB + 128
KiB: the RTX 4090) or on sm90-sm12x (":4096:8", 32 MiB: the RTX 50 series, RTX PRO Blackwell);
the lm_head tied to the table or a table of its own, and after the forward the greedy
sampler's logits GEMM on 256 rows; four layers, cold. Each window also keeps the large
segments still reserved after its ``empty_cache()`` with their live blocks and stacks (a freed
table copy pinned by a live block would be one). Into ``compile-peak-e-<gpu>.json`` /
``compile-peak-f-<gpu>.json``.

``--set g`` (``CASES_G``) is set e with the published cards' parameters on whatever card runs
it: the L2 size Inductor's benchmarker sizes its flush buffer by (torch/_inductor/runtime/
benchmarking.py ``InductorBenchmarker.L2_cache_size``, replaced in the child by the card's: 72
MiB on the RTX 4090, 32 MiB on the RTX 5060 Ti, 48 MiB on the RTX 5070 Ti) with that card's
default cuBLAS workspace, for the shapes of the rows that keep a second table (1604, 1601, 1701
/ 1707) and of those that do not (1603; the LoRA rows' Qwen3-4B). Into
``compile-peak-g-<gpu>.json``.
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
from pathlib import Path
from typing import Any

GIB = 1 << 30

# name: vocab, hidden, intermediate, heads, kv_heads, head_dim, qkv_bias, qk_norm, max_pos
SHAPES: dict[str, tuple[int, int, int, int, int, int, bool, bool, int]] = {
    "llama-3.1-8b": (128256, 4096, 14336, 32, 8, 128, False, False, 4096),
    "qwen2.5-7b": (152064, 3584, 18944, 28, 4, 128, True, False, 8192),
    "qwen3-32b": (151936, 5120, 25600, 64, 8, 128, False, True, 32768),
    "qwen3-1.7b": (151936, 2048, 6144, 16, 8, 128, False, True, 40960),
    "qwen3-4b": (151936, 2560, 9728, 32, 8, 128, False, True, 40960),
    "qwen3-8b": (151936, 4096, 12288, 32, 8, 128, False, True, 40960),
}
# set "c": (shape, layers, mode, cache key), each compiled cold then warm on its cache
CASES_C: list[tuple[str, int, str, str]] = [
    ("qwen3-8b", 2, "aot", "q8"), ("qwen3-1.7b", 2, "aot", "q17"),
    ("qwen3-8b", 36, "pieces", "q8L"),
]
# set "d": (shape, layers, mode, cache key, tp, tokens), compile-time autotuning on
CASES_D: list[tuple[str, int, str, str, int, int]] = [
    ("qwen3-8b", 2, "aot", "q8", 1, 2048), ("qwen3-1.7b", 2, "aot", "q17", 1, 2048),
    ("qwen3-8b", 36, "pieces", "q8L", 1, 2048), ("qwen3-32b", 2, "pieces", "q32", 2, 3584),
]
# sets "e" (pieces) and "f" (one AOT graph): (shape, tied lm_head, CUBLAS_WORKSPACE_CONFIG,
# tokens), four layers, cold only, compile-time autotuning on, no forward before the window
WS_SM89, WS_SM90 = ":4096:2:16:8", ":4096:8"  # torch's default below sm90 / on sm90-sm12x
CASES_E: list[tuple[str, int, str, int]] = [
    ("qwen3-1.7b", 1, WS_SM89, 2048), ("qwen3-1.7b", 0, WS_SM89, 2048),
    ("qwen3-8b", 0, WS_SM89, 2048), ("qwen3-4b", 1, WS_SM89, 2048), ("qwen3-4b", 1, WS_SM90, 2048),
    ("qwen3-8b", 0, WS_SM90, 2048), ("qwen3-1.7b", 1, WS_SM90, 2048),
]
# set "g": (shape, tied lm_head, CUBLAS_WORKSPACE_CONFIG, the card's L2 in MiB) at 2,048 tokens,
# set e's window otherwise (RTX 4090: 72 MiB L2, sm89; RTX 5060 Ti: 32 MiB, RTX 5070 Ti: 48 MiB,
# sm120)
CASES_G: list[tuple[str, int, str, int]] = [
    ("qwen3-1.7b", 1, WS_SM89, 72), ("qwen3-8b", 0, WS_SM89, 72), ("qwen3-4b", 1, WS_SM90, 32),
    ("qwen3-8b", 0, WS_SM90, 48), ("qwen3-4b", 1, WS_SM89, 72),
]
CASES_F: list[tuple[str, int, str, int]] = [
    ("qwen3-1.7b", 1, WS_SM89, 2048), ("qwen3-4b", 1, WS_SM89, 2048),
    ("qwen3-8b", 0, WS_SM89, 2048), ("qwen3-1.7b", 1, WS_SM90, 2048),
    ("qwen3-4b", 1, WS_SM90, 2048), ("qwen3-8b", 0, WS_SM90, 2048), ("qwen3-8b", 0, WS_SM90, 8192),
]

# (case, shape, tokens, tp, combo, phase, cache key); phase 2 reuses phase 1's cache of that key
CASES: list[tuple[str, str, int, int, bool, str, str]] = [
    ("llama8b-t2048-tp1-cold", "llama-3.1-8b", 2048, 1, True, "cold", "l8"),
    ("llama8b-t2048-tp1-nocombo", "llama-3.1-8b", 2048, 1, False, "cold", "l8nc"),
    ("llama8b-t8192-tp1-cold", "llama-3.1-8b", 8192, 1, True, "cold", "l8big"),
    ("llama8b-t2048-tp2-cold", "llama-3.1-8b", 2048, 2, True, "cold", "l8tp2"),
    ("qwen7b-t2048-tp1-cold", "qwen2.5-7b", 2048, 1, True, "cold", "q7"),
    ("qwen32b-t8192-tp1-cold", "qwen3-32b", 8192, 1, True, "cold", "q32"),
    ("qwen32b-t8192-tp2-cold", "qwen3-32b", 8192, 2, True, "cold", "q32tp2"),
    ("llama8b-t2048-tp1-warm", "llama-3.1-8b", 2048, 1, True, "warm", "l8"),
    ("llama8b-t2048-tp1-kperf", "llama-3.1-8b", 2048, 1, True, "kperf", "l8"),
    ("qwen7b-t2048-tp1-kperf", "qwen2.5-7b", 2048, 1, True, "kperf", "q7"),
]

# set "b": full-depth stacks (rows 1104 / 907-909's shapes), and the whole model as one graph
# (attention an opaque custom op, no split), compiled plainly or through Dynamo's AOT path
# (``aot_compile`` under ``enable_aot_compile``, as vLLM 0.26.0 / 0.27.1 compilation/wrapper.py
# and decorators.py do by default on torch >= 2.10): (case, shape, tokens, layers, mode)
CASES_B: list[tuple[str, str, int, int, str]] = [
    ("llama8b-t2048-tp1-L32-cold", "llama-3.1-8b", 2048, 32, "pieces"),
    ("qwen7b-t2048-tp1-L28-cold", "qwen2.5-7b", 2048, 28, "pieces"),
    ("llama8b-t2048-tp1-whole-cold", "llama-3.1-8b", 2048, 2, "whole"),
    ("llama8b-t2048-tp1-aot-cold", "llama-3.1-8b", 2048, 2, "aot"),
    ("qwen32b-t8192-tp1-aot-cold", "qwen3-32b", 8192, 2, "aot"),
    ("llama8b-t2048-tp1-L32-aot-cold", "llama-3.1-8b", 2048, 32, "aot"),
]

BENCH_FUNCS = {"benchmark_fused_nodes", "benchmark_codegened_module", "benchmark_combo_kernel",
               "speedup_by_combo_kernel", "get_args", "benchmark_all_configs", "clone_args",
               "should_pad_bench", "benchmark_gpu", "do_bench", "benchmark", "bench",
               "autotune_to_one_config", "benchmark_example_value", "speedup_by_fusion"}


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    if spec.get("ws"):  # set before the first GEMM, when torch sizes the cuBLAS workspace
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = spec["ws"]
    if spec.get("l2"):  # set g: another card's L2 size for the benchmarker's flush buffer
        from torch._inductor.runtime import benchmarking

        l2 = int(spec["l2"])
        benchmarking.InductorBenchmarker.L2_cache_size = property(  # type: ignore[assignment]
            lambda _self: l2)
    dev = os.environ.get("MEMPROBE_DEVICE", "cuda")
    dt = torch.bfloat16
    vocab, hidden, inter, heads, kv_heads, hd, qkv_bias, qk_norm, max_pos = SHAPES[spec["shape"]]
    tp = spec["tp"]
    t = spec["tokens"]
    vocab_l, inter_l = -(-vocab // tp), inter // tp
    heads_l, kv_l = heads // tp, max(1, kv_heads // tp)
    q_size, kv_size = heads_l * hd, kv_l * hd
    layers = spec.get("layers", 2)
    eps = 1e-6

    if tp > 1:
        ar = torch.library.custom_op("memprobe::all_reduce", lambda x: x.clone(),
                                     mutates_args=(), schema="(Tensor x) -> Tensor")
        ar.register_fake(lambda x: torch.empty_like(x))

    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        return x if tp == 1 else torch.ops.memprobe.all_reduce(x)

    mode = spec.get("mode", "pieces")
    if mode != "pieces":
        attn_op = torch.library.custom_op("memprobe::attn", lambda q: torch.zeros_like(q),
                                          mutates_args=(), schema="(Tensor q) -> Tensor")
        attn_op.register_fake(lambda q: torch.empty_like(q))

    def w(*shape: int) -> torch.Tensor:
        return torch.empty(shape, device=dev, dtype=dt).normal_(0, 0.02)

    embed = w(vocab_l, hidden)
    inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    freqs = torch.outer(torch.arange(max_pos, device=dev, dtype=torch.float32), inv)
    cos_sin = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dt)
    lw = []
    for _ in range(layers):
        lw.append({
            "n1": torch.ones(hidden, device=dev, dtype=dt),
            "qkv": w(q_size + 2 * kv_size, hidden),
            "qkv_b": w(q_size + 2 * kv_size) if qkv_bias else None,
            "qn": torch.ones(hd, device=dev, dtype=dt) if qk_norm else None,
            "kn": torch.ones(hd, device=dev, dtype=dt) if qk_norm else None,
            "o": w(hidden, q_size),
            "n2": torch.ones(hidden, device=dev, dtype=dt),
            "gu": w(2 * inter_l, hidden),
            "down": w(hidden, inter_l),
        })
    final_n = torch.ones(hidden, device=dev, dtype=dt)
    lm = None  # sets e / f: the lm_head, the table itself where tied, else a table of its own
    if "tied" in spec:
        lm = embed if spec["tied"] else w(vocab_l, hidden)

    def rms(x: torch.Tensor, weight: torch.Tensor,
            residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        orig = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
        res = x.to(orig)
        var = x.pow(2).mean(dim=-1, keepdim=True)
        x = (x * torch.rsqrt(var + eps)).to(orig) * weight
        return x, res

    def rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cache: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)

        def apply(x: torch.Tensor) -> torch.Tensor:
            shape = x.shape
            x = x.view(x.shape[0], -1, hd)
            x1, x2 = torch.chunk(x, 2, dim=-1)
            return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).reshape(shape)

        return apply(q), apply(k)

    def qkv_part(h: torch.Tensor, positions: torch.Tensor, p: dict[str, Any], cs: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        qkv = F.linear(h, p["qkv"], p["qkv_b"])
        q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
        if qk_norm:
            q = rms(q.reshape(-1, heads_l, hd), p["qn"])[0].reshape(q.shape)
            k = rms(k.reshape(-1, kv_l, hd), p["kn"])[0].reshape(k.shape)
        q, k = rope(positions, q, k, cs)
        return q, k, v

    def embed_fn(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        if tp == 1:
            return F.embedding(ids, table)
        start = 0
        mask = (ids >= start) & (ids < start + vocab_l)
        masked = (ids - start) * mask
        out = F.embedding(masked, table)
        out = out.masked_fill(~mask.unsqueeze(-1), 0)
        return all_reduce(out)

    def first_piece(ids: torch.Tensor, positions: torch.Tensor, table: torch.Tensor,
                    cs: torch.Tensor, p: dict[str, Any]) -> tuple[torch.Tensor, ...]:
        h = embed_fn(ids, table)
        residual = h
        h = rms(h, p["n1"])[0]
        q, k, v = qkv_part(h, positions, p, cs)
        return q, k, v, residual

    def mlp_part(attn: torch.Tensor, residual: torch.Tensor, p: dict[str, Any]
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        o = all_reduce(F.linear(attn, p["o"]))
        h, residual = rms(o, p["n2"], residual)
        gu = F.linear(h, p["gu"])
        act = F.silu(gu[..., :inter_l]) * gu[..., inter_l:]
        d = all_reduce(F.linear(act, p["down"]))
        return d, residual

    def mid_piece(attn: torch.Tensor, residual: torch.Tensor, positions: torch.Tensor,
                  cs: torch.Tensor, p: dict[str, Any], pn: dict[str, Any]
                  ) -> tuple[torch.Tensor, ...]:
        d, residual = mlp_part(attn, residual, p)
        h, residual = rms(d, pn["n1"], residual)
        q, k, v = qkv_part(h, positions, pn, cs)
        return q, k, v, residual

    def last_piece(attn: torch.Tensor, residual: torch.Tensor, p: dict[str, Any],
                   fn: torch.Tensor) -> torch.Tensor:
        d, residual = mlp_part(attn, residual, p)
        return rms(d, fn, residual)[0]

    def attention(q: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(q)

    opts: dict[str, Any] = {"enable_auto_functionalized_v2": False}
    if spec["combo"]:
        opts.update(combo_kernels=True, benchmark_combo_kernel=True)
    for key in ("size_asserts", "alignment_asserts", "scalar_asserts"):
        opts[key] = False
    import torch._inductor.config as icfg
    opts = {k: v for k, v in opts.items() if hasattr(icfg, k)}
    if spec.get("atc"):  # as torch._inductor.standalone_compile patches it
        opts["triton.autotune_at_compile_time"] = True

    def compiled(fn: Any) -> Any:
        return torch.compile(fn, fullgraph=True, dynamic=None, options=opts)

    pieces = [first_piece, mid_piece, last_piece]
    cpieces = [compiled(f) for f in pieces]

    def forward_pieces(ps: list[Any], ids: torch.Tensor, positions: torch.Tensor
                       ) -> torch.Tensor:
        for x in (ids, positions):
            torch._dynamo.maybe_mark_dynamic(x, 0)
        q, k, v, residual = ps[0](ids, positions, embed, cos_sin, lw[0])
        for i in range(1, layers):
            a = attention(q)
            torch._dynamo.maybe_mark_dynamic(a, 0)
            torch._dynamo.maybe_mark_dynamic(residual, 0)
            del q, k, v
            q, k, v, residual = ps[1](a, residual, positions, cos_sin, lw[i - 1], lw[i])
        a = attention(q)
        del q, k, v
        torch._dynamo.maybe_mark_dynamic(a, 0)
        torch._dynamo.maybe_mark_dynamic(residual, 0)
        return ps[2](a, residual, lw[-1], final_n)  # type: ignore[no-any-return]

    def whole(ids: torch.Tensor, positions: torch.Tensor, table: torch.Tensor,
              cs: torch.Tensor, ws: list[dict[str, Any]], fn: torch.Tensor) -> torch.Tensor:
        q, _k, _v, residual = first_piece(ids, positions, table, cs, ws[0])
        for i in range(1, layers):
            a = torch.ops.memprobe.attn(q)
            q, _k, _v, residual = mid_piece(a, residual, positions, cs, ws[i - 1], ws[i])
        return last_piece(torch.ops.memprobe.attn(q), residual, ws[-1], fn)

    if mode != "pieces":
        wopts = dict(opts)
        if hasattr(torch.compiler, "skip_all_guards_unsafe"):
            wopts["guard_filter_fn"] = torch.compiler.skip_all_guards_unsafe
        if mode == "aot":
            with torch._dynamo.config.patch(enable_aot_compile=True):
                cwhole = torch.compile(whole, fullgraph=True, dynamic=False, options=wopts)
        else:
            cwhole = torch.compile(whole, fullgraph=True, dynamic=False, options=wopts)
        state: dict[str, Any] = {}

        def first_whole(ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
            args = (ids, positions, embed, cos_sin, lw, final_n)
            if mode == "aot":
                state["fn"] = cwhole.aot_compile((args, {}))
            else:
                state["fn"] = cwhole
            return state["fn"](*args)  # type: ignore[no-any-return]

        cpieces = [first_whole, None, None]

    def forward(ps: list[Any], ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if mode != "pieces" and ps is cpieces:
            torch._dynamo.mark_dynamic(ids, 0)
            torch._dynamo.mark_dynamic(positions, 0)
            if "fn" in state:
                return state["fn"](  # type: ignore[no-any-return]
                    ids, positions, embed, cos_sin, lw, final_n)
            return ps[0](ids, positions)  # type: ignore[no-any-return]
        return forward_pieces(ps, ids, positions)

    ids = torch.randint(0, vocab_l, (t,), device=dev)
    positions = torch.arange(t, device=dev) % max_pos
    torch.cuda.synchronize()
    out: dict[str, Any] = {"spec": spec, "weights_gib": torch.cuda.memory_allocated() / GIB}

    def peak_of(call: Any) -> float:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        r = call()
        torch.cuda.synchronize()
        del r
        return (torch.cuda.max_memory_allocated() - base) / GIB

    if "tied" in spec:  # sets e / f: as in vLLM, the process's first GEMM is inside the window
        out["eager_peak_gib"] = out["eager_peak2_gib"] = 0  # not run
    else:
        out["eager_peak_gib"] = peak_of(lambda: forward(pieces, ids, positions))
        out["eager_peak2_gib"] = peak_of(lambda: forward(pieces, ids, positions))
    if spec.get("window"):
        def snap() -> tuple[int, int, int, int]:
            """free, total, reserved, allocated after vLLM's gc.collect() + empty_cache()"""
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.synchronize()
            f, tot = torch.cuda.mem_get_info()
            return f, tot, torch.cuda.memory_reserved(), torch.cuda.memory_allocated()

        for k in ("first", "second"):
            if k == "first" and spec.get("atc"):
                torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
            b = snap()
            torch.cuda.reset_peak_memory_stats()
            t0 = time.time()
            if lm is None:
                r = forward(cpieces, ids, positions)
            else:  # and the greedy sampler's logits GEMM on 256 rows
                r = F.linear(forward(cpieces, ids, positions)[:256], lm)
            torch.cuda.synchronize()
            del r
            pk = torch.cuda.max_memory_allocated()
            a = snap()
            if lm is not None:  # the large segments kept after the window, their live blocks
                out[k + "_segs"] = [
                    (sg["total_size"] / 2**20,
                     [(x["size"] / 2**20, [f["filename"].split("/")[-1] + ":" + f["name"]
                                           for f in x.get("frames", [])][:10])
                      for x in sg["blocks"] if x["state"] == "active_allocated"])
                    for sg in torch.cuda.memory._snapshot()["segments"]
                    if sg["total_size"] >= 40 << 20 and sg.get("segment_type") == "large"]
            out[k + "_call_window"] = {
                "s": round(time.time() - t0, 1),
                "torch_peak_increase_gib": (pk - b[3]) / GIB,
                "transient_peak_headroom_gib": (pk - a[3]) / GIB,
                "non_torch_increase_gib": ((a[1] - a[0] - a[2]) - (b[1] - b[0] - b[2])) / GIB,
                "total_consumed_gib": (b[0] - a[0]) / GIB,
                "reserved_increase_gib": (a[2] - b[2]) / GIB}
            if k == "first" and spec.get("atc"):
                out["trace"] = _classify(torch.cuda.memory._snapshot(), b[3])
                torch.cuda.memory._record_memory_history(enabled=None)
        return out
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
    t0 = time.time()
    base = torch.cuda.memory_allocated()
    out["first_call_peak_gib"] = peak_of(lambda: forward(cpieces, ids, positions))
    out["first_call_s"] = round(time.time() - t0, 1)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    out["second_call_peak_gib"] = peak_of(lambda: forward(cpieces, ids, positions))
    out["trace"] = _classify(snap, base)
    return out


def _classify(snap: dict[str, Any], base: int) -> dict[str, Any]:
    def cls(frames: list[dict[str, Any]]) -> str:
        names = {f.get("name", "") for f in frames}
        files = [f.get("filename", "") for f in frames]
        if names & BENCH_FUNCS or any("benchmark" in n for n in names):
            return "bench"
        if any("_dynamo/convert_frame.py" in f for f in files):
            return "compile"
        return "run"

    live: dict[int, tuple[int, str]] = {}
    by = {"bench": 0, "compile": 0, "run": 0}
    peak_by = dict(by)
    total, peak, at_peak = 0, 0, dict(by)
    big: list[dict[str, Any]] = []
    for dev_trace in snap.get("device_traces", [])[:1]:
        for ev in dev_trace:
            act, addr, size = ev.get("action"), ev.get("addr"), ev.get("size", 0)
            if act == "alloc":
                c = cls(ev.get("frames", []))
                live[addr] = (size, c)
                by[c] += size
                total += size
                peak_by[c] = max(peak_by[c], by[c])
                if total > peak:
                    peak, at_peak = total, dict(by)
                if size >= 32 << 20:
                    fr = [f"{Path(f.get('filename', '')).name}:{f.get('name', '')}"
                          for f in ev.get("frames", [])
                          if any(s in f.get("filename", "") for s in
                                 ("_inductor", "triton", "torchinductor", "gpu_compile_peak"))]
                    big.append({"mib": round(size / (1 << 20), 1), "class": c,
                                "frames": fr[:12]})
            elif act in ("free_requested",) and addr in live:
                size, c = live.pop(addr)
                by[c] -= size
                total -= size
    big.sort(key=lambda b: -b["mib"])
    return {"traced_peak_gib": peak / GIB, "at_peak_gib": {k: v / GIB for k, v in at_peak.items()},
            "class_peak_gib": {k: v / GIB for k, v in peak_by.items()},
            "largest": big[:25], "n_large": len(big)}


def _env(cache: Path, phase: str) -> dict[str, str]:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
    env["TRITON_CACHE_DIR"] = str(cache / "triton")
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if phase == "kperf":
        env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
        env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    return env


def _jobs(case_set: str) -> list[list[tuple[str, dict[str, Any], str]]]:
    """The processes of each phase: (case, spec, cache key)."""
    if case_set == "c":
        return [[(f"{s}-L{n}-{m}-{ph}", {"case": s, "shape": s, "tokens": 2048, "tp": 1,
                  "combo": True, "phase": ph, "layers": n, "mode": m, "window": True}, key)]
                for s, n, m, key in CASES_C for ph in ("cold", "warm")]
    if case_set == "d":
        return [[(f"{s}-L{n}-{m}-tp{tp}-t{tok}-{ph}", {
            "case": s, "shape": s, "tokens": tok, "tp": tp, "combo": True, "phase": ph,
            "layers": n, "mode": m, "window": True, "atc": True}, key)]
                for s, n, m, key, tp, tok in CASES_D for ph in ("cold", "warm")]
    if case_set in ("e", "f"):
        mode, cases = ("pieces", CASES_E) if case_set == "e" else ("aot", CASES_F)
        return [[(f"{s}-tied{t}-ws{'8' if ws == WS_SM89 else '32'}"
                  + ("" if case_set == "e" else f"-t{n}-aot"),
                  {"case": s, "shape": s, "tokens": n, "tp": 1, "combo": True, "phase": "cold",
                   "layers": 4, "mode": mode, "window": True, "atc": True, "tied": t, "ws": ws},
                  f"k{i}")] for i, (s, t, ws, n) in enumerate(cases)]
    if case_set == "g":
        return [[(f"{s}-tied{t}-ws{'8' if ws == WS_SM89 else '32'}-l2_{l2}MiB",
                  {"case": s, "shape": s, "tokens": 2048, "tp": 1, "combo": True, "phase": "cold",
                   "layers": 4, "mode": "pieces", "window": True, "atc": True, "tied": t,
                   "ws": ws, "l2": l2 << 20}, f"k{i}")]
                for i, (s, t, ws, l2) in enumerate(CASES_G)]
    if case_set == "b":
        return [[(name, {"case": name, "shape": shape, "tokens": tokens, "tp": 1, "combo": True,
                         "phase": "cold", "layers": layers, "mode": mode}, name)
                 for name, shape, tokens, layers, mode in CASES_B]]
    return [[(name, {"case": name, "shape": shape, "tokens": tokens, "tp": tp, "combo": combo,
                     "phase": ph}, key)
             for name, shape, tokens, tp, combo, ph, key in CASES if ph in phase]
            for phase in (("cold",), ("warm", "kperf"))]


def _driver(out: Path, timeout_s: int, case_set: str) -> None:
    import torch

    root = Path(tempfile.mkdtemp(prefix="cpeak"))
    results: dict[str, Any] = {
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "l2_bytes": getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None),
        "triton": __import__("triton").__version__,
        "command": "PYTHONPATH=. python recorders/gpu_compile_peak.py --out $OUT"
                   + ("" if case_set == "a" else f" --set {case_set}"),
        "cases": {}}
    try:
        results["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        results["driver"] = f"unread: {e}"
    start = time.time()
    for jobs in _jobs(case_set):
        procs = []
        for name, spec, key in jobs:
            cache = root / key
            cache.mkdir(exist_ok=True)
            log = open(out / f"{name}.log", "w")  # noqa: SIM115
            p = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)],
                                 stdout=subprocess.PIPE, stderr=log, text=True,
                                 env=_env(cache, spec["phase"]))
            procs.append((name, p, log))
        for name, p, log in procs:
            left = max(5.0, timeout_s - (time.time() - start))
            try:
                so, _ = p.communicate(timeout=left)
                line = [s for s in so.splitlines() if s.startswith("{")]
                results["cases"][name] = (json.loads(line[-1]) if line
                                          else {"error": f"rc {p.returncode}"})
            except subprocess.TimeoutExpired:
                p.kill()
                results["cases"][name] = {"error": "timeout"}
            log.close()
    # a failed case keeps the end of its log in the file; no log comes back on its own
    for name, res in results["cases"].items():
        f = out / f"{name}.log"
        if "error" in res and f.exists():
            res["log_tail"] = f.read_text()[-3000:]
        f.unlink(missing_ok=True)
    tag = results["gpu"].replace("NVIDIA ", "").split()[0].lower()
    suffix = "" if case_set == "a" else "-" + case_set
    (out / f"compile-peak{suffix}-{tag}.json").write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child")
    ap.add_argument("--timeout", type=int, default=270)
    ap.add_argument("--set", default="a", choices=("a", "b", "c", "d", "e", "f", "g"),
                    dest="case_set",
                    help="a: CASES; b: CASES_B; c: CASES_C (the budget window); d: CASES_D "
                         "(the window, compile-time autotuning on); e / f: CASES_E / CASES_F "
                         "(the first GEMM in the window, the logits GEMM, workspace sizes); "
                         "g: CASES_G (set e with the RTX cards' L2 sizes)")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child(json.loads(a.child))))
        return
    assert a.out is not None
    a.out.mkdir(parents=True, exist_ok=True)
    _driver(a.out, a.timeout, a.case_set)


if __name__ == "__main__":
    main()

"""A torch-level reproduction of SGLang's decode CUDA-graph window, with and without the lm_head
inside the captured forward: does the logits processor's GEMM output land in the graph pool, and
what does each piece of the window add to the free-memory drop SGLang logs as "Capture cuda graph
end. … mem usage=X GB"?

SGLang's window (read in the 0.5.1, 0.5.10 and 0.5.19 wheels): ``ModelRunner.init_device_graphs``
reads ``get_available_gpu_memory`` (after ``empty_cache``), constructs ``CudaGraphRunner`` (input
buffers and the fp32 ``next_token_logits_buffer`` [max_bs, vocab] on the runner's stream, then
``capture`` under ``graph_capture()``, which makes a new stream: per batch size, largest first,
two eager warm-ups of ``run_once`` on that stream, then ``torch.cuda.graph(graph, pool=<one
global pool>, stream=<that stream>)`` of ``run_once``), and reads the free memory again. The
captured forward is the whole model's, ending in ``LogitsProcessor._get_logits``:
``torch.matmul(hidden, lm_head.weight.T)`` (a new [bs, vocab] tensor in the model dtype) copied
into the fp32 buffer.

Each case runs in a fresh process on a stand-in decoder (bf16, hidden 4,096, 4 layers of RMSNorm,
a qkv GEMM, an o_proj GEMM of the query part in place of attention, RMSNorm, gate_up GEMM, SiLU
and mul, down GEMM; vocabulary 151,936, Qwen3's): the weights, the first fill kernel, a forward
stream (torch's stream pool, as SGLang 0.5.9+ makes it before the load) and ``init_cublas``'s
GEMM come first; then the window as SGLang runs it. ``lm_head`` off replaces the logits by a copy
of the final hidden states into a buffer. The readings: ``mem_get_info`` after ``empty_cache``
(SGLang's), torch's reserved bytes, and the caching allocator's segments by pool and stream
(``torch.cuda.memory_snapshot``) at each step. Run on the GPU machine from the repository root::

    PYTHONPATH=. python recorders/gpu_sglang_capture_window.py --out $OUT

Writes ``sglang-capture-window.json`` with the torch version, the GPU, the driver and this
command.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HIDDEN, LAYERS, VOCAB, INTER, HEADS_QKV = 4096, 4, 151_936, 12_288, 6144
# SGLang 0.5.3+'s default grid cut at 256 (ServerArgs._generate_cuda_graph_batch_sizes), and the
# small grid a --cuda-graph-max-bs 8 run captures
GRIDS = {"bs256": [1, 2, 4, 8, 12, *range(16, 257, 8)], "bs8": [1, 2, 4, 8]}
CASES = [(grid, lm_head) for grid in GRIDS for lm_head in (True, False)]


def one(grid: str, lm_head: bool) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    dev, bf = "cuda", torch.bfloat16
    sizes = GRIDS[grid]
    max_bs = max(sizes)

    def w(*shape: int) -> torch.Tensor:
        return torch.empty(*shape, device=dev, dtype=bf).normal_(0, 0.02)

    emb, head = w(VOCAB, HIDDEN), w(VOCAB, HIDDEN)
    layers = [(w(HEADS_QKV, HIDDEN), w(HIDDEN, HIDDEN), w(2 * INTER, HIDDEN), w(HIDDEN, INTER))
              for _ in range(LAYERS)]
    norm = torch.ones(HIDDEN, device=dev, dtype=bf)
    torch.zeros(1, device=dev)  # the process's first fill kernel (lazy module loading)
    torch.cuda.Stream()  # SGLang 0.5.9+ ModelRunner.forward_stream: makes the stream pool
    a = torch.ones((16, 16), device=dev, dtype=bf)
    _ = a @ a  # model_runner.py init_cublas
    torch.cuda.synchronize()

    steps: list[dict[str, Any]] = []

    def reading(name: str) -> int:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # get_available_gpu_memory(empty_cache=True)
        free, total = torch.cuda.mem_get_info()
        reserved = torch.cuda.memory_reserved()
        segs: dict[str, int] = {}
        for seg in torch.cuda.memory_snapshot():
            pool = "graph pool" if seg.get("segment_pool_id", (0, 0)) != (0, 0) else "ordinary"
            key = f"{pool}, stream {seg['stream']}"
            segs[key] = segs.get(key, 0) + int(seg["total_size"])
        steps.append({"step": name, "used": total - free, "reserved": reserved,
                      "non_torch": total - free - reserved, "segments": segs})
        return int(free)

    before = reading("before")
    # CudaGraphRunner.__init__: the graph inputs and the fp32 logits buffer
    input_ids = torch.zeros((max_bs,), dtype=torch.int64, device=dev)
    logits_buffer = torch.zeros((max_bs, VOCAB), dtype=torch.float, device=dev)
    hidden_buffer = torch.zeros((max_bs, HIDDEN), dtype=bf, device=dev)
    reading("buffers")

    def run_once(bs: int) -> torch.Tensor:
        x = F.embedding(input_ids[:bs], emb)
        for qkv, o, gu, down in layers:
            h = F.rms_norm(x, (HIDDEN,), norm)
            q = (h @ qkv.T)[:, :HIDDEN]
            x = x + q @ o.T
            h = F.rms_norm(x, (HIDDEN,), norm)
            g = h @ gu.T
            x = x + (F.silu(g[:, :INTER]) * g[:, INTER:]) @ down.T
        h = F.rms_norm(x, (HIDDEN,), norm)
        if lm_head:  # LogitsProcessor._get_logits, then _copy_logits_to_buffer
            logits = torch.matmul(h, head.T)
            logits_buffer[:bs].copy_(logits)
            return logits_buffer[:bs]
        hidden_buffer[:bs].copy_(h)
        return hidden_buffer[:bs]

    stream = torch.cuda.Stream()  # GroupCoordinator.graph_capture
    stream.wait_stream(torch.cuda.current_stream())
    pool = torch.cuda.graph_pool_handle()
    graphs, outs = [], []
    with torch.cuda.stream(stream):
        for i, bs in enumerate(reversed(sizes)):
            for _ in range(2):
                torch.cuda.synchronize()
                run_once(bs)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=stream):
                out = run_once(bs)
            graphs.append(g)
            outs.append(out)
            if i == 0:
                reading("first_capture")
    after = reading("after")
    return {"grid": grid, "lm_head": lm_head, "graphs": len(graphs),
            "window_bytes": before - after, "steps": steps,
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        grid, flag = args.case.split(":")
        print(json.dumps(one(grid, flag == "1")))
        return
    import torch

    runs = []
    for grid, lm_head in CASES:
        p = subprocess.run([sys.executable, __file__, "--out", args.out,
                            "--case", f"{grid}:{int(lm_head)}"],
                           capture_output=True, text=True, timeout=240)
        if p.returncode:
            runs.append({"grid": grid, "lm_head": lm_head, "error": p.stderr[-3000:]})
        else:
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1])[:600], flush=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout
    out = {"command": "PYTHONPATH=. python recorders/gpu_sglang_capture_window.py --out $OUT",
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(0), "nvidia_smi": smi.strip(),
           "model": {"hidden": HIDDEN, "layers": LAYERS, "vocab": VOCAB,
                     "intermediate": INTER, "qkv": HEADS_QKV, "dtype": "bfloat16"},
           "runs": runs}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "sglang-capture-window.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

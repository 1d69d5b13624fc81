"""Measure the peak of vLLM V0's sampler in the profile run, on a GPU, for the V0 sampler rule
(``memprof.core.terms.activation.V0_DRIVER_SAMPLER``).

Run on the GPU machine from the repository root (torch with CUDA)::

    PYTHONPATH=. python recorders/gpu_v0_sampler.py --out $OUT

What is run: the tensor operations vLLM 0.7.2's ``Sampler.forward`` performs in the profile run
(``ModelRunner._dummy_run``: every request with ``SamplingParams(top_p=0.99,
top_k=vocab_size - 1)``, so the top-k/top-p path runs; ``VLLM_USE_FLASHINFER_SAMPLER`` unset, so
``_apply_top_k_top_p`` is the torch one), written here from that algorithm with the same
variables alive at each step: the fp32 copy of the logits and the temperature division; the
ascending sort (values and int64 indices), the top-k threshold gather and its boolean mask, the
softmax of the sorted values, their cumulative sum and the top-p boolean mask, the scatter back
into a new tensor (all alive until ``_apply_top_k_top_p`` returns); then the softmax and
log-softmax in fp32 and the multinomial sample (an exponential noise tensor the size of the
probabilities). The gathered bf16 logits ``[R, V]``, which the caller holds, are allocated
first and are the baseline.

For each (R, V) the file ``v0-sampler-<gpu>.json`` holds ``torch.cuda.max_memory_allocated()``
above that baseline, in a fresh process, and the bytes per element of ``R·V``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

# (rows R = max_num_seqs of the profile run, vocab V): row 48's Qwen2 vocab at V0's 256
# sequences first, then other shapes to see the per-element cost hold
SHAPES = [(256, 152064), (256, 32000), (64, 152064), (256, 129280), (128, 100000), (8, 151936)]

CHILD = r"""
import json, sys, torch
r, v = json.loads(sys.argv[1])
dev = "cuda"
logits_bf16 = torch.randn(r, v, device=dev, dtype=torch.bfloat16)  # held by the caller
temperatures = torch.ones(r, device=dev)
top_ps = torch.full((r,), 0.99, device=dev)
top_ks = torch.full((r,), v - 1, device=dev, dtype=torch.int)
torch.cuda.synchronize()
base = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()

def apply_top_k_top_p(logits, p, k):
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    top_k_mask = logits_sort.size(1) - k.to(torch.long)
    top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
    top_k_mask = logits_sort < top_k_mask
    logits_sort.masked_fill_(top_k_mask, -float("inf"))
    probs_sort = logits_sort.softmax(dim=-1)
    probs_sum = probs_sort.cumsum(dim=-1)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
    top_p_mask[:, -1] = False
    logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return torch.empty_like(logits_sort).scatter_(dim=-1, index=logits_idx, src=logits_sort)

def sampler(logits):
    logits = logits.to(torch.float)
    logits.div_(temperatures.unsqueeze(dim=1))
    logits = apply_top_k_top_p(logits, top_ps, top_ks)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    logprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float)
    q = torch.empty_like(probs).exponential_(1.0)
    sampled = probs.div_(q).argmax(dim=1).view(-1, 1)
    return sampled, logprobs

out = sampler(logits_bf16)
torch.cuda.synchronize()
peak = torch.cuda.max_memory_allocated() - base
print(json.dumps({"rows": r, "vocab": v, "peak_above_bf16_logits": peak,
                  "bytes_per_element": peak / (r * v)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", default="",
                    help="R:V,R:V,... instead of the default shapes (another file name)")
    args = ap.parse_args()
    shapes = ([tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",")]
              if args.shapes else SHAPES)
    import torch

    rows = []
    for r, v in shapes:
        res = subprocess.run([sys.executable, "-c", CHILD, json.dumps([r, v])], check=True,
                             capture_output=True, text=True)
        rows.append(json.loads(res.stdout))
        print(rows[-1])
    gpu = torch.cuda.get_device_name(0)
    out = {"gpu": gpu, "torch": torch.__version__,
           "command": "PYTHONPATH=. python recorders/gpu_v0_sampler.py --out $OUT",
           "shapes": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    if args.shapes:
        out["command"] += f" --shapes {args.shapes}"
    suffix = "-rows" if args.shapes else ""
    (args.out / f"v0-sampler-{name}{suffix}.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
